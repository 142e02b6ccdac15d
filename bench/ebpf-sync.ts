// Benchmark (never a test): the proxy's own work in an ebpf sync, without a
// kernel: SyncState in, BPF map operations out (the driver's entries through
// the reconciler), for one family. The map writes themselves are measured
// with the real kernel by bench/ebpf.ts (--syncs); this one isolates what the
// TypeScript does, so that a change to it can be compared before and after
// on a loaded machine in a minute. Cases, at --sizes Services (bench/ebpf.ts's
// Services: ClusterIP, one endpoint each, and the measured one):
//   * cold: a fresh datapath's first (full) sync;
//   * resync: a full sync of an unchanged state (the periodic one);
//   * change: a partial sync adding one endpoint to one Service (median of --changes);
//   * restart: a fresh process adopting the maps a cold sync wrote (writes nothing);
//   * heap: what the datapath's memory retains after the cold sync (needs --expose-gc).
// Times are wall ms and CPU ms (user + system) of this process, medians of --reps.
//
//   node --expose-gc --import tsx bench/ebpf-sync.ts [--sizes 1000,10000] [--reps 5] [--changes 50]
import { performance } from 'node:perf_hooks';
import type { SyncState } from '../src/core/types.js';
import { Fake } from '../src/dataplane/ebpf/fake.js';
import type { MapOp } from '../src/dataplane/ebpf/store.js';
import { EbpfPlanner } from '../src/platform/ebpf/planner.js';
import { liveEntries, type LiveEntries } from '../src/dataplane/ebpf/driver.js';
import { PATH_CONFIG } from './lib/ebpfpath.js';
import { buildState, withExtraEndpoint } from './lib/ebpfstate.js';

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};
const SIZES = arg('sizes', '1000,10000').split(',').map(Number);
const REPS = Number(arg('reps', '5'));
const CHANGES = Number(arg('changes', '50'));

/** What is measured: one family's map planning, fed states (and the live maps after a restart). */
interface Subject {
  plan(state: SyncState, live?: LiveEntries): MapOp[];
}
const subject = (): Subject => {
  const p = new EbpfPlanner(PATH_CONFIG);
  return { plan: (state, live) => p.plan({ state, ...(live ? { live } : {}) }).ops };
};

interface Timing {
  ms: number;
  cpuMs: number;
  writes: number;
}

function timed(f: () => MapOp[]): Timing {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const ops = f();
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { ms, cpuMs: (c.user + c.system) / 1000, writes: ops.length };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const med = (ts: Timing[]) => ({
  ms: median(ts.map((t) => t.ms)),
  cpuMs: median(ts.map((t) => t.cpuMs)),
  writes: median(ts.map((t) => t.writes)),
});

function liveOf(f: Fake): LiveEntries {
  return liveEntries((m) => f.dump(m));
}

function gc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g) for (let i = 0; i < 3; i++) g();
}

function run(n: number): Record<string, unknown> {
  const state = buildState(n);
  const cold: Timing[] = [];
  const resync: Timing[] = [];
  const restart: Timing[] = [];
  let warm: Subject | null = null;
  let live: LiveEntries | null = null;
  for (let r = 0; r < REPS; r++) {
    const s = subject();
    let ops: MapOp[] = [];
    cold.push(timed(() => (ops = s.plan(state))));
    if (!live) {
      const fake = new Fake();
      fake.apply(ops);
      live = liveOf(fake);
    }
    resync.push(timed(() => s.plan({ ...state, fullSync: true })));
    restart.push(timed(() => subject().plan(state, live!)));
    warm = s;
  }
  let cur = state;
  const change: Timing[] = [];
  for (let r = 0; r < CHANGES; r++) {
    const next = withExtraEndpoint(cur, (r * 7919) % n, r);
    change.push(timed(() => warm!.plan(next)));
    cur = next;
  }
  warm = null;
  gc();
  const h0 = process.memoryUsage().heapUsed;
  const kept = subject();
  kept.plan(state);
  gc();
  const heapMiB = (process.memoryUsage().heapUsed - h0) / 2 ** 20;
  return { n, cold: med(cold), resync: med(resync), change: med(change), restart: med(restart), heapMiB, kept };
}

console.log('| Services | case | wall ms | cpu ms | map writes |');
console.log('|---:|---|---:|---:|---:|');
for (const n of SIZES) {
  const r = run(n);
  for (const c of ['cold', 'resync', 'change', 'restart'] as const) {
    const t = r[c] as Timing;
    console.log(`| ${n} | ${c} | ${t.ms.toFixed(2)} | ${t.cpuMs.toFixed(2)} | ${t.writes} |`);
  }
  console.log(`| ${n} | heap retained | ${(r['heapMiB'] as number).toFixed(1)} MiB | | |`);
}
