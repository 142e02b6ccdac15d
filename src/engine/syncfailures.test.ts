// Failed syncs are counted with the mode's own upstream counter, and only with it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IPFamily, ProxyMode } from '../core/types.js';
import { syncFailureObserver, type SyncFailureCounters } from './syncfailures.js';

function recorder(): SyncFailureCounters & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    iptablesRestoreFailed: (f: IPFamily) => calls.push(`iptables ${f}`),
    nftablesSyncFailed: (f: IPFamily) => calls.push(`nftables ${f}`),
  };
}

test('a failed sync increments the counter of its mode', () => {
  const cases: Array<[ProxyMode, string[]]> = [
    ['iptables', ['iptables IPv4', 'iptables IPv6']],
    ['ipvs', ['iptables IPv4', 'iptables IPv6']],
    ['nftables', ['nftables IPv4', 'nftables IPv6']],
    ['userspace', []],
  ];
  for (const [mode, want] of cases) {
    const r = recorder();
    const o = syncFailureObserver(mode, r);
    o.syncFailed('IPv4', new Error('x'), 0.1);
    o.syncFailed('IPv6', new Error('x'), 0.1);
    o.syncSucceeded({
      family: 'IPv4',
      durationSeconds: 0,
      partial: false,
      finishedAt: 0,
      noLocalEndpoints: { internal: 0, external: 0 },
    });
    assert.deepEqual(r.calls, want, mode);
  }
});
