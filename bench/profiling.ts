// Benchmark (never a test): what enableProfiling costs. No root, no namespace.
//
//   node --import tsx bench/profiling.ts [--services 5000] [--reps 5]
//
// 1. Loading: a fresh node process importing pprof-format (the encoder, loaded
//    on the first pprof request) and pprof/routes.ts (loaded at start-up when
//    profiling is on; it opens the inspector session), time and RSS.
// 2. Heap sampling while the proxy works: the CPU time of a full sync's pure
//    part (change trackers, buildSyncState, the iptables render) of N Services,
//    without sampling, with ours (512 KiB) and with V8's default (32 KiB).
//    Each setting runs in its own child process, interleaved, median of reps.
// 3. Encoding: a CPU profile of that workload (and the heap profile it
//    leaves) turned into pprof, encoded and gzipped: time and sizes.
import { spawnSync } from 'node:child_process';
import { Session } from 'node:inspector/promises';
import { performance } from 'node:perf_hooks';
import { gzipSync } from 'node:zlib';
import type { EndpointSlice, Service } from '../src/core/api.js';
import { nodeInfoFromNode } from '../src/core/nodeinfo.js';
import { finish } from '../src/core/steps.js';
import type { Dataplane } from '../src/core/types.js';
import { DEFAULT_IPTABLES_OPTIONS } from '../src/dataplane/iptables/renderer.js';
import { FamilyState } from '../src/engine/familystate.js';
import { IptablesPlanner } from '../src/platform/iptables/planner.js';
import type { V8CallFrame, V8CpuProfile } from '../src/platform/pprof/convert.js';
import { service, slice } from '../test/cases/fixtures.js';
import { median } from './lib/cluster.js';
import { BENCH_IPTABLES_CONFIG } from './lib/dpconfig.js';

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? def) : def;
}

const CONFIG = BENCH_IPTABLES_CONFIG;

/** A full sync's pure part for n Services of 5 endpoints, from objects to restore text. */
function workload(n: number): number {
  const services: Service[] = [];
  const slices: EndpointSlice[] = [];
  for (let i = 0; i < n; i++) {
    services.push(
      service(`s${i}`, { clusterIP: `172.30.${i >> 8}.${i & 255}` }, [{ name: 'http', port: 80, targetPort: 8080 }]),
    );
    slices.push(
      slice(
        `s${i}`,
        [{ name: 'http', port: 8080 }],
        Array.from({ length: 5 }, (_, e) => ({
          ip: `10.${100 + ((i * 5 + e) >> 16)}.${((i * 5 + e) >> 8) & 255}.${(i * 5 + e) & 255}`,
        })),
      ),
    );
  }
  const fam = new FamilyState(
    { family: 'IPv4' } as Dataplane,
    'bench-node',
    0,
    () => {},
    () => {},
  );
  for (const s of services) fam.services.update(null, s);
  for (const s of slices) fam.endpointsTracker.endpointSliceUpdate(s, false);
  const changes = fam.checkout();
  const state = finish(
    fam.stateSteps({
      node: nodeInfoFromNode('bench-node', null, { IPv4: '192.168.0.2' }),
      changedServices: changes.updatedServices,
      fullSync: true,
      serviceCIDRs: [],
    }),
  );
  const out = new IptablesPlanner().plan({ state, config: CONFIG, options: DEFAULT_IPTABLES_OPTIONS }, true);
  return out.natRulesTotal;
}

const cpuMs = (f: () => void): number => {
  const a = process.cpuUsage();
  f();
  const b = process.cpuUsage(a);
  return (b.user + b.system) / 1000;
};

/** Child: run the workload with heap sampling at `interval` bytes (0: off); print CPU ms per run. */
async function child(interval: number, n: number): Promise<void> {
  const s = new Session();
  s.connect();
  if (interval > 0) {
    await s.post('HeapProfiler.enable');
    await s.post('HeapProfiler.startSampling', { samplingInterval: interval });
  }
  workload(Math.min(n, 500)); // warm the code up
  let natRules = 0;
  const runs = [0, 1, 2].map(() => cpuMs(() => (natRules = workload(n))));
  console.log(JSON.stringify({ cpuMs: median(runs), maxRssKiB: process.resourceUsage().maxRSS, natRules }));
}

function spawnSelf(args: string[]): string {
  const r = spawnSync(process.execPath, [...process.execArgv, process.argv[1]!, ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
  return r.stdout.trim();
}

function loadCost(spec: string): { ms: number; rssKiB: number } {
  const code = `const r0 = process.memoryUsage().rss; const t = performance.now();
await import(${JSON.stringify(spec)});
const ms = performance.now() - t; const rss = process.memoryUsage().rss - r0;
console.log(JSON.stringify({ ms, rssKiB: Math.round(rss / 1024) }));`;
  const runs = [0, 1, 2, 3, 4].map(() => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
    return JSON.parse(r.stdout) as { ms: number; rssKiB: number };
  });
  return { ms: median(runs.map((r) => r.ms)), rssKiB: median(runs.map((r) => r.rssKiB)) };
}

async function main(): Promise<void> {
  const n = Number(arg('services', '5000'));
  const reps = Number(arg('reps', '5'));
  if (process.argv.includes('--child')) return child(Number(arg('interval', '0')), n);

  const encoder = import.meta.resolve('pprof-format');
  const routes = new URL(
    import.meta.url.endsWith('.ts') ? '../src/platform/pprof/routes.ts' : '../src/platform/pprof/routes.js',
    import.meta.url,
  ).href;
  console.log('load pprof-format:', loadCost(encoder));
  if (routes.endsWith('.js')) console.log('load pprof/routes.js:', loadCost(routes));

  const settings = [0, 512 * 1024, 32 * 1024];
  const res = new Map<number, { cpuMs: number; maxRssKiB: number }[]>(settings.map((s) => [s, []]));
  for (let r = 0; r < reps; r++)
    for (const s of settings)
      res.get(s)!.push(JSON.parse(spawnSelf(['--child', '--interval', String(s), '--services', String(n)])));
  for (const s of settings) {
    const xs = res.get(s)!;
    console.log(
      `heap sampling ${s === 0 ? 'off' : `${s / 1024} KiB`}: workload (${n} Services) CPU ${median(xs.map((x) => x.cpuMs)).toFixed(0)} ms, peak RSS ${(median(xs.map((x) => x.maxRssKiB)) / 1024).toFixed(0)} MiB`,
    );
  }

  // Encoding: profile the workload in this process, as the proxy would.
  const { cpuProfileToPprof, heapProfileToPprof } = await import('../src/platform/pprof/convert.js');
  const s = new Session();
  s.connect();
  await s.post('HeapProfiler.enable');
  await s.post('HeapProfiler.startSampling', { samplingInterval: 512 * 1024 });
  await s.post('Profiler.enable');
  await s.post('Profiler.setSamplingInterval', { interval: 1000 });
  await s.post('Profiler.start');
  const keep: number[] = [];
  for (let i = 0; i < 3; i++) keep.push(workload(n));
  const { profile } = await s.post('Profiler.stop');
  const { profile: heap } = await s.post('HeapProfiler.getSamplingProfile');
  const json = JSON.stringify(profile);
  let bytes = 0;
  const t0 = performance.now();
  const cpuConvMs = cpuMs(() => {
    const p = cpuProfileToPprof(profile, { timeNanos: 0n, intervalMicros: 1000 });
    bytes = gzipSync(p.encode()).length;
  });
  console.log(
    `CPU profile: ${profile.samples?.length} ticks, ${profile.nodes.length} nodes, .cpuprofile ${(json.length / 1024).toFixed(0)} KiB; ` +
      `to pprof + gzip ${cpuConvMs.toFixed(0)} ms CPU (${(performance.now() - t0).toFixed(0)} ms wall), ${(bytes / 1024).toFixed(0)} KiB`,
  );
  const heapConvMs = cpuMs(() => {
    const p = heapProfileToPprof(heap as never, { timeNanos: 0n, intervalBytes: 512 * 1024 });
    bytes = gzipSync(p.encode()).length;
  });
  console.log(`heap profile: to pprof + gzip ${heapConvMs.toFixed(0)} ms CPU, ${(bytes / 1024).toFixed(0)} KiB`);
  s.disconnect();

  // A long profile of a busy process: every tick on a stack (none idle), 2,000 distinct frames.
  for (const ticks of [30_000, 300_000]) {
    const big = syntheticProfile(ticks, 2000);
    let size = 0;
    const ms = cpuMs(() => {
      size = gzipSync(cpuProfileToPprof(big, { timeNanos: 0n, intervalMicros: 1000 }).encode()).length;
    });
    console.log(
      `synthetic CPU profile, ${ticks} ticks over ${big.nodes.length} nodes: .cpuprofile ${(JSON.stringify(big).length / 1024).toFixed(0)} KiB; ` +
        `to pprof + gzip ${ms.toFixed(0)} ms CPU, ${(size / 1024).toFixed(0)} KiB`,
    );
  }
}

/** A tree of `frames` call frames, 20 deep at most, with `ticks` samples spread over its nodes. */
function syntheticProfile(ticks: number, frames: number): V8CpuProfile {
  const nodes: { id: number; callFrame: V8CallFrame; children: number[] }[] = [
    { id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: -1, columnNumber: -1 }, children: [] },
  ];
  const depth = new Map<number, number>([[1, 0]]);
  let seed = 1;
  const rand = (k: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % k;
  for (let i = 2; nodes.length < frames * 3; i++) {
    let parent = nodes[rand(nodes.length)]!;
    if (depth.get(parent.id)! >= 20) parent = nodes[0]!;
    const f = rand(frames);
    nodes.push({
      id: i,
      callFrame: { functionName: `fn${f}`, url: `file:///app/dist/src/m${f % 50}.js`, lineNumber: f, columnNumber: 2 },
      children: [],
    });
    parent.children.push(i);
    depth.set(i, depth.get(parent.id)! + 1);
  }
  const samples = Array.from({ length: ticks }, () => nodes[1 + rand(nodes.length - 1)]!.id);
  return { nodes, startTime: 0, endTime: ticks * 1000, samples, timeDeltas: samples.map(() => 1000) };
}

await main();
