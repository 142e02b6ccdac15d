import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../../test/support/fakeclock.js';
import { formatRFC3339Nano, healthObserver, healthTimeoutFor, isNodeEligible, ProxyHealthState } from './health.js';

const T0 = Date.UTC(2026, 11, 1, 10, 0, 0, 0);
const timeout = healthTimeoutFor(30_000);

test('formatRFC3339Nano matches Go time.Time JSON (UTC)', () => {
  assert.equal(formatRFC3339Nano(null), '0001-01-01T00:00:00Z');
  assert.equal(formatRFC3339Nano(T0), '2026-12-01T10:00:00Z');
  assert.equal(formatRFC3339Nano(T0 + 120), '2026-12-01T10:00:00.12Z');
  assert.equal(formatRFC3339Nano(T0 + 5), '2026-12-01T10:00:00.005Z');
});

test('healthy at start-up; /livez and /healthz bodies as upstream before any sync', () => {
  const clock = new FakeClock(T0);
  const h = new ProxyHealthState({ clock, healthTimeout: timeout });
  h.queuedUpdate('IPv4');
  clock.advance(10 * timeout);
  const live = h.livezResponse();
  assert.equal(live.status, 200, 'never synced: still starting up');
  assert.equal(live.body, '{"lastUpdated":"2026-12-01T10:10:00Z","currentTime":"2026-12-01T10:10:00Z","healthy":true}');
  assert.equal(live.headers['Content-Type'], 'application/json');
  assert.equal(live.headers['X-Content-Type-Options'], 'nosniff');
});

test('a queued update older than healthTimeout makes the family (and the proxy) unhealthy until updated', () => {
  const clock = new FakeClock(T0);
  const h = new ProxyHealthState({ clock, healthTimeout: timeout });
  h.updated('IPv4');
  h.updated('IPv6');
  clock.advance(1000);
  h.queuedUpdate('IPv6');
  clock.advance(timeout - 1);
  assert.equal(h.livezResponse().status, 200, 'pending but not late');
  h.queuedUpdate('IPv6'); // a newer request does not reset the oldest
  clock.advance(1);
  const r = h.livezResponse();
  assert.equal(r.status, 503);
  assert.deepEqual(JSON.parse(r.body), {
    lastUpdated: '2026-12-01T10:00:00Z',
    currentTime: '2026-12-01T10:01:01Z',
    healthy: false,
    status: {
      IPv4: { lastUpdated: '2026-12-01T10:00:00Z', healthy: true },
      IPv6: { lastUpdated: '2026-12-01T10:00:00Z', healthy: false },
    },
  });
  assert.equal(r.body.indexOf('"IPv4"') < r.body.indexOf('"IPv6"'), true, 'keys sorted like Go maps');
  h.updated('IPv6');
  assert.equal(h.livezResponse().status, 200);
  assert.equal(h.isHealthy(), true);
});

test('/healthz also needs an eligible node; body carries nodeEligible; 200 replaces lastUpdated by now', () => {
  const clock = new FakeClock(T0);
  let eligible = true;
  const h = new ProxyHealthState({ clock, healthTimeout: timeout, nodeEligible: () => eligible });
  h.updated('IPv4');
  clock.advance(2500);
  let r = h.healthzResponse();
  assert.equal(r.status, 200);
  assert.equal(
    r.body,
    '{"lastUpdated":"2026-12-01T10:00:02.5Z","currentTime":"2026-12-01T10:00:02.5Z","nodeEligible":true,"healthy":true,' +
      '"status":{"IPv4":{"lastUpdated":"2026-12-01T10:00:00Z","healthy":true}}}',
  );
  eligible = false;
  r = h.healthzResponse();
  assert.equal(r.status, 503);
  const body = JSON.parse(r.body);
  assert.equal(body.nodeEligible, false);
  assert.equal(body.healthy, true, 'healthy reports the proxiers only');
  assert.equal(body.lastUpdated, '2026-12-01T10:00:00Z', 'on 503 the real last update time');
  assert.equal(h.livezResponse().status, 200, '/livez ignores the node');
});

test('isNodeEligible: missing node, deletionTimestamp, autoscaler taint', () => {
  assert.equal(isNodeEligible(null), false);
  assert.equal(isNodeEligible({ metadata: { name: 'n' } }), true);
  assert.equal(isNodeEligible({ metadata: { name: 'n', deletionTimestamp: '2026-01-01T00:00:00Z' } }), false);
  assert.equal(
    isNodeEligible({
      metadata: { name: 'n' },
      spec: { taints: [{ key: 'other' }, { key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] },
    }),
    false,
  );
  assert.equal(
    isNodeEligible({ metadata: { name: 'n' }, spec: { taints: [{ key: 'node.kubernetes.io/unschedulable' }] } }),
    true,
  );
});

test('healthObserver maps queuedUpdate (ms) and syncSucceeded (finishedAt seconds)', () => {
  const clock = new FakeClock(T0);
  const h = new ProxyHealthState({ clock, healthTimeout: timeout });
  const obs = healthObserver(h);
  obs.syncSucceeded({
    family: 'IPv4',
    durationSeconds: 0.1,
    partial: false,
    finishedAt: T0 / 1000,
    noLocalEndpoints: { internal: 0, external: 0 },
  });
  obs.queuedUpdate('IPv4', T0);
  clock.advance(timeout);
  assert.equal(h.isHealthy(), false);
  assert.equal(h.health().status.get('IPv4')?.lastUpdated, T0);
  obs.syncSucceeded({
    family: 'IPv4',
    durationSeconds: 0.1,
    partial: true,
    finishedAt: (T0 + timeout) / 1000,
    noLocalEndpoints: { internal: 0, external: 0 },
  });
  assert.equal(h.isHealthy(), true);
});

test('with required families it is unhealthy until every listed family has synced once (stricter start-up)', () => {
  const clock = new FakeClock();
  const state = new ProxyHealthState({ clock, healthTimeout: 60_000, families: ['IPv4', 'IPv6'] });
  assert.equal(state.livezResponse().status, 503);
  assert.match(state.livezResponse().body, /"IPv4":\{"lastUpdated":"0001-01-01T00:00:00Z","healthy":false\}/);
  state.updated('IPv4');
  assert.equal(state.isHealthy(), false, 'IPv6 has not synced yet');
  state.updated('IPv6');
  assert.equal(state.livezResponse().status, 200);
});

test('a failing datapath canary fails /healthz and the service health checks, never /livez, until it recovers', () => {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const h = new ProxyHealthState({ clock, healthTimeout: 60_000 });
  h.updated('IPv4');
  h.updated('IPv6');
  h.datapathFailed('IPv4', '3 probes in a row failed');
  const hz = h.healthzResponse();
  assert.equal(hz.status, 503);
  const body = JSON.parse(hz.body) as { healthy: boolean; status: Record<string, { healthy: boolean }> };
  assert.equal(body.healthy, false);
  assert.equal(body.status['IPv4']!.healthy, false);
  assert.equal(body.status['IPv6']!.healthy, true);
  assert.equal(h.isHealthy(), false, 'health-check node ports answer 503');
  assert.equal(h.livezResponse().status, 200, 'a restart cannot fix another actor’s rule');
  assert.deepEqual([...h.datapathFailures().keys()], ['IPv4']);
  h.datapathRecovered('IPv4');
  assert.equal(h.healthzResponse().status, 200);
  assert.equal(h.isHealthy(), true);
});
