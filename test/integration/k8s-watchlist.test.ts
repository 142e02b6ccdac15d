// The sources' streaming watch-list (client-go's WatchListClient, on by
// default), over real HTTPS with a token against the test API server, which
// answers as the real one does (test/apiserver/listoptions.ts, watch.ts):
// - where the server offers it, each state is one watch request
//   (sendInitialEvents=true, resourceVersionMatch=NotOlderThan,
//   allowWatchBookmarks=true), no list, and the same stream goes on as the
//   watch; a relist after a 410 is one such request from the last version;
// - a server with the gate off, or one before 1.27, answers 422: the source
//   lists at once (no backoff), and tries the stream again on the next relist;
// - a 410 during the initial events starts over at once from "", the partial
//   state never delivered;
// - a 504 "Too large resource version" (the API server reached is behind the
//   version seen) reads again at once from "", on the stream and on a list,
//   where a plain backoff would wait.
// The sources back off for a minute, so any backoff would time a test out.

import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { startSources } from '../../src/platform/k8s/sources.js';
import type { KubeClient } from '../../src/platform/k8s/client.js';
import type { SourceEvent } from '../../src/platform/k8s/events.js';
import { type TestApiServerOptions, TestApiServer, type RequestRecord } from '../apiserver/server.js';
import { Recorder } from '../apiserver/recorder.js';
import { node, serviceCIDR, slice, svc } from '../apiserver/fixtures.js';
import { clientFor } from '../apiserver/kubeconfig.js';

const SLOW = { initialMs: 60_000, maxMs: 60_000 };
const PATHS = [
  '/api/v1/nodes',
  '/api/v1/services',
  '/apis/discovery.k8s.io/v1/endpointslices',
  '/apis/networking.k8s.io/v1/servicecidrs',
];

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function serverWith(opts: TestApiServerOptions = {}): Promise<TestApiServer> {
  const server = new TestApiServer({ bookmarkIntervalMs: 0, connectionClose: { afterWatch: true }, ...opts });
  server.create('services', svc('app', 'alpha', '172.30.0.10'));
  server.create('services', svc('app', 'beta', '172.30.0.11'));
  server.create('endpointslices', slice('app', 'alpha-1', 'alpha', ['10.180.0.1']));
  server.create('nodes', node('node-a', '192.0.2.1'));
  server.create('servicecidrs', serviceCIDR('kubernetes', ['172.30.0.0/16']));
  await server.start();
  cleanup.push(() => server.dispose());
  return server;
}

async function sources(server: TestApiServer, watchList = true): Promise<{ rec: Recorder; c: KubeClient }> {
  const c = clientFor(server);
  cleanup.push(() => c.close());
  const rec = new Recorder();
  const ac = new AbortController();
  const done = startSources({
    client: c,
    nodeName: 'node-a',
    handlers: rec.handlers,
    signal: ac.signal,
    onEvent: rec.onEvent,
    backoff: SLOW,
    watchList,
  });
  cleanup.push(async () => {
    ac.abort();
    await done;
  });
  await rec.until(() => rec.events.filter((e) => e.type === 'watching').length >= 4, 'initial sync and four watches');
  return { rec, c };
}

const failures = (rec: Recorder): SourceEvent[] => rec.events.filter((e) => e.type === 'error' || e.type === 'backoff');
const isWatch = (r: RequestRecord): boolean => r.query['watch'] === 'true';
const isWatchList = (r: RequestRecord): boolean =>
  isWatch(r) &&
  r.query['sendInitialEvents'] === 'true' &&
  r.query['resourceVersionMatch'] === 'NotOlderThan' &&
  r.query['allowWatchBookmarks'] === 'true';
const ofPath = (reqs: readonly RequestRecord[], path: string): RequestRecord[] => reqs.filter((r) => r.path === path);

/**
 * Compact past every source's version and end the watches: each resume gets
 * a 410. The watches are let live past a second first: one ended sooner
 * without any event is a failure (client-go's "very short watch"), backed off.
 */
async function expireWatches(server: TestApiServer): Promise<void> {
  await new Promise((r) => setTimeout(r, 1100));
  for (let i = 0; i < 3; i++) server.create('nodes', node(`other-${i}`, `192.0.2.${10 + i}`));
  server.compact();
  server.closeWatches();
}

describe('k8s sources: streaming watch-list', () => {
  it('gets each state as one watch-list stream, no list, and goes on watching on it', async () => {
    const server = await serverWith();
    const { rec } = await sources(server);
    assert.deepEqual(
      rec
        .only('service add')
        .map((l) => l.replace(/ rv=\d+$/, ''))
        .sort(),
      ['service add app/alpha', 'service add app/beta'],
    );
    assert.equal(server.requests.filter((r) => !isWatch(r)).length, 0, 'no list');
    for (const path of PATHS) {
      const reqs = ofPath(server.requests, path);
      assert.equal(reqs.length, 1, path);
      assert.ok(isWatchList(reqs[0]!), JSON.stringify(reqs[0]!.query));
      assert.equal(reqs[0]!.query['resourceVersion'], '', 'the first is a consistent read');
    }
    const listed = rec.events.filter((e): e is Extract<SourceEvent, { type: 'listed' }> => e.type === 'listed');
    assert.equal(listed.length, 4);
    assert.ok(listed.every((e) => e.streamed === true));
    // The same stream carries what follows.
    server.create('services', svc('app', 'gamma', '172.30.0.12'));
    await rec.until(() => rec.calls.some((l) => l.startsWith('service add app/gamma')), 'the live event');
    assert.equal(server.requests.length, 4, 'no further request');
    assert.deepEqual(failures(rec), []);
  });

  it('relists after a 410 with one watch-list from the last version, the connection closed after it', async () => {
    const server = await serverWith();
    const { rec, c } = await sources(server);
    server.create('services', svc('app', 'gamma', '172.30.0.12'));
    await rec.until(
      () => rec.calls.some((l) => l.startsWith('service add app/gamma')),
      'an event on the services watch',
    );
    const seen = server.store.resourceVersion;
    const before = server.requests.length;
    const listed = rec.events.filter((e) => e.type === 'listed').length;
    await expireWatches(server);
    server.delete('services', 'app', 'beta');
    await rec.until(() => rec.calls.some((l) => l.startsWith('service delete app/beta')), 'the change after the 410');
    await rec.until(() => rec.events.filter((e) => e.type === 'listed').length >= listed + 4, 'one relist each');
    const after = server.requests.slice(before);
    assert.equal(after.filter((r) => !isWatch(r)).length, 0, 'no list');
    const services = ofPath(after, '/api/v1/services');
    // The resume from before the compaction (410), then the watch-list from the version it had seen.
    assert.equal(services.length, 2, JSON.stringify(services.map((r) => r.query)));
    assert.ok(!isWatchList(services[0]!));
    assert.ok(isWatchList(services[1]!));
    assert.equal(services[1]!.query['resourceVersion'], String(seen));
    assert.deepEqual(failures(rec), [], `no failure (${c.staleRetries} requests sent again)`);
    assert.equal(server.abortedHandshakes, 0);
  });

  for (const support of ['off', 'unknown'] as const) {
    it(`falls back to list and watch at once on a server that refuses it (${support === 'off' ? 'gate off' : 'before 1.27'}), and tries again on a relist`, async () => {
      const server = await serverWith({ watchList: support });
      const { rec } = await sources(server);
      assert.deepEqual(
        rec
          .only('service add')
          .map((l) => l.replace(/ rv=\d+$/, ''))
          .sort(),
        ['service add app/alpha', 'service add app/beta'],
      );
      const refused = rec.events.filter((e) => e.type === 'watchListUnavailable');
      assert.equal(refused.length, 4);
      assert.ok(refused.every((e) => e.type === 'watchListUnavailable' && e.statusCode === 422));
      assert.deepEqual(failures(rec), [], 'no backoff');
      const services = ofPath(server.requests, '/api/v1/services');
      assert.deepEqual(
        services.map((r) => (isWatchList(r) ? 'watch-list' : isWatch(r) ? 'watch' : 'list')),
        ['watch-list', 'list', 'watch'],
      );
      assert.equal(services[1]!.query['resourceVersion'], '0');
      assert.equal(services[1]!.query['limit'], '500');
      // A relist tries the stream first again (client-go keeps no memory of the refusal).
      server.create('services', svc('app', 'gamma', '172.30.0.12'));
      await rec.until(
        () => rec.calls.some((l) => l.startsWith('service add app/gamma')),
        'an event on the services watch',
      );
      const before = server.requests.length;
      const listed = rec.events.filter((e) => e.type === 'listed').length;
      await expireWatches(server);
      await rec.until(() => rec.events.filter((e) => e.type === 'listed').length >= listed + 4, 'one relist each');
      const relist = ofPath(server.requests.slice(before), '/api/v1/services');
      assert.deepEqual(
        relist.map((r) => (isWatchList(r) ? 'watch-list' : isWatch(r) ? 'watch' : 'list')),
        ['watch', 'watch-list', 'list', 'watch'],
      );
      // The list after the 410: from the version seen, no limit (one reply from the watch cache).
      assert.equal(relist[2]!.query['resourceVersion'], relist[0]!.query['resourceVersion']);
      assert.equal(relist[2]!.query['limit'], undefined);
      assert.deepEqual(failures(rec), [], 'no backoff');
      assert.equal(server.abortedHandshakes, 0);
    });
  }

  it('starts over at once from "" when a 410 breaks the initial events, the partial state never delivered', async () => {
    const server = await serverWith();
    const { rec } = await sources(server);
    server.create('services', svc('app', 'gamma', '172.30.0.12'));
    await rec.until(
      () => rec.calls.some((l) => l.startsWith('service add app/gamma')),
      'an event on the services watch',
    );
    server.faults.add({ kind: 'expire', verb: 'watchList', resource: 'services', times: 1, afterEvents: 1 });
    const before = server.requests.length;
    const calls = rec.calls.length;
    const listed = rec.events.filter((e) => e.type === 'listed').length;
    await expireWatches(server);
    server.delete('services', 'app', 'gamma');
    await rec.until(() => rec.calls.some((l) => l.startsWith('service delete app/gamma')), 'the change');
    await rec.until(() => rec.events.filter((e) => e.type === 'listed').length >= listed + 4, 'one relist each');
    assert.equal(server.faults.fired.expire, 1);
    const services = ofPath(server.requests.slice(before), '/api/v1/services');
    assert.deepEqual(
      services.map((r) => (isWatchList(r) ? `watch-list ${r.query['resourceVersion']}` : 'watch')),
      ['watch', `watch-list ${services[1]!.query['resourceVersion']}`, 'watch-list '],
    );
    assert.notEqual(services[1]!.query['resourceVersion'], '');
    // Only the change: the one object streamed before the 410 was not delivered as a state.
    assert.deepEqual(
      rec.calls
        .slice(calls)
        .filter((l) => l.startsWith('service '))
        .map((l) => l.replace(/ rv=\d+$/, '')),
      ['service delete app/gamma', 'service synced'],
    );
    assert.deepEqual(failures(rec), [], 'no backoff');
  });

  for (const watchList of [true, false]) {
    it(`reads again at once from "" when the server reached is behind the version seen (${watchList ? 'watch-list' : 'list'})`, async () => {
      const server = await serverWith();
      const { rec } = await sources(server, watchList);
      server.create('services', svc('app', 'gamma', '172.30.0.12'));
      await rec.until(
        () => rec.calls.some((l) => l.startsWith('service add app/gamma')),
        'an event on the services watch',
      );
      const seen = server.store.resourceVersion;
      // The resume gets a 410; the relist from the version seen finds a server behind it.
      server.faults.add({ kind: 'behind', verb: watchList ? 'watchList' : 'list', resource: 'services', times: 1 });
      const before = server.requests.length;
      const listed = rec.events.filter((e) => e.type === 'listed').length;
      await expireWatches(server);
      server.delete('services', 'app', 'gamma');
      await rec.until(() => rec.calls.some((l) => l.startsWith('service delete app/gamma')), 'the change');
      await rec.until(() => rec.events.filter((e) => e.type === 'listed').length >= listed + 4, 'one relist each');
      assert.equal(server.faults.fired.behind, 1);
      const shape = (r: RequestRecord): string =>
        `${isWatchList(r) ? 'watch-list' : isWatch(r) ? 'watch' : 'list'} ${r.query['resourceVersion'] ?? '-'} ${r.query['limit'] ?? '-'}`;
      const services = ofPath(server.requests.slice(before), '/api/v1/services').map(shape);
      const expected = watchList
        ? [`watch ${seen} -`, `watch-list ${seen} -`, 'watch-list  -']
        : [`watch ${seen} -`, `list ${seen} -`, 'list  500'];
      assert.deepEqual(services.slice(0, expected.length), expected);
      assert.equal(
        rec.events.filter((e) => e.type === 'behind' && e.resource === 'services').length,
        1,
        'reported as behind',
      );
      assert.deepEqual(failures(rec), [], 'no backoff, though the 504 carried Retry-After');
    });
  }
});
