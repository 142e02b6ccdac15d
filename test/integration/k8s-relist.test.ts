// The relist after a compacted watch, and the client's indifference to
// closed connections, over real HTTPS with a token against a test API server
// that closes connections as real servers and the proxies in front of them
// do: after a watch ends, after idle time, at random, and just as a client
// reuses one. What must hold, whatever the timing:
// - a GET that dies on a reused connection before any reply is sent again at
//   once on a new one (once); a POST is not, and neither is a GET that failed
//   on a fresh connection;
// - a 410 (an ERROR event ending the watch, then the connection closed) is a
//   relist at once: no backoff, one list per source;
// - the API server never sees a TLS handshake opened and dropped.
// The sources here back off for a minute, so a backoff anywhere would time
// the test out; none is allowed to happen. (Times: bench/recovery.ts.) The
// server refuses the streaming watch-list (its WatchList gate off): these
// are the relists by list; by watch-list: k8s-watchlist.test.ts.

import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { startSources } from '../../src/platform/k8s/sources.js';
import type { KubeClient } from '../../src/platform/k8s/client.js';
import { type ConnectionCloseOptions, TestApiServer } from '../apiserver/server.js';
import { Recorder } from '../apiserver/recorder.js';
import { node, serviceCIDR, slice, svc } from '../apiserver/fixtures.js';
import { clientFor } from '../apiserver/kubeconfig.js';

const never = new AbortController().signal;
const SLOW = { initialMs: 60_000, maxMs: 60_000 };
const RESOURCES = ['services', 'endpointslices', 'nodes', 'servicecidrs'] as const;

/** A deterministic random source (a linear congruential generator), so a failure can be replayed. */
function seeded(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1_103_515_245 + 12_345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function serverWith(connectionClose?: ConnectionCloseOptions): Promise<TestApiServer> {
  // No bookmarks: a quiet watch's resourceVersion stays where its last event left it.
  const server = new TestApiServer({
    bookmarkIntervalMs: 0,
    watchList: 'off',
    ...(connectionClose ? { connectionClose } : {}),
  });
  await server.start();
  cleanup.push(() => server.dispose());
  return server;
}

function client(server: TestApiServer): KubeClient {
  const c = clientFor(server);
  cleanup.push(() => c.close());
  return c;
}

/** Sources on the server that back off for a minute; stopped after the test. */
async function sources(server: TestApiServer, c: KubeClient): Promise<Recorder> {
  const rec = new Recorder();
  const ac = new AbortController();
  const done = startSources({
    client: c,
    nodeName: 'node-a',
    handlers: rec.handlers,
    signal: ac.signal,
    onEvent: rec.onEvent,
    backoff: SLOW,
  });
  cleanup.push(async () => {
    ac.abort();
    await done;
  });
  await rec.until(() => rec.events.filter((e) => e.type === 'watching').length >= 4, 'initial sync and four watches');
  return rec;
}

function seed(server: TestApiServer): void {
  server.create('services', svc('app', 'alpha', '172.30.0.10'));
  server.create('endpointslices', slice('app', 'alpha-1', 'alpha', ['10.180.0.1']));
  server.create('nodes', node('node-a', '192.0.2.1'));
  server.create('servicecidrs', serviceCIDR('kubernetes', ['172.30.0.0/16']));
}

const failures = (rec: Recorder): unknown[] => rec.events.filter((e) => e.type === 'error' || e.type === 'backoff');

describe('k8s client: a kept-alive connection the server closed', () => {
  it('sends a GET again at once on a new connection when the reused one was closed before any reply', async () => {
    const server = await serverWith();
    seed(server);
    const c = client(server);
    await c.list('/api/v1/services', {}, never); // leaves a kept-alive connection in the pool
    assert.equal(server.handshakes, 1);
    server.faults.add({ kind: 'hangup', verb: 'list', resource: 'services', times: 1 });
    const page = await c.list('/api/v1/services', {}, never);
    assert.equal(page.items.length, 1);
    assert.equal(server.faults.fired.hangup, 1, 'the reused connection was closed under the request');
    assert.equal(c.staleRetries, 1);
    assert.equal(server.handshakes, 2, 'the retry went out on a new connection');
    assert.equal(server.abortedHandshakes, 0);
  });

  it('does not send a GET again when it failed on a fresh connection', async () => {
    const server = await serverWith();
    const c = client(server);
    server.faults.add({ kind: 'hangup', verb: 'list', resource: 'services', times: 2 });
    await assert.rejects(c.list('/api/v1/services', {}, never), { code: 'ECONNRESET' });
    assert.equal(server.faults.fired.hangup, 1, 'one attempt only');
    assert.equal(c.staleRetries, 0);
  });

  it('does not send a POST again: the server may have read it before the close', async () => {
    const server = await serverWith();
    const c = client(server);
    await c.list('/api/v1/services', {}, never);
    server.faults.add({ kind: 'hangup', verb: 'write', times: 2 });
    const event = {
      metadata: { namespace: 'default', name: 'e1' },
      eventTime: new Date().toISOString(),
      reportingController: 'kube-proxy-ts',
      reportingInstance: 'node-a',
      action: 'Test',
      reason: 'Test',
      type: 'Normal',
    };
    await assert.rejects(c.postEvent(event), { code: 'ECONNRESET' });
    assert.equal(server.faults.fired.hangup, 1);
    assert.equal(c.staleRetries, 0);
  });
});

describe('k8s sources: the relist after a compacted watch', () => {
  it('relists every source at once, without a backoff or a failed request, when the server closes the 410 connection', async () => {
    const server = await serverWith({ afterWatch: true });
    seed(server);
    const c = client(server);
    const rec = await sources(server, c);
    // One event on every watch (a watch that ends without any is a failure, backed off).
    const n = server.get('nodes', undefined, 'node-a');
    server.update('nodes', { ...n, metadata: { ...n.metadata, labels: { touched: 'yes' } } });
    server.create('services', svc('app', 'beta', '172.30.0.12'));
    server.create('endpointslices', slice('app', 'beta-1', 'beta', ['10.180.0.2']));
    server.create('servicecidrs', serviceCIDR('extra', ['172.31.0.0/16']));
    await rec.until(() => rec.calls.some((l) => l.startsWith('cidrs') && l.includes('extra')), 'the events');
    await rec.until(() => rec.calls.some((l) => l.startsWith('node update')), 'the node event');
    const listsBefore = rec.events.filter((e) => e.type === 'listed').length;
    // Writes no source watches: their resourceVersions stay behind the compaction.
    for (let i = 0; i < 3; i++) server.create('nodes', node(`other-${i}`, `192.0.2.${10 + i}`));
    server.compact();
    // Each watch ends cleanly, its connection is closed, and its resume from before the compaction gets a 410.
    const requestsBefore = server.requests.length;
    server.closeWatches();
    // A change the relist must bring: seen by no open watch.
    server.create('services', svc('app', 'late', '172.30.0.11'));
    await rec.until(() => rec.calls.some((l) => l.startsWith('service add app/late')), 'the change after the 410');
    await rec.until(
      () => rec.events.filter((e) => e.type === 'listed').length >= listsBefore + 4,
      'one relist per source',
    );
    for (const r of RESOURCES) {
      assert.equal(
        rec.events.filter((e) => e.type === 'expired' && e.resource === r).length,
        1,
        `${r}: one 410 (${c.staleRetries} requests went again on a new connection)`,
      );
    }
    assert.deepEqual(failures(rec), [], 'no failed request, no backoff');
    assert.equal(rec.events.filter((e) => e.type === 'listed').length, listsBefore + 4, 'one list per source');
    // What reached the server: one list per source, from the last version seen, in one reply (no limit).
    const lists = server.requests.slice(requestsBefore).filter((r) => r.query['watch'] !== 'true');
    assert.deepEqual(lists.map((r) => r.path).sort(), [
      '/api/v1/nodes',
      '/api/v1/services',
      '/apis/discovery.k8s.io/v1/endpointslices',
      '/apis/networking.k8s.io/v1/servicecidrs',
    ]);
    for (const r of lists) {
      assert.ok(Number(r.query['resourceVersion']) > 0 && r.query['limit'] === undefined, JSON.stringify(r.query));
    }
    assert.ok(server.closedByServer >= 4, 'the server closed each watch connection');
    assert.equal(server.abortedHandshakes, 0);
  });

  it('is indifferent to connections closed when idle and at random', async () => {
    const server = await serverWith({ idleMs: 20, randomRate: 0.5, random: seeded(7) });
    seed(server);
    const c = client(server);
    const rec = await sources(server, c);
    for (let i = 0; i < 20; i++) {
      server.create('services', svc('app', `s${i}`, `172.30.1.${i}`));
      // Lists of its own on the same pool, racing the server's closes.
      assert.equal((await c.list('/api/v1/services', {}, never)).items.length, i + 2);
      await new Promise((r) => setTimeout(r, i % 3 === 0 ? 25 : 1));
    }
    await rec.until(() => rec.calls.some((l) => l.startsWith('service add app/s19')), 'the last change');
    assert.equal(rec.only('service add').length, 21, 'every Service arrived once');
    assert.deepEqual(failures(rec), [], 'no failed request, no backoff');
    assert.ok(server.closedByServer > 10, `the server closed ${server.closedByServer} connections`);
    assert.equal(server.abortedHandshakes, 0);
  });
});

describe('k8s sources: backing off does not load the API server', () => {
  it('opens no connection it drops mid-handshake while a source backs off after a 500', async () => {
    const server = await serverWith();
    seed(server);
    const c = client(server);
    server.faults.add({ kind: 'status', code: 500, verb: 'list', resource: 'services', times: 1 });
    const rec = new Recorder();
    const ac = new AbortController();
    const done = startSources({
      client: c,
      nodeName: 'node-a',
      handlers: rec.handlers,
      signal: ac.signal,
      onEvent: rec.onEvent,
      backoff: { initialMs: 1_500, maxMs: 1_500 },
    });
    cleanup.push(async () => {
      ac.abort();
      await done;
    });
    await rec.until(() => rec.calls.includes('service synced'), 'services listed after the backoff');
    assert.ok(rec.events.some((e) => e.type === 'backoff' && e.resource === 'services'));
    assert.ok(!rec.events.some((e) => e.type === 'reachable'), 'a server that answered is not waited for');
    // Before the fix the probe connected and dropped a socket every ~250 ms of the backoff.
    assert.equal(server.abortedHandshakes, 0);
  });
});
