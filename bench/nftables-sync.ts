// Benchmark (never a test): nftables mode cold sync and one-endpoint change at
// 1k/10k/20k Services x 2 endpoints, applied in a network namespace, beside
// the floor: `nft -f` loading upstream's layout (the same transaction in the
// 'upstream' endpoint layout). Prints a table and writes
// bench/out/nftables-sync.{json,svg,png}. Run as root:
//
//   node --import tsx bench/nftables-sync.ts [--sizes 1000,10000,20000] [--changes 5] [--layout lean|maps|upstream]
//                                            [--proxy-node-flags "..."] [--no-floor]
//
// Times are wall clock and CPU of the proxy process (user + system: the
// kernel's work on our netlink batch runs in our process), the CPU figure
// being the one that holds on a loaded machine.
//
// Each size runs in a child process with fresh namespaces
// kpt-nftbench-<pid>-<rand>, removed on exit and on SIGINT. The child builds
// the input (Service/EndpointSlice objects, SyncState) and measures the floor;
// the proxy itself (dataplane fed the SyncState) runs in a grandchild, so its
// RSS holds no benchmark input objects (see ProxyMemory).
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { deserialize, serialize } from 'node:v8';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import type { DataplaneConfig, SyncState } from '../src/core/types.js';
import { NftablesPlanner } from '../src/platform/nftables/planner.js';
import type { EndpointLayout } from '../src/dataplane/nftables/static.js';
import { DEFAULT_ENDPOINT_LAYOUT } from '../src/dataplane/nftables/static.js';
import { NftablesDataplane } from '../src/platform/nftables/dataplane.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../test/netns/cleanup.js';
import { writeChart } from './lib/chart.js';
import { binaryNodeFlags, compiledScript, printResult } from './lib/compiled.js';
import { buildState, withExtraEndpoint } from './lib/syncstate.js';

const here = dirname(fileURLToPath(import.meta.url));
// Compiled into bench/out/dist/bench/ (see compiledChild), output still goes to bench/out.
const COMPILED = here.includes(join('bench', 'out', 'dist'));
const REPO = COMPILED ? join(here, '..', '..', '..', '..') : join(here, '..');
const OUT = process.env['KPT_BENCH_OUT'] ?? join(REPO, 'bench', 'out');
const arg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};

const LAYOUT = (arg('layout') ?? DEFAULT_ENDPOINT_LAYOUT) as EndpointLayout;

const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8'] },
  nodePortAddresses: ['192.168.0.10/32'],
  localhostNodePorts: false,
  localIPs: ['127.0.0.1', '192.168.0.10'],
};

interface Result {
  size: number;
  stateMs: number;
  coldMs: number;
  coldOps: number;
  changeMs: number[];
  changeRenderMs: number[];
  /** How each change reached the kernel: 'netlink' (fast path) or 'nft'. */
  changeVia: string[];
  /** The bench process (Service/EndpointSlice objects + SyncState + floor renders): peak RSS. */
  benchMaxRssMiB: number;
  proxy: ProxyMemory;
  floorColdMs: number;
  floorChangeMs: number;
}

/**
 * The proxy's own memory, measured in a separate process that holds only
 * what a proxy holds: the SyncState (deserialized from the bench's, no
 * Service/EndpointSlice objects) and the dataplane, after a cold sync and the
 * endpoint changes. Heap figures are after a forced GC (--expose-gc).
 */
interface ProxyMemory {
  /** Node + our modules loaded, nothing else. */
  baseRssMiB: number;
  /** After the SyncState exists. */
  stateRssMiB: number;
  stateHeapMiB: number;
  /** Right after the cold sync, before any GC: where the peak comes from. */
  afterCold: { rssMiB: number; heapTotalMiB: number; heapUsedMiB: number; externalMiB: number; peakMiB: number };
  /** Peak over cold sync and changes (includes the transient transaction script). */
  peakRssMiB: number;
  /** Retained after the syncs: the planner's memory (reconciler + driver) + SyncState. */
  retainedHeapMiB: number;
  coldMs: number;
  /** CPU of the proxy process (user + system, the kernel's commit work included) for the cold sync and each change. */
  coldCpuMs: number;
  /** The system part of coldCpuMs: the kernel's work on our netlink batch runs in our sendmsg. */
  coldSysMs: number;
  coldOps: number;
  changeMs: number[];
  changeCpuMs: number[];
  changeVia: string[];
}

/** CPU ms of this process (user + system) since `from`. */
const cpuMs = (from: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(from);
  return (d.user + d.system) / 1000;
};

const MiB = 1024 * 1024;

const gc = () => (globalThis as { gc?: () => void }).gc?.();

async function proxyChild(file: string): Promise<ProxyMemory> {
  gc();
  const baseRssMiB = process.memoryUsage().rss / MiB;
  const state = deserialize(readFileSync(file)) as SyncState;
  rmSync(file, { force: true });
  gc();
  const stateRssMiB = process.memoryUsage().rss / MiB;
  const stateHeapMiB = process.memoryUsage().heapUsed / MiB;
  const ns = newNs();
  try {
    let coldOps = 0;
    const vias: string[] = [];
    const dp = new NftablesDataplane({
      config: CONFIG,
      netns: ns,
      layout: LAYOUT,
      // onApplied, not onTransaction: the proxy builds no transaction text (only at trace level), so neither may the bench.
      onApplied: (_f, ops, _p, via) => {
        if (vias.length === 0) coldOps = ops; // the cold sync's, not the last change's
        vias.push(via);
      },
    });
    const c0 = performance.now();
    const u0 = process.cpuUsage();
    await dp.sync(state);
    const coldMs = performance.now() - c0;
    const coldCpuMs = cpuMs(u0);
    const coldSysMs = process.cpuUsage(u0).system / 1000;
    const m = process.memoryUsage();
    const afterCold = {
      rssMiB: m.rss / MiB,
      heapTotalMiB: m.heapTotal / MiB,
      heapUsedMiB: m.heapUsed / MiB,
      externalMiB: m.external / MiB,
      peakMiB: process.resourceUsage().maxRSS / 1024,
    };
    const changeMs: number[] = [];
    const changeCpuMs: number[] = [];
    const changes = Number(arg('changes') ?? 5);
    for (let r = 0; r < changes; r++) {
      const st = withExtraEndpoint(state, (r * 7919) % state.services.size, r);
      const s0 = performance.now();
      const u = process.cpuUsage();
      await dp.sync(st);
      changeMs.push(performance.now() - s0);
      changeCpuMs.push(cpuMs(u));
    }
    const peakRssMiB = process.resourceUsage().maxRSS / 1024;
    gc();
    const retainedHeapMiB = process.memoryUsage().heapUsed / MiB;
    dp.close();
    return {
      baseRssMiB,
      stateRssMiB,
      stateHeapMiB,
      afterCold,
      peakRssMiB,
      retainedHeapMiB,
      coldMs,
      coldCpuMs,
      coldSysMs,
      coldOps,
      changeMs,
      changeCpuMs,
      changeVia: vias.slice(1),
    };
  } finally {
    dropNs(ns);
  }
}

function newNs(): string {
  const ns = `kpt-nftbench-${process.pid}-${randomBytes(2).toString('hex')}`;
  trackNamespace(ns);
  execFileSync('ip', ['netns', 'add', ns]);
  return ns;
}
function dropNs(ns: string): void {
  deleteNamespaceSync(ns);
  untrackNamespace(ns);
}

function timeNft(ns: string, script: string): number {
  const t0 = performance.now();
  const r = spawnSync('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], {
    input: script,
    stdio: ['pipe', 'ignore', 'pipe'],
    maxBuffer: 1 << 30,
  });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`nft -f failed: ${r.stderr.toString().slice(0, 500)}`);
  return ms;
}

async function child(size: number): Promise<Result> {
  const t0 = performance.now();
  const state = buildState(size);
  const stateMs = performance.now() - t0;
  const floorNs = newNs();
  try {
    // The proxy side runs in its own process (see ProxyMemory), fed this SyncState.
    const file = join(tmpdir(), `kpt-nftbench-${process.pid}.state`);
    writeFileSync(file, serialize(state));
    // --proxy-node-flags "--max-semi-space-size=1 ...": V8 flags for the proxy process only;
    // without it, those of bin/kube-proxy-ts's #! line, as the real proxy runs.
    const flags = arg('proxy-node-flags')?.split(' ').filter(Boolean) ?? binaryNodeFlags(REPO);
    const r = spawnSync(
      process.execPath,
      [
        '--expose-gc',
        ...flags,
        ...process.execArgv,
        fileURLToPath(import.meta.url),
        '--proxy',
        file,
        '--changes',
        arg('changes') ?? '5',
        '--layout',
        LAYOUT,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 },
    );
    rmSync(file, { force: true });
    if (r.status !== 0) throw new Error(`proxy process for ${size} failed`);
    const proxy = JSON.parse(r.stdout.toString().trim().split('\n').pop()!) as ProxyMemory;
    const changes = Number(arg('changes') ?? 5);
    const changeStates = Array.from({ length: changes }, (_, k) => withExtraEndpoint(state, (k * 7919) % size, k));
    // Render-only time of the same changes (plan + transaction, no kernel), on a planner of our own.
    const changeRenderMs: number[] = [];
    const probe = new NftablesPlanner(CONFIG, LAYOUT);
    probe.plan(state, 0);
    for (const st of changeStates) {
      const p0 = performance.now();
      probe.plan(st, 0);
      changeRenderMs.push(performance.now() - p0);
    }
    // The floor: upstream's layout through nft -f, cold and one change (--no-floor: skipped, NaN).
    const up = new NftablesPlanner(CONFIG, 'upstream');
    const noFloor = process.argv.includes('--no-floor');
    const floorColdMs = noFloor ? NaN : timeNft(floorNs, up.plan(state, 0).tx.toString());
    const floorChangeMs = noFloor ? NaN : timeNft(floorNs, up.plan(withExtraEndpoint(state, 1, 99), 0).tx.toString());
    const benchMaxRssMiB = process.resourceUsage().maxRSS / 1024;
    return {
      size,
      stateMs,
      coldMs: proxy.coldMs,
      coldOps: proxy.coldOps,
      changeMs: proxy.changeMs,
      changeRenderMs,
      changeVia: proxy.changeVia,
      benchMaxRssMiB,
      proxy,
      floorColdMs,
      floorChangeMs,
    };
  } finally {
    dropNs(floorNs);
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

function main(): void {
  const sizes = (arg('sizes') ?? '1000,10000,20000').split(',').map(Number);
  const results: Result[] = [];
  // Compiled JavaScript when possible, as bench/iptables-sync.ts: under tsx the children would carry the loader.
  const childArgs = compiledScript(import.meta.url, REPO, OUT);
  for (const size of sizes) {
    const r = spawnSync(
      process.execPath,
      [
        ...childArgs,
        '--child',
        String(size),
        '--changes',
        arg('changes') ?? '5',
        '--layout',
        LAYOUT,
        ...(arg('proxy-node-flags') !== undefined ? ['--proxy-node-flags', arg('proxy-node-flags')!] : []),
        ...(process.argv.includes('--no-floor') ? ['--no-floor'] : []),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 },
    );
    if (r.status !== 0) throw new Error(`child for ${size} failed`);
    results.push(JSON.parse(r.stdout.toString().trim().split('\n').pop()!) as Result);
  }
  const f = (ms: number | null) =>
    ms === null || Number.isNaN(ms) ? '-' : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`;
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  console.log(`layout: ${LAYOUT}; load average at the end ${load}`);
  console.log(
    `| Services | floor: nft -f upstream layout | ours cold sync (${LAYOUT}): wall; cpu (its system part) | ours/floor | floor: 1-endpoint change via nft -f | ours: 1-endpoint change, SyncState -> kernel (median wall; median cpu; max wall; render part; path) | proxy peak RSS (node+modules; +SyncState) | proxy heap retained after syncs (SyncState part) |`,
  );
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    const via = [...new Set(r.changeVia)].join('+');
    console.log(
      `| ${r.size} | ${f(r.floorColdMs)} | ${f(r.coldMs)}; ${f(r.proxy.coldCpuMs)} (${f(r.proxy.coldSysMs)}) | ${r.floorColdMs === null || Number.isNaN(r.floorColdMs) ? '-' : (r.coldMs / r.floorColdMs).toFixed(3)} | ${f(r.floorChangeMs)} | ${f(median(r.changeMs))}; ${f(median(r.proxy.changeCpuMs))}; ${f(Math.max(...r.changeMs))}; ${f(median(r.changeRenderMs))}; ${via} | ${r.proxy.peakRssMiB.toFixed(0)} MiB (${r.proxy.baseRssMiB.toFixed(0)}; ${r.proxy.stateRssMiB.toFixed(0)} MiB) | ${r.proxy.retainedHeapMiB.toFixed(0)} MiB (${r.proxy.stateHeapMiB.toFixed(0)} MiB) |`,
    );
  }
  mkdirSync(OUT, { recursive: true });
  writeFileSync(join(OUT, 'nftables-sync.json'), JSON.stringify(results, null, 2));
  const png = writeChart(join(OUT, 'nftables-sync'), {
    title: 'nftables mode: cold sync and one-endpoint change (seconds, log scale)',
    yLabel: 'seconds',
    log: true,
    series: ['nft -f upstream layout (cold)', `ours cold (${LAYOUT})`, 'nft -f upstream (1 change)', 'ours 1 change'],
    groups: results.map((r) => ({
      label: `${r.size / 1000}k Services`,
      values: [r.floorColdMs / 1000, r.coldMs / 1000, r.floorChangeMs / 1000, median(r.changeMs) / 1000],
    })),
  });
  console.log(png ? `chart: ${png}` : 'chart: SVG only (no rsvg-convert)');
  rmSync(join(OUT, 'nftables-sync.tmp'), { force: true });
}

if (arg('proxy') !== undefined) printResult(proxyChild(arg('proxy')!));
else if (arg('child') !== undefined) printResult(child(Number(arg('child'))));
else main();
