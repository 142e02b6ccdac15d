// Benchmark (never a test): the process side of IPVS mode's syncs, with the
// IPVS Fake as the kernel (src/platform/ipvs/kernel.ts fakeKernel), on this
// machine. bench/ipvs-sync.ts measures the real kernel in a QEMU guest, where
// one run takes a quarter of an hour and emulation noise hides what the
// proxy's own code costs; this one times the same IpvsDataplane.sync() with
// the kernel's work replaced by the Fake's (a few Map operations a request),
// so what moves between two builds is the proxy's planning, diffing and
// bookkeeping. Measured, per size (ClusterIP Services x 5 endpoints, as in
// ipvs-sync.ts):
//   - the cold sync (first sync: read back an empty kernel, write everything)
//     and a periodic full sync right after it (read everything back, nothing
//     to write), each the median of --reps, every rep into a fresh Fake;
//   - one-endpoint changes (partial syncs), the median of --changes;
//   - the heap the dataplane retains after them (after a full GC: with the
//     dataplane, minus without it; the Fake's own memory is not counted).
// Times are wall and CPU milliseconds (CPU: every thread of the process, so
// the GC's helpers count; on a loaded machine the CPU figure is the one that
// holds). Prints one JSON line per size. Needs --expose-gc for the heap figure:
//
//   npx tsc -p tsconfig.json && node --expose-gc dist/bench/ipvs-fake-sync.js [--sizes 1000,10000] [--reps 3] [--changes 15]
import { performance } from 'node:perf_hooks';
import type { SyncState } from '../src/core/types.js';
import { Fake } from '../src/dataplane/ipvs/fake.js';
import { FakeClock } from '../test/support/fakeclock.js';
import type { CommandRunner } from '../src/platform/exec.js';
import { IpvsDataplane } from '../src/platform/ipvs/dataplane.js';
import { fakeKernel } from '../src/platform/ipvs/kernel.js';
import { IPVS_BENCH_CONFIG as CONFIG, ipvsBenchState } from './lib/ipvsstate.js';

const arg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const SIZES = (arg('sizes') ?? '1000,10000').split(',').map(Number);
const CHANGES = Number(arg('changes') ?? 15);
const REPS = Number(arg('reps') ?? 3);

/** Only `iptables --version` is run (feature detection); everything else goes to the Fake. */
const run: CommandRunner = async () => ({ stdout: 'iptables v1.8.9 (nf_tables)\n', stderr: '', code: 0 });

/** n ClusterIP Services x 5 endpoints; `change` moves one endpoint of Service n/2 (0 = none). */
function state(n: number, change: number, full: boolean): SyncState {
  return ipvsBenchState(n, { full, change: change > 0 ? `10.250.${change >> 8}.${change & 255}` : undefined });
}

const gc = (globalThis as { gc?: () => void }).gc;
function heapMiB(): number | null {
  if (!gc) return null;
  gc();
  gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

/** Wall and CPU (user + system, every thread of the process: the GC's too) milliseconds of one call. */
async function timed(fn: () => Promise<unknown>): Promise<{ wall: number; cpu: number }> {
  const c = process.cpuUsage();
  const t = performance.now();
  await fn();
  const u = process.cpuUsage(c);
  return { wall: performance.now() - t, cpu: (u.user + u.system) / 1000 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function dataplane(fake: Fake): IpvsDataplane {
  return new IpvsDataplane({
    config: CONFIG,
    ipvs: { scheduler: 'rr', excludeCIDRs: [], strictARP: false, tcpTimeout: 0, tcpFinTimeout: 0, udpTimeout: 0 },
    kernel: fakeKernel(fake),
    run,
    clock: new FakeClock(),
    syncPeriodMs: 3_600_000,
  });
}

type Timing = { wall: number; cpu: number };
const summary = (ts: Timing[]) => ({
  wall: Number(median(ts.map((t) => t.wall)).toFixed(2)),
  cpu: Number(median(ts.map((t) => t.cpu)).toFixed(2)),
});

/** REPS cold syncs (each into a fresh Fake) and full syncs after them; changes and the heap after the last. */
async function measure(n: number) {
  const cold = state(n, 0, true);
  const changes = Array.from({ length: CHANGES }, (_, c) => state(n, c + 1, false));
  const colds: Timing[] = [];
  const fulls: Timing[] = [];
  const changed: Timing[] = [];
  let fake = new Fake();
  // Held through `held` only, so dropping it lets the GC take the dataplane's memory.
  const held: { dp: IpvsDataplane | null } = { dp: null };
  const sync = (s: SyncState) => timed(() => held.dp!.sync(s));
  for (let rep = 0; rep < REPS; rep++) {
    held.dp?.close();
    fake = new Fake({ nodeAddresses: ['10.1.0.1', '10.2.0.1'] });
    held.dp = dataplane(fake);
    colds.push(await sync(cold));
    fulls.push(await sync(cold));
  }
  for (const s of changes) changed.push(await sync(s));
  const withDp = heapMiB();
  held.dp!.close();
  held.dp = null;
  // A new job: what the finished syncs' promise jobs still referenced is let go.
  await new Promise((r) => setImmediate(r));
  const without = heapMiB();
  // Keep the inputs and the Fake alive until both heap figures are taken.
  if (cold.services.size + changes.length + fake.listServices().length < 0) console.log('unreachable');
  const [c, f, ch] = [summary(colds), summary(fulls), summary(changed)];
  return {
    services: n,
    coldMs: c.wall,
    coldCpuMs: c.cpu,
    fullMs: f.wall,
    fullCpuMs: f.cpu,
    changeMs: ch.wall,
    changeCpuMs: ch.cpu,
    retainedMiB: withDp === null || without === null ? null : Number((withDp - without).toFixed(1)),
  };
}

// Unreported warm-up: the first sync of a process also pays for loading and compiling the modules.
await measure(Math.min(200, ...SIZES));
for (const n of SIZES) console.log(JSON.stringify(await measure(n)));
