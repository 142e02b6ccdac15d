// The client and its reflectors against a misbehaving test API server
// (test/apiserver/faults.ts), over real HTTPS: a list stalled mid-body is
// abandoned and retried, Retry-After is honoured, 500s are backed off, slow
// replies are waited for. In every case the sources end up with the server's
// state and nothing was deleted on the way. (The same faults against the
// real proxy in the namespace cluster: test/e2e/faults-api.test.ts.) The
// server refuses the streaming watch-list (its WatchList gate off), so the
// sources get their state by lists, which these faults are about; each list
// follows a refused watch-list at once (k8s-watchlist.test.ts).

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { startSources } from '../../src/platform/k8s/sources.js';
import type { KubeClient } from '../../src/platform/k8s/client.js';
import { ApiStatusError } from '../../src/platform/k8s/transport.js';
import { TestApiServer } from '../apiserver/server.js';
import { Recorder } from '../apiserver/recorder.js';
import { node, svc } from '../apiserver/fixtures.js';
import { clientFor } from '../apiserver/kubeconfig.js';

const FAST = { initialMs: 20, maxMs: 200, factor: 2 };
const never = new AbortController().signal;

describe('k8s client and sources against a misbehaving API server', () => {
  let server: TestApiServer;
  let client: KubeClient;
  let rec: Recorder;
  let ac: AbortController;
  let done: Promise<void> | undefined;

  beforeEach(async () => {
    server = new TestApiServer({ bookmarkIntervalMs: 100, watchList: 'off' });
    await server.start();
    server.create('nodes', node('node-a', '192.0.2.1'));
    server.create('services', svc('app', 'alpha', '172.30.0.10'));
    client = clientFor(server, {}, { timeouts: { bodyIdleMs: 300 } });
    rec = new Recorder();
    ac = new AbortController();
  });
  afterEach(async () => {
    ac.abort();
    await done;
    done = undefined;
    client.close();
    await server.dispose();
  });

  const start = (): void => {
    done = startSources({
      client,
      nodeName: 'node-a',
      handlers: rec.handlers,
      signal: ac.signal,
      onEvent: rec.onEvent,
      backoff: FAST,
    });
  };
  const servicesSynced = (): boolean => rec.calls.includes('service synced');

  it('abandons a list stalled mid-body after the body deadline, and the retry completes', async () => {
    server.faults.add({ kind: 'stall', verb: 'list', resource: 'services', times: 1 });
    const t0 = Date.now();
    await assert.rejects(client.list('/api/v1/services', {}, never), (e: unknown) => {
      assert.match(String(e), /stalled/);
      assert.equal((e as NodeJS.ErrnoException).code, 'ETIMEDOUT');
      return true;
    });
    assert.ok(Date.now() - t0 >= 250, 'not before the body deadline');
    assert.equal(server.faults.fired.stall, 1);

    server.faults.add({ kind: 'stall', verb: 'list', resource: 'services', times: 1 });
    start();
    await rec.until(servicesSynced, 'services listed after the stalled list');
    assert.ok(rec.calls.some((c) => c.startsWith('service add app/alpha ')));
    assert.ok(rec.events.some((e) => e.type === 'error' && e.phase === 'list' && /stalled/.test(e.error)));
  });

  it('honours Retry-After on a 429 before listing again', async () => {
    server.faults.add({
      kind: 'status',
      code: 429,
      retryAfterSeconds: 1,
      verb: 'list',
      resource: 'services',
      times: 1,
    });
    start();
    await rec.until(servicesSynced, 'services listed after the 429');
    const lists = server.requests.filter((r) => r.path === '/api/v1/services' && r.query['watch'] !== 'true');
    assert.equal(lists.length, 2, 'one refused list, one retry');
    const gap = lists[1]!.at - lists[0]!.at;
    assert.ok(gap >= 1000, `retried after ${gap} ms, Retry-After was 1 s (backoff alone: 20 ms)`);
    const err = rec.events.find((e) => e.type === 'error' && e.resource === 'services');
    assert.equal((err as { retryAfterSeconds?: number }).retryAfterSeconds, 1);
  });

  it('rejects a 429 with an ApiStatusError carrying the Retry-After header', async () => {
    server.faults.add({ kind: 'status', code: 429, retryAfterSeconds: 5, times: 1 });
    await assert.rejects(client.list('/api/v1/services', {}, never), (e: unknown) => {
      assert.ok(e instanceof ApiStatusError);
      assert.equal(e.statusCode, 429);
      assert.equal(e.reason, 'TooManyRequests');
      assert.equal(e.retryAfterSeconds, 5);
      return true;
    });
  });

  it('backs off under 500s (no request storm), keeps its state, and resumes when they stop', async () => {
    start();
    await rec.until(() => rec.events.filter((e) => e.type === 'watching').length >= 4, 'four watches');
    const callsBefore = rec.calls.length;
    server.faults.add({ kind: 'status', code: 500 });
    const t0 = Date.now();
    server.closeWatches();
    await new Promise((r) => setTimeout(r, 1500));
    const during = server.requests.filter((r) => r.at >= t0).length;
    // Four resources; backoff 20, 40, 80, 160, 200, 200... ms: about 10 tries each in 1.5 s at most.
    assert.ok(during <= 4 * 12, `${during} requests in 1.5 s of 500s`);
    assert.ok(during >= 4, 'every resource retried');
    assert.equal(rec.calls.length, callsBefore, 'nothing delivered (and nothing deleted) during the 500s');
    server.faults.clear();
    server.create('services', svc('app', 'beta', '172.30.0.11'));
    await rec.until(() => rec.calls.some((c) => c.startsWith('service add app/beta')), 'change after the 500s');
  });

  it('waits for slow replies instead of giving up on them', async () => {
    server.faults.add({ kind: 'delay', delayMs: 400 });
    start();
    await rec.until(servicesSynced, 'services listed through slow replies');
    assert.ok(server.faults.fired.delay >= 4);
    assert.ok(!rec.events.some((e) => e.type === 'error'), 'no request gave up');
  });
});
