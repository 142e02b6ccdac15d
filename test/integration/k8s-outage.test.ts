// The sources survive their API server: while it is away they keep their
// state and delete nothing; after a restart they resume each watch from the
// last resourceVersion (no relist) and pick up what changed meanwhile; after
// the history was compacted (410 Gone) they relist and deliver only the diff.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { startSources } from '../../src/platform/k8s/sources.js';
import { TestApiServer } from '../apiserver/server.js';
import { Recorder } from '../apiserver/recorder.js';
import { node, serviceCIDR, slice, svc } from '../apiserver/fixtures.js';
import { clientFor } from '../apiserver/kubeconfig.js';
import type { KubeClient } from '../../src/platform/k8s/client.js';
import { waitFor } from '../apiserver/wait.js';

/** Clients made by a test; closed after it (their keep-alive sockets would keep the process up). */
const clients: KubeClient[] = [];
function track(c: KubeClient): KubeClient {
  clients.push(c);
  return c;
}
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

const FAST = { initialMs: 20, maxMs: 100, factor: 2 };

describe('k8s sources across API server outages', () => {
  let server: TestApiServer;
  let rec: Recorder;
  let ac: AbortController;
  let done: Promise<void>;

  beforeEach(async () => {
    server = new TestApiServer({ bookmarkIntervalMs: 50 });
    await server.start();
    server.create('services', svc('app', 'alpha', '172.30.0.10'));
    server.create('services', svc('app', 'beta', '172.30.0.11'));
    server.create('services', svc('app', 'gamma', '172.30.0.12'));
    server.create('endpointslices', slice('app', 'alpha-1', 'alpha', ['10.180.0.1']));
    server.create('nodes', node('node-a', '192.0.2.1'));
    server.create('servicecidrs', serviceCIDR('kubernetes', ['172.30.0.0/16']));
    rec = new Recorder();
    ac = new AbortController();
    done = startSources({
      client: track(clientFor(server)),
      nodeName: 'node-a',
      handlers: rec.handlers,
      signal: ac.signal,
      onEvent: rec.onEvent,
      backoff: FAST,
    });
    await rec.until(() => rec.events.filter((e) => e.type === 'watching').length >= 4, 'initial sync and four watches');
  });

  afterEach(async () => {
    ac.abort();
    await done;
    await server.dispose();
  });

  // The states fetched: lists, and watch-lists (a watch asking for its initial events), which the sources use here.
  const listsOf = (path: string): number =>
    server.requests.filter(
      (r) => r.path === path && (r.query.watch !== 'true' || r.query['sendInitialEvents'] === 'true'),
    ).length;
  const watching = (): number => rec.events.filter((e) => e.type === 'watching').length;

  it('keeps its state while the server is down and resumes from the last resourceVersion', async () => {
    const synced = rec.calls.length;
    await server.stop();
    await rec.until(() => rec.events.filter((e) => e.type === 'backoff').length >= 8, 'failed reconnects with backoff');
    assert.equal(rec.calls.length, synced, 'no handler calls while the server is away');
    assert.ok(rec.events.some((e) => e.type === 'error' && e.phase === 'watch'));

    // Changes made while the client cannot see them.
    const alpha = server.get('services', 'app', 'alpha');
    server.update('services', { ...alpha, spec: { ...(alpha.spec as object), sessionAffinity: 'ClientIP' } });
    server.delete('services', 'app', 'beta');
    server.create('services', svc('app', 'delta', '172.30.0.13'));
    server.delete('endpointslices', 'app', 'alpha-1');
    const lastRV = server.store.resourceVersion;
    const watchesBefore = watching();
    await server.restart();
    await rec.until(() => rec.calls.length >= synced + 4 && watching() >= watchesBefore + 4, 'changes after reconnect');

    assert.deepEqual(rec.only('service').slice(-3), [
      'service update app/alpha rv=101 -> 107',
      'service delete app/beta rv=108',
      'service add app/delta rv=109',
    ]);
    assert.deepEqual(rec.only('slice'), [
      'slice add app/alpha-1 rv=104',
      'slice synced',
      `slice delete app/alpha-1 rv=${lastRV}`,
    ]);
    assert.ok(!rec.calls.slice(synced).some((c) => c.includes('gamma')), 'unchanged objects are not re-delivered');
    assert.equal(rec.calls.filter((c) => c.endsWith('synced')).length, 3, 'no relist, so no second synced');
    assert.equal(listsOf('/api/v1/services'), 1, 'resumed by watch, not relisted');
    const resumed = server.requests.filter((r) => r.path === '/api/v1/services' && r.query.watch === 'true').at(-1)!;
    assert.ok(Number(resumed.query.resourceVersion) >= 106, `resumed from ${resumed.query.resourceVersion}`);
  });

  it('relists after a 410 Gone and delivers only the difference', async () => {
    const synced = rec.calls.length;
    await server.stop();
    const alpha = server.get('services', 'app', 'alpha');
    server.update('services', { ...alpha, spec: { ...(alpha.spec as object), sessionAffinity: 'ClientIP' } });
    server.delete('services', 'app', 'beta');
    server.create('services', svc('app', 'delta', '172.30.0.13'));
    server.compact();
    await server.restart();
    await rec.until(() => rec.calls.filter((c) => c === 'service synced').length >= 2, 'service relist');

    assert.ok(rec.events.some((e) => e.type === 'expired' && e.resource === 'services'));
    assert.deepEqual(rec.only('service').slice(-4).sort(), [
      'service add app/delta rv=109',
      'service delete app/beta rv=102',
      'service synced',
      'service update app/alpha rv=101 -> 107',
    ]);
    assert.deepEqual(
      rec.calls
        .slice(synced)
        .filter((c) => c.startsWith('service'))
        .at(-1),
      'service synced',
      'synced comes after the whole diff',
    );
    assert.equal(
      rec.calls.slice(synced).filter((c) => c.includes('app/gamma')).length,
      0,
      'unchanged objects are not re-delivered',
    );
    assert.equal(listsOf('/api/v1/services'), 2);

    // And it keeps watching after the relist.
    await rec.until(() => watching() >= 8, 'watches after relist');
    server.delete('services', 'app', 'gamma');
    await rec.until(() => rec.calls.some((c) => c.startsWith('service delete app/gamma')), 'gamma delete via watch');
  });

  it('follows BOOKMARKs, so a quiet watch resumes past a compaction without a 410', async () => {
    // Changes the services and node-a watches do not match: only bookmarks tell them the version moved.
    for (let i = 0; i < 5; i++) server.create('nodes', node(`other-${i}`, `192.0.2.${10 + i}`));
    const target = server.store.resourceVersion;
    await waitFor(
      () =>
        ['services', 'endpointslices', 'nodes', 'servicecidrs'].every(
          (r) => (server.lastBookmark.get(r) ?? 0) >= target,
        ),
      'bookmarks past the changes on every watch',
    );
    const watches = watching();
    server.compact();
    server.closeWatches();
    await rec.until(() => watching() >= watches + 4, 'rewatch');
    const rewatch = server.requests.filter((r) => r.path === '/api/v1/services' && r.query.watch === 'true').at(-1)!;
    assert.ok(
      Number(rewatch.query.resourceVersion) >= target,
      `resumed from ${rewatch.query.resourceVersion}, want >= ${target}`,
    );
    assert.ok(
      !rec.events.some((e) => e.type === 'expired'),
      'no 410: the bookmark carried the watches past the compaction',
    );
    assert.ok(!rec.calls.some((c) => c.includes('other-')), 'other nodes never arrive');
    assert.equal(listsOf('/api/v1/services'), 1, 'resumed by watch, not relisted');
  });
});

/**
 * Sources with a minute of backoff (within a test only the end of the outage
 * can bring them back) through an outage: four watches, the server stopped
 * until every source backs off, a Service created meanwhile, the server
 * started again. dispose() ends it all.
 */
async function throughOutage(probeIntervalMs: number) {
  const server = new TestApiServer({ bookmarkIntervalMs: 50 });
  await server.start();
  server.create('services', svc('app', 'alpha', '172.30.0.10'));
  const rec = new Recorder();
  const ac = new AbortController();
  const client = clientFor(server, {}, { probeIntervalMs });
  const done = startSources({
    client,
    nodeName: 'node-a',
    handlers: rec.handlers,
    signal: ac.signal,
    onEvent: rec.onEvent,
    backoff: { initialMs: 60_000, maxMs: 60_000 },
  });
  const dispose = async (): Promise<void> => {
    ac.abort();
    await done;
    client.close();
    await server.dispose();
  };
  try {
    await rec.until(() => rec.events.filter((e) => e.type === 'watching').length >= 4, 'four watches');
    await server.stop();
    await rec.until(() => rec.events.filter((e) => e.type === 'backoff').length >= 4, 'every source backing off');
    server.create('services', svc('app', 'during', '172.30.0.11'));
    await server.start();
  } catch (err) {
    await dispose();
    throw err;
  }
  const changeSeen = (): Promise<void> =>
    rec.until(() => rec.calls.some((c) => c.startsWith('service add app/during')), 'the change made meanwhile');
  return { server, rec, client, signal: ac.signal, changeSeen, dispose };
}

describe('k8s sources: the end of an outage ends the backoff', () => {
  it('resumes at once when the server accepts connections again, however long the backoff had grown', async () => {
    const o = await throughOutage(20);
    try {
      await o.changeSeen();
      assert.ok(o.rec.events.some((e) => e.type === 'reachable'));
      assert.equal(
        o.server.requests.filter(
          (r) => r.path === '/api/v1/services' && (r.query.watch !== 'true' || r.query['sendInitialEvents'] === 'true'),
        ).length,
        1,
        'resumed by watch from the last version, not relisted',
      );
    } finally {
      await o.dispose();
    }
  });

  it('resumes at once when another request (a retry, an event post) reaches the server before the probe does', async () => {
    // The probe waits 2 s between tries (0.5x-1.5x), so the request below comes back first: the
    // source whose backoff ended first in a real outage is such a request.
    const o = await throughOutage(2_000);
    try {
      // Until one is answered: the first may go out on a socket the server's stop left dead.
      for (let i = 0; i < 50; i++) {
        const answered = await o.client.list('/api/v1/services', {}, o.signal).then(
          () => true,
          () => false,
        );
        if (answered) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      const t0 = Date.now();
      await o.changeSeen();
      // Without the release on that answer the watches would wait for the probe's next
      // success after a failure, which never comes (the server is up), i.e. their minute.
      assert.ok(Date.now() - t0 < 10_000, `took ${Date.now() - t0} ms`);
    } finally {
      await o.dispose();
    }
  });
});
