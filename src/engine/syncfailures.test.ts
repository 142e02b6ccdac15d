// Failed syncs are counted with the mode's own upstream counter, and only with it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IPFamily } from '../core/types.js';
import { syncFailureObserver, type SyncFailureCounterKind, type SyncFailureCounters } from './syncfailures.js';

function recorder(): SyncFailureCounters & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    iptablesRestoreFailed: (f: IPFamily) => calls.push(`iptables ${f}`),
    nftablesSyncFailed: (f: IPFamily) => calls.push(`nftables ${f}`),
  };
}

// Which mode uses which counter is each mode driver's (src/cmd/modes/registry.test.ts checks it).
test('a failed sync increments its counter, and only that one', () => {
  const cases: Array<[SyncFailureCounterKind | null, string[]]> = [
    ['iptables-restore', ['iptables IPv4', 'iptables IPv6']],
    ['nftables-sync', ['nftables IPv4', 'nftables IPv6']],
    [null, []],
  ];
  for (const [kind, want] of cases) {
    const r = recorder();
    const o = syncFailureObserver(kind, r);
    o.syncFailed('IPv4', new Error('x'), 0.1);
    o.syncFailed('IPv6', new Error('x'), 0.1);
    o.syncSucceeded({
      family: 'IPv4',
      durationSeconds: 0,
      partial: false,
      finishedAt: 0,
      noLocalEndpoints: { internal: 0, external: 0 },
    });
    assert.deepEqual(r.calls, want, String(kind));
  }
});
