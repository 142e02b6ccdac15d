// Benchmark (never a test): userspace mode syncs at 1k/10k Services x 2
// endpoints (one TCP port each, every 10th a NodePort): the cold sync (every
// listener opened, the redirect table written), one-endpoint changes (a
// partial SyncState, as the engine hands it over: changedServices = that
// Service) and a full resync of an unchanged state (the hourly sync). Prints
// a table and writes bench/out/userspace-sync.{json,svg,png}. Run as root:
//
//   node --import tsx bench/userspace-sync.ts [--sizes 1000,10000] [--changes 7] [--fulls 3]
//
// The changes come first, then `--fulls` full resyncs, each after one more
// change (as an hourly resync follows partial syncs); medians are printed.
//
// The proxy side runs in a child process started with `ip netns exec` in a
// fresh namespace kpt-ussync-<pid>-<rand> (its listeners bind there, its
// table is written there over netlink), fed a SyncState the parent built and
// serialised, so its heap holds only what a proxy holds. Times are wall and
// CPU of that process (user + system: the kernel's work on our sockets and
// netlink batches runs in our syscalls); on the shared machine read the CPU.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { deserialize, serialize } from 'node:v8';
import type { DataplaneConfig, SyncState } from '../src/core/types.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../test/netns/cleanup.js';
import { writeChart } from './lib/chart.js';
import { binaryNodeFlags, compiledScript, printResult } from './lib/compiled.js';
import { buildState, withExtraEndpoint } from './lib/syncstate.js';

const here = dirname(fileURLToPath(import.meta.url));
const COMPILED = here.includes(join('bench', 'out'));
const REPO = COMPILED ? here.slice(0, here.indexOf(join('bench', 'out'))) : join(here, '..');
const OUT = process.env['KPT_BENCH_OUT'] ?? join(REPO, 'bench', 'out');
const arg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const CHANGES = Number(arg('changes') ?? 7);
const FULLS = Number(arg('fulls') ?? 3);
const MiB = 1024 * 1024;

const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8'] },
  nodePortAddresses: null,
  localhostNodePorts: false,
  localIPs: ['127.0.0.1', '192.168.0.10'],
};

interface Timing {
  wallMs: number;
  cpuMs: number;
}

interface ProxyResult {
  cold: Timing;
  changes: Timing[];
  fulls: Timing[];
  /** Retained heap after the syncs and a forced GC: the SyncState plus the dataplane's memory. */
  retainedHeapMiB: number;
  /** The SyncState alone (before the first sync). */
  stateHeapMiB: number;
  peakRssMiB: number;
}

const gc = () => (globalThis as { gc?: () => void }).gc?.();

async function timed(f: () => Promise<unknown>): Promise<Timing> {
  const u = process.cpuUsage();
  const t = performance.now();
  await f();
  const d = process.cpuUsage(u);
  return { wallMs: performance.now() - t, cpuMs: (d.user + d.system) / 1000 };
}

/** The proxy process, inside the namespace. */
async function proxyChild(file: string): Promise<ProxyResult> {
  const { UserspaceDataplane } = await import('../src/platform/userspace/dataplane.js');
  const state = deserialize(readFileSync(file)) as SyncState;
  rmSync(file, { force: true });
  gc();
  const stateHeapMiB = process.memoryUsage().heapUsed / MiB;
  const dp = new UserspaceDataplane({ config: CONFIG });
  // As in the proxy, which always watches for drift (the table's nf_tables events, the listener checks).
  dp.watchDrift(() => {});
  const cold = await timed(() => dp.sync(state));
  const changes: Timing[] = [];
  for (let r = 0; r < CHANGES; r++) {
    const st = withChange(state, (r * 7919) % state.services.size, r);
    changes.push(await timed(() => dp.sync(st)));
  }
  const fulls: Timing[] = [];
  for (let r = CHANGES; r < CHANGES + FULLS; r++) {
    const st = withChange(state, (r * 7919) % state.services.size, r);
    await dp.sync(st);
    fulls.push(await timed(() => dp.sync({ ...st, fullSync: true })));
  }
  gc();
  const retainedHeapMiB = process.memoryUsage().heapUsed / MiB;
  const peakRssMiB = process.resourceUsage().maxRSS / 1024;
  await dp.cleanup();
  return { cold, changes, fulls, retainedHeapMiB, stateHeapMiB, peakRssMiB };
}

/** One more endpoint for service `i`, with the changed service ports the engine's state carries. */
function withChange(base: SyncState, i: number, round: number): SyncState {
  return { ...withExtraEndpoint(base, i, round), changedServicePorts: new Set([`ns/svc${i}:p80`]) };
}

function runSize(size: number, self: string[]): ProxyResult {
  const file = join(tmpdir(), `kpt-ussync-${process.pid}.state`);
  writeFileSync(file, serialize(buildState(size)));
  const ns = `kpt-ussync-${process.pid}-${randomBytes(2).toString('hex')}`;
  trackNamespace(ns);
  try {
    execFileSync('ip', ['netns', 'add', ns]);
    const args = [
      '--expose-gc',
      ...binaryNodeFlags(REPO),
      ...self,
      '--proxy',
      file,
      '--changes',
      String(CHANGES),
      '--fulls',
      String(FULLS),
    ];
    const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, ...args], {
      stdio: ['ignore', 'pipe', 'inherit'],
      maxBuffer: 1 << 26,
    });
    if (r.status !== 0) throw new Error(`proxy process for ${size} failed`);
    return JSON.parse(r.stdout.toString().trim().split('\n').pop()!) as ProxyResult;
  } finally {
    rmSync(file, { force: true });
    deleteNamespaceSync(ns);
    untrackNamespace(ns);
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const f = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);

function main(): void {
  const sizes = (arg('sizes') ?? '1000,10000').split(',').map(Number);
  // The proxy runs compiled JavaScript, as in the other sync benches: no tsx loader in its heap.
  const self = compiledScript(import.meta.url, REPO, OUT);
  const results = sizes.map((size) => ({ size, ...runSize(size, self) }));
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  console.log(`load average at the end ${load}`);
  console.log(
    '| Services | cold sync: wall; cpu | 1-endpoint change: median wall; median cpu | full resync: median wall; median cpu | heap retained (SyncState part) | peak RSS |',
  );
  console.log('|---|---|---|---|---|---|');
  for (const r of results) {
    console.log(
      `| ${r.size} | ${f(r.cold.wallMs)}; ${f(r.cold.cpuMs)} | ${f(median(r.changes.map((c) => c.wallMs)))}; ${f(median(r.changes.map((c) => c.cpuMs)))} | ${f(median(r.fulls.map((c) => c.wallMs)))}; ${f(median(r.fulls.map((c) => c.cpuMs)))} | ${r.retainedHeapMiB.toFixed(1)} MiB (${r.stateHeapMiB.toFixed(1)} MiB) | ${r.peakRssMiB.toFixed(0)} MiB |`,
    );
  }
  mkdirSync(OUT, { recursive: true });
  writeFileSync(join(OUT, 'userspace-sync.json'), JSON.stringify(results, null, 2));
  const png = writeChart(join(OUT, 'userspace-sync'), {
    title: 'userspace mode: cold sync, one-endpoint change, full resync (CPU seconds, log scale)',
    yLabel: 'CPU seconds',
    log: true,
    series: ['cold sync', '1-endpoint change (median)', 'full resync (median)'],
    groups: results.map((r) => ({
      label: `${r.size / 1000}k Services`,
      values: [
        r.cold.cpuMs / 1000,
        median(r.changes.map((c) => c.cpuMs)) / 1000,
        median(r.fulls.map((c) => c.cpuMs)) / 1000,
      ],
    })),
  });
  console.log(png ? `chart: ${png}` : 'chart: SVG only (no rsvg-convert)');
}

if (arg('proxy') !== undefined) printResult(proxyChild(arg('proxy')!));
else main();
