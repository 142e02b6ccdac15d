import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Dataplane, Drift, SyncOutcome, SyncState } from '../core/types.js';
import { withSidecar } from './sidecar.js';

function inner(calls: string[], opts: { optional: boolean }): Dataplane {
  const dp: Dataplane = {
    mode: 'nftables',
    family: 'IPv4',
    async sync(): Promise<SyncOutcome> {
      calls.push('dp.sync');
      return {} as SyncOutcome;
    },
    async cleanup() {
      calls.push('dp.cleanup');
    },
  };
  if (!opts.optional) return dp;
  return {
    ...dp,
    close: () => void calls.push('dp.close'),
    watchDrift: (f: (d: Drift) => void) => f({ reason: 'rules_changed', detail: 'x' }),
    skipsPeriodicFullSync: () => true,
    startsEmpty: async () => true,
  };
}

describe('withSidecar', () => {
  it('runs the sidecar after a successful sync, first at cleanup and close', async () => {
    const calls: string[] = [];
    const dp = withSidecar(inner(calls, { optional: true }), {
      sync: async () => void calls.push('side.sync'),
      cleanup: async () => void calls.push('side.cleanup'),
      close: () => void calls.push('side.close'),
    });
    await dp.sync({} as SyncState);
    await dp.cleanup();
    await dp.close!();
    assert.deepEqual(calls, ['dp.sync', 'side.sync', 'side.cleanup', 'dp.cleanup', 'side.close', 'dp.close']);
  });

  it('never runs the sidecar after a failed sync', async () => {
    const calls: string[] = [];
    const failing = { ...inner(calls, { optional: false }), sync: () => Promise.reject(new Error('refused')) };
    const dp = withSidecar(failing, { sync: async () => void calls.push('side.sync'), cleanup: async () => {} });
    await assert.rejects(dp.sync({} as SyncState), /refused/);
    assert.deepEqual(calls, []);
  });

  it('passes every optional method of the inner datapath through, and adds none it lacks', async () => {
    const side = { sync: async () => {}, cleanup: async () => {} };
    const full = withSidecar(inner([], { optional: true }), side);
    const seen: Drift[] = [];
    full.watchDrift!((d) => seen.push(d));
    assert.equal(seen.length, 1);
    assert.equal(full.skipsPeriodicFullSync!(), true);
    assert.equal(await full.startsEmpty!(), true);
    assert.equal(typeof full.close, 'function');
    const bare = withSidecar(inner([], { optional: false }), side);
    assert.equal(bare.watchDrift, undefined);
    assert.equal(bare.skipsPeriodicFullSync, undefined);
    assert.equal(bare.startsEmpty, undefined);
    assert.equal(bare.close, undefined);
  });
});
