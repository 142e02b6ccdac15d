// When the canary's probes flip the proxy's health: only runs of counted
// failures or successes do, and probes that overlapped a sync, started late
// or ran long on a starved loop, or came before the canary was programmed,
// count for nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CanaryJudge, canaryNote, canaryPlans, type ProbeResult } from './canary.js';
import { FakeClock } from '../../test/support/fakeclock.js';

const ok: ProbeResult = {
  scheduledAt: 10_000,
  startedAt: 10_002,
  endedAt: 10_003,
  epochBefore: 4,
  epochAfter: 4,
  programmed: true,
  ok: true,
  error: '',
};
const fail: ProbeResult = { ...ok, endedAt: 11_002, ok: false, error: 'no answer within 1000 ms' };

test('three failures in a row make it unhealthy, two successes in a row bring it back', () => {
  const j = new CanaryJudge(new FakeClock(1000));
  assert.equal(j.record(fail).transition, null);
  assert.equal(j.record(fail).transition, null);
  assert.deepEqual(j.record(fail).transition, {
    healthy: false,
    reason: '3 probes in a row failed, the last: no answer within 1000 ms',
  });
  assert.equal(j.isHealthy(), false);
  assert.equal(j.record(fail).transition, null, 'still broken: no second transition');
  assert.equal(j.record(ok).transition, null);
  assert.deepEqual(j.record(ok).transition, { healthy: true });
  assert.equal(j.isHealthy(), true);
  assert.equal(j.status().failures, 4);
  assert.equal(j.status().probes, 6);
});

test('a success between failures resets the run; a failure between successes delays recovery', () => {
  const j = new CanaryJudge(new FakeClock(1000));
  for (const r of [fail, fail, ok, fail, fail]) assert.equal(j.record(r).transition, null);
  assert.equal(j.isHealthy(), true);
  assert.equal(j.record(fail).transition?.healthy, false);
  for (const r of [ok, fail, ok]) assert.equal(j.record(r).transition, null);
  assert.equal(j.record(ok).transition?.healthy, true);
});

test('probes during a sync, on a starved loop or before the canary is programmed count for nothing', () => {
  const j = new CanaryJudge(new FakeClock(1000));
  const cases: Array<[ProbeResult, string]> = [
    [{ ...fail, epochAfter: 5 }, 'during-sync'],
    [{ ...fail, epochBefore: 5, epochAfter: 5 }, 'during-sync'],
    [{ ...fail, startedAt: 11_500, endedAt: 12_500 }, 'starved'],
    [{ ...fail, endedAt: 10_002 + 2500 }, 'starved'],
    [{ ...fail, programmed: false }, 'not-programmed'],
  ];
  for (let round = 0; round < 3; round++)
    for (const [r, why] of cases) {
      const { verdict, transition } = j.record(r);
      assert.equal(verdict, why);
      assert.equal(transition, null);
    }
  assert.equal(j.isHealthy(), true);
  assert.equal(j.status().discarded, 15);
  assert.equal(j.status().probes, 0);
  // Discarded probes do not break a run either.
  j.record(fail);
  j.record(fail);
  j.record({ ...fail, epochAfter: 5 });
  assert.equal(j.record(fail).transition?.healthy, false);
});

test('the Event notes say what failed and what it changed', () => {
  assert.equal(
    canaryNote('iptables', 'IPv4', '169.254.255.253', { healthy: false, reason: 'r' }),
    'iptables IPv4: connections to the datapath canary 169.254.255.253 fail (r); /healthz and health-check node ports answer 503',
  );
  assert.match(canaryNote('nftables', 'IPv4', '169.254.255.253', { healthy: true }), /reach this proxy again/);
});

test('a probe that failed for want of a route to the ClusterIP counts for nothing, and the status says so', () => {
  const j = new CanaryJudge(new FakeClock(1000));
  const noRoute = { ...fail, error: 'ENETUNREACH', noRoute: true };
  for (let i = 0; i < 5; i++) assert.deepEqual(j.record(noRoute), { verdict: 'no-route', transition: null });
  assert.equal(j.isHealthy(), true, 'a node without a route is not drained from the load balancers');
  assert.equal(j.status().noRoute, true);
  assert.equal(j.status().discarded, 5);
  assert.equal(j.status().failures, 0);
  // An ENETUNREACH while a route exists (a router's answer to a packet our DNAT let through) counts.
  for (let i = 0; i < 2; i++) j.record({ ...fail, error: 'ENETUNREACH' });
  assert.equal(j.status().noRoute, false, 'the route is back');
  assert.equal(j.record({ ...fail, error: 'ENETUNREACH' }).transition?.healthy, false);
  // noRoute never turns a success into anything else.
  assert.equal(j.record({ ...ok, noRoute: true }).verdict, 'counted');
});

test('a canary per served family the mode supports, on the node address of that family, never loopback', () => {
  const both = ['IPv4', 'IPv6'] as const;
  assert.deepEqual(canaryPlans(both, both, { IPv4: '192.168.77.12', IPv6: 'fd00:77::12' }), [
    { family: 'IPv4', listenIP: '192.168.77.12' },
    { family: 'IPv6', listenIP: 'fd00:77::12' },
  ]);
  // IPv6 primary: the order of the served families is kept.
  assert.deepEqual(
    canaryPlans(['IPv6', 'IPv4'], both, { IPv4: '192.168.77.12', IPv6: 'FD00:77:0::12' }).map((p) => p),
    [
      { family: 'IPv6', listenIP: 'fd00:77::12' },
      { family: 'IPv4', listenIP: '192.168.77.12' },
    ],
  );
  // The node IP detection puts loopback in for a family the Node has no address of.
  assert.deepEqual(canaryPlans(both, both, { IPv4: '192.168.77.12', IPv6: '::1' })[1], {
    family: 'IPv6',
    skip: 'it needs a non-loopback IPv6 node address',
  });
  assert.deepEqual(canaryPlans(both, both, { IPv4: '127.0.0.1' })[0], {
    family: 'IPv4',
    skip: 'it needs a non-loopback IPv4 node address',
  });
  assert.deepEqual(canaryPlans(both, both, { IPv4: '192.168.77.12' })[1], {
    family: 'IPv6',
    skip: 'it needs a non-loopback IPv6 node address',
  });
  // An address of the other family is no address of this one.
  assert.ok('skip' in canaryPlans(['IPv6'], both, { IPv6: '192.168.77.12' })[0]!);
  assert.deepEqual(canaryPlans(both, ['IPv4'], { IPv4: '192.168.77.12', IPv6: 'fd00:77::12' })[1], {
    family: 'IPv6',
    skip: 'this mode has no IPv6 datapath canary',
  });
  assert.deepEqual(canaryPlans(['IPv4'], both, { IPv4: '192.168.77.12', IPv6: 'fd00:77::12' }).length, 1);
});

test('the IPv6 Event notes name the family and the IPv6 ClusterIP', () => {
  assert.equal(
    canaryNote('nftables', 'IPv6', '100::a9fe:fffd', { healthy: false, reason: 'r' }),
    'nftables IPv6: connections to the datapath canary 100::a9fe:fffd fail (r); /healthz and health-check node ports answer 503',
  );
});
