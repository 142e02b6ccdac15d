// When the canary's probes flip the proxy's health: only runs of counted
// failures or successes do, and probes that overlapped a sync, started late
// or ran long on a starved loop, or came before the canary was programmed,
// count for nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CanaryJudge, canaryNote, type ProbeResult } from './canary.js';
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
