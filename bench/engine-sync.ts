// Benchmark (never a test): the engine's own share of a sync, without any
// kernel. The Proxier takes N Services x 5 endpoints through the informers'
// transforms and its handlers, syncs them into a datapath that accepts every
// state, then syncs one-endpoint changes; after each sync it answers the
// service health server's two questions, as the running proxy does. What is
// timed is the proxy's own bookkeeping (checkout, snapshot, canary, health),
// the part of every mode's partial sync that is not the mode's.
//
//   node --import tsx bench/engine-sync.ts [--sizes 10000,30000,100000] [--changes 20] [--label name]
//   node --import tsx bench/engine-sync.ts --report a.json,b.json   (one plot of runs made before)
//
// Each size runs in a fresh child process with the binary's V8 flags. Prints a
// table and writes bench/out/engine-sync[-label].{json,svg,png}; --report
// draws the runs it is given side by side (bench/out/engine-sync-report.*).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import type { EndpointSlice, Service } from '../src/core/api.js';
import type { Dataplane, SyncOutcome, SyncState } from '../src/core/types.js';
import { canaryTarget } from '../src/core/canary.js';
import { nullObserver } from '../src/engine/observer.js';
import { Proxier } from '../src/engine/proxier.js';
import { realClock } from '../src/platform/clock.js';
import { transformEndpointSlice, transformService } from '../src/platform/k8s/transform.js';
import { writeChart } from './lib/chart.js';
import { binaryNodeFlags, printResult } from './lib/compiled.js';
import { BENCH_NODE, BENCH_NODE_IP, churnIP, endpointSlice, service, sliceEndpoint } from './lib/objects.js';

const here = dirname(fileURLToPath(import.meta.url));
const REPO = join(here, '..');
const OUT = join(REPO, 'bench', 'out');

interface SizeResult {
  readonly services: number;
  readonly coldCpuMs: number;
  readonly coldWallMs: number;
  /** Per one-endpoint change: CPU ms of the sync and the health answers after it. */
  readonly changeCpuMs: readonly number[];
  readonly changeWallMs: readonly number[];
  /** Ports the datapath was handed as changed, per change (1 expected). */
  readonly changedPorts: readonly number[];
}

/** Accepts every state; remembers how many ports each one said had changed. */
class AcceptingDataplane implements Dataplane {
  readonly mode = 'nftables' as const;
  readonly family = 'IPv4' as const;
  changed = 0;
  async sync(state: SyncState): Promise<SyncOutcome> {
    this.changed = state.changedServicePorts?.size ?? -1;
    return { partial: !state.fullSync };
  }
  async cleanup(): Promise<void> {}
  close(): void {}
}

const cpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

async function child(n: number, changes: number): Promise<SizeResult> {
  const dp = new AcceptingDataplane();
  const canary = canaryTarget('IPv4', BENCH_NODE, BENCH_NODE_IP, 40000);
  const proxier = new Proxier({
    nodeName: BENCH_NODE,
    dataplanes: [dp],
    clock: realClock,
    observer: nullObserver,
    requestSync: () => {},
    nodeIPOverride: { IPv4: BENCH_NODE_IP },
    canary: () => canary,
  });
  const slices: EndpointSlice[] = [];
  for (let i = 0; i < n; i++) {
    proxier.onServiceAdd(transformService(service(i)) as unknown as Service);
    const s = transformEndpointSlice(endpointSlice(i, 5)) as unknown as EndpointSlice;
    slices.push(s);
    proxier.onEndpointSliceAdd(s);
  }
  proxier.onServiceSynced();
  proxier.onEndpointSliceSynced();
  const sync = async (): Promise<void> => {
    await proxier.syncProxyRules();
    proxier.healthCheckNodePorts();
    proxier.localReadyEndpoints();
  };
  let c0 = cpuMs();
  let w0 = performance.now();
  await sync();
  const coldCpuMs = cpuMs() - c0;
  const coldWallMs = performance.now() - w0;
  const changeCpuMs: number[] = [];
  const changeWallMs: number[] = [];
  const changedPorts: number[] = [];
  for (let k = 0; k < changes; k++) {
    // Spread over the cluster; the new object is what a watch event delivers.
    const i = (k * 7919) % n;
    const raw = endpointSlice(i, 5) as { endpoints: unknown[]; metadata: { resourceVersion?: string } };
    raw.endpoints[k % 5] = sliceEndpoint(i, k % 5, churnIP(k));
    raw.metadata.resourceVersion = String(1000 + k);
    const next = transformEndpointSlice(raw) as unknown as EndpointSlice;
    proxier.onEndpointSliceUpdate(slices[i]!, next);
    slices[i] = next;
    c0 = cpuMs();
    w0 = performance.now();
    await sync();
    changeCpuMs.push(cpuMs() - c0);
    changeWallMs.push(performance.now() - w0);
    changedPorts.push(dp.changed);
  }
  return { services: n, coldCpuMs, coldWallMs, changeCpuMs, changeWallMs, changedPorts };
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}

function main(): void {
  const sizes = arg('--sizes', '10000,30000,100000').split(',').map(Number);
  const changes = Number(arg('--changes', '20'));
  const label = arg('--label', '');
  const self = fileURLToPath(import.meta.url);
  const rows: SizeResult[] = [];
  for (const n of sizes) {
    const r = spawnSync(
      process.execPath,
      [...binaryNodeFlags(REPO), '--import', 'tsx', self, '--child', String(n), '--changes', String(changes)],
      { encoding: 'utf8', maxBuffer: 1 << 26 },
    );
    const last = r.stdout.trim().split('\n').pop() ?? '';
    if (r.status !== 0) throw new Error(`child for ${n} failed: ${r.stderr.slice(-2000)}`);
    rows.push(JSON.parse(last) as SizeResult);
  }
  console.log(
    '| Services | cold sync CPU ms (wall) | one-endpoint change CPU ms: median / max (wall median) | ports handed over as changed |',
  );
  console.log('|---:|---:|---:|---:|');
  for (const r of rows) {
    // The first change warms code the cold sync did not run; it is in the max.
    console.log(
      `| ${r.services} | ${r.coldCpuMs.toFixed(0)} (${r.coldWallMs.toFixed(0)}) | ${median(r.changeCpuMs).toFixed(2)} / ${Math.max(...r.changeCpuMs).toFixed(2)} (${median(r.changeWallMs).toFixed(2)}) | ${median(r.changedPorts)} |`,
    );
  }
  mkdirSync(OUT, { recursive: true });
  const base = join(OUT, `engine-sync${label ? `-${label}` : ''}`);
  writeFileSync(`${base}.json`, JSON.stringify({ label, changes, rows }, null, 1));
  writeChart(base, {
    title: `The engine's share of a one-endpoint change${label ? ` (${label})` : ''}`,
    yLabel: 'CPU ms, median',
    series: ['one-endpoint change'],
    groups: rows.map((r) => ({ label: `${r.services / 1000}k`, values: [median(r.changeCpuMs)] })),
    log: true,
  });
  console.log(`wrote ${base}.json`);
}

/** One plot of earlier runs' medians, a series per run (its label). */
function report(files: readonly string[]): void {
  const runs = files.map((f) => JSON.parse(readFileSync(f, 'utf8')) as { label: string; rows: SizeResult[] });
  const sizes = [...new Set(runs.flatMap((r) => r.rows.map((x) => x.services)))].sort((a, b) => a - b);
  const base = join(OUT, 'engine-sync-report');
  writeChart(base, {
    title: "The engine's share of a one-endpoint change (median CPU ms, log scale)",
    yLabel: 'CPU ms',
    series: runs.map((r) => r.label),
    groups: sizes.map((n) => ({
      label: `${n / 1000}k Services`,
      values: runs.map((r) => {
        const row = r.rows.find((x) => x.services === n);
        return row ? median(row.changeCpuMs) : null;
      }),
    })),
    log: true,
  });
  console.log(`wrote ${base}.png`);
}

if (process.argv.includes('--report')) {
  report(arg('--report', '').split(','));
} else if (process.argv.includes('--child')) {
  printResult(child(Number(arg('--child', '0')), Number(arg('--changes', '20'))));
} else main();
