// Benchmark (never a test): the ebpf mode's sync work in the proxy process,
// without a kernel: EbpfRenderer turning SyncStates into map operations (every
// key and value encoded to bytes, diffed against its memory), and the Fake
// applying them in place of the map writes. No root, no namespace, no BPF.
// Per size N (bench/lib/ebpfstate.ts: N ClusterIP Services, one endpoint each):
//   * first: the first cold render of this size in the process (for the first
//     size, after nothing but an empty state, as the proxy's own cold sync;
//     the engine's code is not yet optimised, so this is measured once per
//     process: compare it across many processes);
//   * cold: a new renderer's first full render, then the Fake applies it;
//   * again: a full render of the same state (the periodic resync: every entry
//     encoded again, nothing to write);
//   * change: a partial render after one endpoint was added to one Service
//     (median of --changes).
// Each is repeated --reps times in the same process; the medians of wall and
// CPU milliseconds are printed as one JSON line per size (and a table), so two
// builds can be compared run against run (interleaved) by whatever starts them.
//
//   node dist/bench/ebpf-sync.js [--sizes 1000,10000] [--reps 5] [--changes 15]
import { performance } from 'node:perf_hooks';
import type { SyncState } from '../src/core/types.js';
import { Fake } from '../src/dataplane/ebpf/fake.js';
import { EbpfRenderer } from '../src/dataplane/ebpf/renderer.js';
import { arg, median, runBench } from './lib/cluster.js';
import { PATH_CONFIG } from './lib/ebpfpath.js';
import { buildState, withExtraEndpoint } from './lib/ebpfstate.js';

interface Timed {
  readonly ms: number;
  readonly cpuMs: number;
}

function timed(fn: () => void): Timed {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  fn();
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { ms, cpuMs: (c.user + c.system) / 1000 };
}

interface Row {
  readonly services: number;
  readonly first: Timed;
  readonly cold: Timed;
  readonly again: Timed;
  readonly change: Timed;
  readonly writes: number;
}

function measure(n: number, reps: number, changes: number): Row {
  const base = buildState(n);
  const full: SyncState = { ...base, fullSync: true };
  const cold: Timed[] = [];
  const again: Timed[] = [];
  const change: Timed[] = [];
  let writes = 0;
  const first = timed(() => new Fake().apply(new EbpfRenderer(PATH_CONFIG).render({ state: full }).ops));
  for (let rep = 0; rep < reps; rep++) {
    const r = new EbpfRenderer(PATH_CONFIG);
    const fake = new Fake();
    cold.push(timed(() => fake.apply(r.render({ state: full }).ops)));
    again.push(timed(() => fake.apply(r.render({ state: full }).ops)));
    let state = base;
    for (let c = 0; c < changes; c++) {
      const next = withExtraEndpoint(state, (c * 7919) % Math.max(n, 1), c);
      change.push(
        timed(() => {
          const out = r.render({ state: next });
          fake.apply(out.ops);
          writes = out.counters.writes;
        }),
      );
      state = next;
    }
  }
  const med = (xs: Timed[]): Timed => ({ ms: median(xs.map((x) => x.ms)), cpuMs: median(xs.map((x) => x.cpuMs)) });
  return { services: n, first, cold: med(cold), again: med(again), change: med(change), writes };
}

async function main(): Promise<void> {
  new Fake().apply(new EbpfRenderer(PATH_CONFIG).render({ state: buildState(0) }).ops);
  const sizes = arg('sizes', '1000,10000').split(',').map(Number);
  const reps = Number(arg('reps', '5'));
  const changes = Number(arg('changes', '15'));
  const rows: Row[] = [];
  for (const n of sizes) {
    const row = measure(n, reps, changes);
    rows.push(row);
    console.log(JSON.stringify(row));
  }
  const f = (t: Timed, d: number) => `${t.ms.toFixed(d)} | ${t.cpuMs.toFixed(d)}`;
  console.log(
    '\n| Services | first ms | first cpu ms | cold ms | cold cpu ms | again ms | again cpu ms | change ms | change cpu ms | writes |',
  );
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows)
    console.log(
      `| ${r.services} | ${f(r.first, 1)} | ${f(r.cold, 1)} | ${f(r.again, 1)} | ${f(r.change, 3)} | ${r.writes} |`,
    );
}

runBench(main);
