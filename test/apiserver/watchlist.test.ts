// The test API server's streaming watch-list (KEP-3157), as the real server
// answers it: the state as ADDED events and a BOOKMARK annotated
// k8s.io/initial-events-end, then live events; the 422 of a server with the
// WatchList gate off and of one before 1.27; sendInitialEvents refused on a
// list; a version ahead of the server (504 "Too large resource version", in
// the stream and on a list); and the faults that break a watch-list's
// initial events (410) or make the server lag behind.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { call, type ClientOptions, WatchStream } from './client.js';
import { node } from './fixtures.js';
import { INITIAL_EVENTS_END, type WatchListSupport } from './listoptions.js';
import { TestApiServer } from './server.js';

const WATCH_LIST = 'watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true';

interface Annotated {
  metadata: { resourceVersion?: string; annotations?: Record<string, string> };
}

describe('test API server: watch-list', () => {
  const servers: TestApiServer[] = [];
  async function serve(watchList?: WatchListSupport): Promise<{ server: TestApiServer; c: ClientOptions }> {
    const server = new TestApiServer({ bookmarkIntervalMs: 0, ...(watchList ? { watchList } : {}) });
    await server.start();
    servers.push(server);
    for (const n of ['n1', 'n2', 'n3']) server.create('nodes', node(n, '192.0.2.1'));
    return { server, c: { url: server.url, ca: server.caCert, token: server.token } };
  }
  after(async () => {
    for (const s of servers) await s.dispose();
  });

  let on: { server: TestApiServer; c: ClientOptions };
  before(async () => {
    on = await serve();
  });

  it('streams the state as ADDED events, ends it with the annotated BOOKMARK, then goes on live', async () => {
    const { server, c } = on;
    const rv = server.store.resourceVersion;
    for (const from of ['', '0', String(rv - 2), String(rv)]) {
      const w = new WatchStream(c, `/api/v1/nodes?${WATCH_LIST}&resourceVersion=${from}`);
      const evs = await w.atLeast(4);
      assert.deepEqual(
        evs.map((e) => `${e.type} ${e.object.metadata.name ?? ''}`),
        ['ADDED n1', 'ADDED n2', 'ADDED n3', 'BOOKMARK '],
        `from ${JSON.stringify(from)}`,
      );
      const end = evs[3]!.object as Annotated;
      assert.deepEqual(end.metadata.annotations, { [INITIAL_EVENTS_END]: 'true' });
      assert.equal(end.metadata.resourceVersion, String(server.store.resourceVersion));
      w.close();
    }
    const live = new WatchStream(c, `/api/v1/nodes?${WATCH_LIST}&resourceVersion=`);
    await live.atLeast(1, 'BOOKMARK');
    server.create('nodes', node('n4', '192.0.2.4'));
    assert.equal((await live.atLeast(5)).at(-1)!.object.metadata.name, 'n4');
    server.delete('nodes', undefined, 'n4');
    assert.equal((await live.atLeast(6)).at(-1)!.type, 'DELETED');
    live.close();
  });

  it('serves the current state for a compacted version (no 410), and no end bookmark without allowWatchBookmarks', async () => {
    const { server, c } = on;
    const old = server.store.resourceVersion;
    server.create('nodes', node('n5', '192.0.2.5'));
    server.delete('nodes', undefined, 'n5');
    server.compact();
    const w = new WatchStream(c, `/api/v1/nodes?${WATCH_LIST}&resourceVersion=${old}`);
    assert.deepEqual(
      (await w.atLeast(4)).map((e) => e.type),
      ['ADDED', 'ADDED', 'ADDED', 'BOOKMARK'],
    );
    w.close();
    const plain = new WatchStream(
      c,
      '/api/v1/nodes?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=',
    );
    await plain.atLeast(3);
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(
      plain.events.map((e) => e.type),
      ['ADDED', 'ADDED', 'ADDED'],
    );
    plain.close();
  });

  it('answers a version it has not reached with an ERROR 504 "Too large resource version" in the stream', async () => {
    const { server, c } = on;
    const ahead = server.store.resourceVersion + 10;
    const w = new WatchStream(c, `/api/v1/nodes?${WATCH_LIST}&resourceVersion=${ahead}`);
    await w.ended;
    assert.equal(w.status, 200);
    assert.equal(w.events.length, 1);
    const status = w.events[0]!.object as unknown as Record<string, unknown>;
    assert.equal(status['code'], 504);
    assert.equal(status['reason'], 'Timeout');
    assert.deepEqual((status['details'] as { causes: unknown[] }).causes, [
      { reason: 'ResourceVersionTooLarge', message: 'Too large resource version' },
    ]);
  });

  it('refuses what the real server refuses, with 422 Invalid naming the fields', async () => {
    const { c } = on;
    const cases: Array<[string, string, string]> = [
      ['/api/v1/nodes?sendInitialEvents=true', 'sendInitialEvents', 'sendInitialEvents is forbidden for list'],
      [
        '/api/v1/nodes?watch=true&sendInitialEvents=true',
        'resourceVersionMatch',
        'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan',
      ],
      [
        '/api/v1/nodes?watch=true&resourceVersionMatch=NotOlderThan',
        'resourceVersionMatch',
        'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided',
      ],
    ];
    for (const [path, field, detail] of cases) {
      const r = await call(c, 'GET', path);
      assert.equal(r.status, 422, path);
      assert.equal(r.body['reason'], 'Invalid');
      assert.equal(r.body['message'], `ListOptions.meta.k8s.io "" is invalid: ${field}: Forbidden: ${detail}`);
      const details = r.body['details'] as { group: string; kind: string; causes: unknown[] };
      assert.equal(details.kind, 'ListOptions');
      assert.equal(details.group, 'meta.k8s.io');
      assert.deepEqual(details.causes, [{ reason: 'FieldValueForbidden', message: `Forbidden: ${detail}`, field }]);
    }
  });

  it('refuses a watch-list with 422 when its WatchList gate is off, and when it predates the parameter', async () => {
    const expected: Record<'off' | 'unknown', [string, string]> = {
      off: [
        'sendInitialEvents',
        'sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
      ],
      unknown: ['resourceVersionMatch', 'resourceVersionMatch is forbidden for watch'],
    };
    for (const support of ['off', 'unknown'] as const) {
      const { c } = await serve(support);
      const r = await call(c, 'GET', `/api/v1/nodes?${WATCH_LIST}&resourceVersion=`);
      const [field, detail] = expected[support];
      assert.equal(r.status, 422, support);
      assert.equal(r.body['message'], `ListOptions.meta.k8s.io "" is invalid: ${field}: Forbidden: ${detail}`);
      // The old ways still work.
      assert.equal((await call(c, 'GET', '/api/v1/nodes?resourceVersion=0&limit=500')).status, 200);
      const w = new WatchStream(c, '/api/v1/nodes?watch=true&resourceVersion=0');
      assert.equal((await w.atLeast(3)).length, 3);
      w.close();
    }
  });

  it('breaks a watch-list after some initial events with a 410 (expire), and lags behind a version (behind)', async () => {
    const { server, c } = on;
    server.faults.add({ kind: 'expire', verb: 'watchList', resource: 'nodes', times: 1, afterEvents: 2 });
    const w = new WatchStream(c, `/api/v1/nodes?${WATCH_LIST}&resourceVersion=`);
    await w.ended;
    assert.deepEqual(
      w.events.map((e) => `${e.type} ${e.object.code ?? ''}`),
      ['ADDED ', 'ADDED ', 'ERROR 410'],
    );
    assert.equal(server.faults.fired.expire, 1);
    const rv = server.store.resourceVersion;
    server.faults.add({ kind: 'behind', resource: 'nodes', times: 2 });
    const list = await call(c, 'GET', `/api/v1/nodes?resourceVersion=${rv}`);
    assert.equal(list.status, 504);
    assert.equal(list.body['message'], `Timeout: Too large resource version: ${rv}, current: ${rv - 1}`);
    const lagging = new WatchStream(c, `/api/v1/nodes?${WATCH_LIST}&resourceVersion=${rv}`);
    await lagging.ended;
    assert.deepEqual(
      lagging.events.map((e) => `${e.type} ${e.object.code ?? ''}`),
      ['ERROR 504'],
    );
    assert.equal(server.faults.fired.behind, 2);
  });

  it('paced (paceInitialEvents): the state as of the request in batches, then what was committed meanwhile', async () => {
    const server = new TestApiServer({ bookmarkIntervalMs: 0, paceInitialEvents: 2 });
    await server.start();
    servers.push(server);
    for (let i = 1; i <= 7; i++) server.create('nodes', node(`p${i}`, `192.0.2.${i}`));
    const before = server.store.resourceVersion;
    // A write lands after the first batch: the state was taken, the rest of it is still to go.
    const current = server.store.current.bind(server.store);
    let streamingWhenWritten: boolean | undefined;
    server.store.current = (...a) => {
      const items = current(...a);
      setImmediate(() => {
        // A paced watch counts as open only once its initial events are out.
        streamingWhenWritten = server.openWatches === 0;
        server.update('nodes', { ...(node('p1', '192.0.2.99') as object), metadata: { name: 'p1' } });
      });
      return items;
    };
    const c = { url: server.url, ca: server.caCert, token: server.token };
    const w = new WatchStream(c, `/api/v1/nodes?${WATCH_LIST}&resourceVersion=`);
    const evs = await w.atLeast(9);
    w.close();
    assert.deepEqual(
      evs.map((e) => `${e.type} ${e.object.metadata.name ?? ''}`),
      ['ADDED p1', 'ADDED p2', 'ADDED p3', 'ADDED p4', 'ADDED p5', 'ADDED p6', 'ADDED p7', 'BOOKMARK ', 'MODIFIED p1'],
    );
    assert.equal(evs[0]!.object.metadata.resourceVersion, String(before - 6), 'p1 as it was at the request');
    assert.equal(evs[7]!.object.metadata.resourceVersion, String(before));
    assert.equal(evs[8]!.object.metadata.resourceVersion, String(before + 1));
    assert.equal(streamingWhenWritten, true, 'the write landed while the initial events were going out');
  });
});
