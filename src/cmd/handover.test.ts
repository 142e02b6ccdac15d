import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ProxyMode } from '../core/types.js';
import { createLogger } from '../platform/logger.js';
import { FirstSyncs, removeOthers, retireOthers, type HandoverDriver } from './handover.js';

const log = createLogger({ destination: { write: () => true } as never });

/** Drivers that record what the handover asked of them, and when. */
function drivers(retiring: ProxyMode[]): { list: HandoverDriver[]; calls: string[] } {
  const calls: string[] = [];
  const list = (['ipvs', 'iptables', 'nftables', 'ebpf'] as const).map((mode): HandoverDriver => ({
    mode,
    async retire() {
      calls.push(`retire ${mode}`);
      return retiring.includes(mode);
    },
    async cleanupLeftovers(running) {
      calls.push(`cleanup ${mode} (running ${running})`);
    },
  }));
  return { list, calls };
}

test('every other mode is retired, then (after the drain when one carried flows) cleaned; never the running one', async () => {
  const { list, calls } = drivers(['ebpf']);
  const t0 = Date.now();
  const done = await retireOthers('nftables', log, { drainMs: 60 }, new AbortController().signal, list);
  assert.equal(done, true);
  await removeOthers('nftables', log, {}, list);
  assert.ok(Date.now() - t0 >= 55, 'waited for the drain');
  assert.deepEqual(calls, [
    'retire ipvs',
    'retire iptables',
    'retire ebpf',
    'cleanup ipvs (running nftables)',
    'cleanup iptables (running nftables)',
    'cleanup ebpf (running nftables)',
  ]);
});

test('a stop during the drain leaves the previous state for the next start', async () => {
  const { list, calls } = drivers(['ipvs']);
  const stop = new AbortController();
  const run = retireOthers('iptables', log, { drainMs: 60_000 }, stop.signal, list);
  await new Promise((r) => setTimeout(r, 20));
  stop.abort();
  assert.equal(await run, false);
  assert.deepEqual(calls, ['retire ipvs', 'retire nftables', 'retire ebpf']);
});

test('FirstSyncs resolves only when every family has synced', async () => {
  const f = new FirstSyncs(['IPv4', 'IPv6']);
  let resolved = false;
  void f.done.then(() => (resolved = true));
  const report = (family: 'IPv4' | 'IPv6') => ({
    family,
    durationSeconds: 0,
    partial: false,
    finishedAt: 0,
    noLocalEndpoints: { internal: 0, external: 0 },
  });
  f.observer.syncSucceeded(report('IPv4'));
  f.observer.syncSucceeded(report('IPv4'));
  await new Promise((r) => setImmediate(r));
  assert.equal(resolved, false);
  f.observer.syncSucceeded(report('IPv6'));
  await f.done;
  assert.equal(resolved, true);
});
