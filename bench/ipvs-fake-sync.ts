// Benchmark (never a test): the process side of IPVS mode's syncs, with the
// IPVS Fake as the kernel (src/platform/ipvs/kernel.ts fakeKernel), on this
// machine. bench/ipvs-sync.ts measures the real kernel in a QEMU guest, where
// one run takes a quarter of an hour and emulation noise hides what the
// proxy's own code costs; this one times the same IpvsDataplane.sync() with
// the kernel's work replaced by the Fake's (a few Map operations a request),
// so what moves between two builds is the proxy's planning, diffing and
// bookkeeping. Measured, per size (ClusterIP Services x 5 endpoints, as in
// ipvs-sync.ts):
//   - the cold sync (first sync: read back an empty kernel, write everything);
//   - a periodic full sync right after it (read everything back, nothing to write);
//   - one-endpoint changes (partial syncs), the median of --changes;
//   - the heap the dataplane retains after them (after a full GC: with the
//     dataplane, minus without it; the Fake's own memory is not counted).
// Prints one JSON line per size. Needs --expose-gc for the heap figure:
//
//   npx tsc -p tsconfig.json && node --expose-gc dist/bench/ipvs-fake-sync.js [--sizes 1000,10000] [--changes 15]
import { performance } from 'node:perf_hooks';
import { syncStateFromObjects } from '../src/core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../src/core/types.js';
import { Fake } from '../src/dataplane/ipvs/fake.js';
import { FakeClock } from '../test/support/fakeclock.js';
import type { CommandRunner } from '../src/platform/exec.js';
import { IpvsDataplane } from '../src/platform/ipvs/dataplane.js';
import { fakeKernel } from '../src/platform/ipvs/kernel.js';

const arg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const SIZES = (arg('sizes') ?? '1000,10000').split(',').map(Number);
const CHANGES = Number(arg('changes') ?? 15);

const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.244.0.0/16'] },
  nodePortAddresses: ['10.1.0.1/32'],
  localhostNodePorts: false,
  localIPs: ['10.1.0.1', '10.2.0.1'],
};
/** Only `iptables --version` is run (feature detection); everything else goes to the Fake. */
const run: CommandRunner = async () => ({ stdout: 'iptables v1.8.9 (nf_tables)\n', stderr: '', code: 0 });

/** n ClusterIP Services x 5 endpoints; `change` moves one endpoint of Service n/2 (0 = none). */
function state(n: number, change: number, full: boolean): SyncState {
  const services = [];
  const slices = [];
  for (let i = 0; i < n; i++) {
    const name = `s${i}`;
    services.push({
      metadata: { namespace: 'bench', name },
      spec: {
        clusterIP: `10.96.${(i >> 8) & 255}.${i & 255}`,
        ports: [{ name: 'p', port: 80, protocol: 'TCP', targetPort: 8080 }],
      },
    });
    const eps = Array.from({ length: 5 }, (_, e) => `10.${100 + e}.${(i >> 8) & 255}.${i & 255}`);
    if (change > 0 && i === n >> 1) eps[0] = `10.250.${change >> 8}.${change & 255}`;
    slices.push({
      metadata: { namespace: 'bench', name: `${name}-1`, labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4',
      endpoints: eps.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: 'other' })),
      ports: [{ name: 'p', port: 8080, protocol: 'TCP' }],
    });
  }
  return syncStateFromObjects({
    services: services as never,
    slices: slices as never,
    family: 'IPv4',
    nodeName: 'node',
    nodeIPs: { IPv4: '10.1.0.1' },
    fullSync: full,
    changedServices: change > 0 ? [`bench/s${n >> 1}`] : undefined,
  });
}

const gc = (globalThis as { gc?: () => void }).gc;
function heapMiB(): number | null {
  if (!gc) return null;
  gc();
  gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function measure(n: number) {
  const cold = state(n, 0, true);
  const changes = Array.from({ length: CHANGES }, (_, c) => state(n, c + 1, false));
  const fake = new Fake({ nodeAddresses: ['10.1.0.1', '10.2.0.1'] });
  // Held through `held` only, so dropping it lets the GC take the dataplane's memory.
  const held: { dp: IpvsDataplane | null } = { dp: null };
  held.dp = new IpvsDataplane({
    config: CONFIG,
    ipvs: { scheduler: 'rr', excludeCIDRs: [], strictARP: false, tcpTimeout: 0, tcpFinTimeout: 0, udpTimeout: 0 },
    kernel: fakeKernel(fake),
    run,
    clock: new FakeClock(),
    syncPeriodMs: 3_600_000,
  });
  const sync = (s: SyncState) => timed(() => held.dp!.sync(s));
  const coldMs = await sync(cold);
  const fullMs = await sync(cold);
  const changeMs: number[] = [];
  for (const s of changes) changeMs.push(await sync(s));
  const withDp = heapMiB();
  held.dp.close();
  held.dp = null;
  // A new job: what the finished syncs' promise jobs still referenced is let go.
  await new Promise((r) => setImmediate(r));
  const without = heapMiB();
  // Keep the inputs and the Fake alive until both heap figures are taken.
  if (cold.services.size + changes.length + fake.listServices().length < 0) console.log('unreachable');
  return {
    services: n,
    coldMs: Math.round(coldMs),
    fullMs: Math.round(fullMs),
    changeMedianMs: Number(median(changeMs).toFixed(2)),
    retainedMiB: withDp === null || without === null ? null : Number((withDp - without).toFixed(1)),
  };
}

// Unreported warm-up: the first sync of a process also pays for loading and compiling the modules.
await measure(200);
for (const n of SIZES) console.log(JSON.stringify(await measure(n)));
