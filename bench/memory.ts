// Benchmark (never a test): memory of the REAL proxy process. For each mode
// and size it starts the test API server seeded with N Services x E endpoints
// (objects shaped like a real server's, managedFields included) and
// bin/kube-proxy-ts against it, both in a fresh network namespace, and reads
// /proc/<pid>/status of the proxy:
//   * RSS when /healthz first answers 200 (the first sync is in the kernel),
//   * RSS after a few endpoint changes have been applied (steady state),
//   * VmHWM at the end: the peak RSS over start-up, first sync and changes;
//   * with --rest S: RSS after S quiet seconds more, when V8's memory reducer
//     has given back the heap the syncs grew (it waits for the process to go
//     quiet), and the lowest RSS seen meanwhile (sampled every second). A
//     periodic full sync (syncPeriod, 30 s by default) can fall inside.
// --sizes 0 measures the idle proxy: start-up plus an empty first sync.
// Prints a table (median of --runs) and writes bench/out/memory.{json,svg,png}.
//
//   node --import tsx bench/memory.ts [--sizes 1000,5000,10000] [--modes iptables,nftables]
//                                     [--endpoints 5] [--changes 5] [--runs 1] [--proxy-args "..."]
//                                     [--node-args "--max-semi-space-size=1"] [--rest 60]
//                                     [--env "MALLOC_ARENA_MAX=2 UV_THREADPOOL_SIZE=1"] [--tag NAME] [--no-build]
// Without --node-args the proxy runs as bin/kube-proxy-ts itself, with the V8
// flags of its #! line; --node-args runs `node <args> bin/kube-proxy-ts`.
// --env adds variables to the proxy's environment (glibc and libuv read theirs
// only at start, as a container's ENV sets them). --tag NAME writes
// memory-NAME.{json,svg,png} instead, so settings compared one by one keep
// their own results.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../test/netns/spawn.js';
import {
  arg,
  BenchCluster,
  buildDist,
  cpuSecondsOf,
  loadNote,
  median,
  memoryOf,
  type Memory,
  runBench,
} from './lib/cluster.js';
import { writeChart } from './lib/chart.js';

const SIZES = arg('sizes', '1000,5000,10000').split(',').map(Number);
const MODES = arg('modes', 'iptables,nftables').split(',');
const ENDPOINTS = Number(arg('endpoints', '5'));
const CHANGES = Number(arg('changes', '5'));
const RUNS = Number(arg('runs', '1'));
const PROXY_ARGS = arg('proxy-args', '').split(' ').filter(Boolean);
/** Node/V8 flags for the proxy process instead of those of bin/kube-proxy-ts's #! line (experiments). */
const NODE_ARGS = process.argv.includes('--node-args') ? arg('node-args', '').split(' ').filter(Boolean) : undefined;
const OUT = join(REPO_ROOT, 'bench', 'out');
/** Quiet seconds after the changes before the resting RSS is read (0: not measured). */
const REST_S = Number(arg('rest', '0'));
/** Extra environment of the proxy process, `K=V` pairs separated by spaces. */
const ENV: NodeJS.ProcessEnv = Object.fromEntries(
  arg('env', '')
    .split(' ')
    .filter(Boolean)
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);
const TAG = arg('tag', '');
const NAME = TAG ? `memory-${TAG}` : 'memory';

/** The proxy's thread count (V8's platform workers, libuv's pool once used, ...). */
function threadsOf(pid: number): number {
  return Number(/^Threads:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
}

interface Sample {
  mode: string;
  size: number;
  firstSyncS: number;
  /** CPU seconds of the proxy up to its first sync (contention-robust). */
  firstSyncCpuS: number;
  /** CPU seconds from the first sync to the end: the endpoint changes' partial syncs (and idle time). */
  changesCpuS: number;
  atFirstSync: Memory;
  steadyRssMiB: number;
  peakMiB: number;
  /** RSS after --rest quiet seconds, and the lowest seen meanwhile (NaN without --rest). */
  restRssMiB: number;
  restMinRssMiB: number;
  changesApplied: number;
  /** Threads of the proxy after the changes. */
  threads: number;
  load: string;
}

async function once(mode: string, size: number): Promise<Sample> {
  const c = await BenchCluster.start({ services: size, endpoints: ENDPOINTS });
  try {
    const t0 = Date.now();
    c.startProxy(mode, PROXY_ARGS, ENV, NODE_ARGS);
    const healthyAt = await c.waitHealthy();
    const atFirstSync = memoryOf(c.proxyPid);
    const firstSyncCpuS = cpuSecondsOf(c.proxyPid);
    const mon = await c.monitor();
    let applied = 0;
    // 0 Services: the idle proxy (start-up cost plus an empty first sync); nothing to change.
    const changes = size > 0 ? CHANGES : 0;
    for (let k = 0; k < changes; k++) {
      const r = await c.command('change', { service: (k * 997) % size });
      const seen = await Promise.race([
        mon.expect(String(r['ip']), Number(r['at'])),
        new Promise<null>((res) => setTimeout(() => res(null), 30_000)),
      ]);
      if (seen !== null) applied++;
      await new Promise((res) => setTimeout(res, 1500));
    }
    mon.stop();
    await new Promise((res) => setTimeout(res, 2000));
    const end = memoryOf(c.proxyPid);
    const changesCpuS = cpuSecondsOf(c.proxyPid) - firstSyncCpuS;
    const threads = threadsOf(c.proxyPid);
    let restRssMiB = NaN;
    let restMinRssMiB = NaN;
    for (let t = 0; t < REST_S; t++) {
      await new Promise((res) => setTimeout(res, 1000));
      restRssMiB = memoryOf(c.proxyPid).rssMiB;
      restMinRssMiB = Number.isNaN(restMinRssMiB) ? restRssMiB : Math.min(restMinRssMiB, restRssMiB);
    }
    return {
      mode,
      size,
      firstSyncS: (healthyAt - t0) / 1000,
      firstSyncCpuS,
      changesCpuS,
      atFirstSync,
      steadyRssMiB: end.rssMiB,
      peakMiB: end.hwmMiB,
      restRssMiB,
      restMinRssMiB,
      changesApplied: applied,
      threads,
      load: loadNote(),
    };
  } finally {
    await c.dispose();
  }
}

async function main(): Promise<void> {
  // --no-build: several runs side by side must not rewrite dist/ under each other's proxies.
  if (!process.argv.includes('--no-build')) buildDist();
  mkdirSync(OUT, { recursive: true });
  const samples: Sample[] = [];
  for (const mode of MODES) {
    for (const size of SIZES) {
      for (let r = 0; r < RUNS; r++) {
        const s = await once(mode, size);
        samples.push(s);
        console.log(
          `${mode} ${size}: first sync ${s.firstSyncS.toFixed(1)} s (${s.firstSyncCpuS.toFixed(1)} s CPU), RSS ${s.atFirstSync.rssMiB.toFixed(0)} MiB ` +
            `(HWM ${s.atFirstSync.hwmMiB.toFixed(0)}), steady ${s.steadyRssMiB.toFixed(0)} MiB, ` +
            `peak ${s.peakMiB.toFixed(0)} MiB, ${REST_S > 0 ? `after ${REST_S} s at rest ${s.restRssMiB.toFixed(0)} MiB (lowest ${s.restMinRssMiB.toFixed(0)}), ` : ''}changes ${s.changesCpuS.toFixed(2)} s CPU, ${s.threads} threads, applied ${s.changesApplied}/${CHANGES} (${s.load})`,
        );
      }
    }
  }
  const rows = MODES.flatMap((mode) =>
    SIZES.map((size) => {
      const ss = samples.filter((s) => s.mode === mode && s.size === size);
      return {
        mode,
        size,
        firstSyncS: median(ss.map((s) => s.firstSyncS)),
        firstSyncCpuS: median(ss.map((s) => s.firstSyncCpuS)),
        changesCpuS: median(ss.map((s) => s.changesCpuS)),
        threads: median(ss.map((s) => s.threads)),
        rssAtFirstSyncMiB: median(ss.map((s) => s.atFirstSync.rssMiB)),
        steadyRssMiB: median(ss.map((s) => s.steadyRssMiB)),
        peakMiB: median(ss.map((s) => s.peakMiB)),
        restRssMiB: median(ss.map((s) => s.restRssMiB)),
        restMinRssMiB: median(ss.map((s) => s.restMinRssMiB)),
      };
    }),
  );
  console.log(
    `\nmedian of ${RUNS} run(s), ${ENDPOINTS} endpoints per Service, ${CHANGES} endpoint changes after the first sync` +
      (NODE_ARGS ? `; node ${NODE_ARGS.join(' ')}` : '; the #! line') +
      (Object.keys(ENV).length ? `; env ${arg('env', '')}` : ''),
  );
  console.log(
    '| mode | Services | first sync (s) | its CPU (s) | changes CPU (s) | threads | RSS after first sync (MiB) | RSS steady (MiB) | peak VmHWM (MiB) |' +
      (REST_S > 0 ? ` RSS after ${REST_S} s at rest (lowest) (MiB) |` : ''),
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|' + (REST_S > 0 ? '---:|' : ''));
  for (const r of rows) {
    console.log(
      `| ${r.mode} | ${r.size} | ${r.firstSyncS.toFixed(1)} | ${r.firstSyncCpuS.toFixed(2)} | ${r.changesCpuS.toFixed(2)} | ${r.threads} | ${r.rssAtFirstSyncMiB.toFixed(0)} | ${r.steadyRssMiB.toFixed(0)} | ${r.peakMiB.toFixed(0)} |` +
        (REST_S > 0 ? ` ${r.restRssMiB.toFixed(0)} (${r.restMinRssMiB.toFixed(0)}) |` : ''),
    );
  }
  writeFileSync(join(OUT, `${NAME}.json`), JSON.stringify({ samples, rows }, null, 2));
  const png = writeChart(join(OUT, NAME), {
    title: `kube-proxy-ts memory (real process, ${ENDPOINTS} endpoints per Service)${TAG ? ` - ${TAG}` : ''}`,
    yLabel: 'MiB',
    series: MODES.flatMap((m) => [
      `${m} RSS after first sync`,
      `${m} peak (VmHWM)`,
      ...(REST_S > 0 ? [`${m} RSS after ${REST_S} s at rest`] : []),
    ]),
    groups: SIZES.map((size) => ({
      label: `${size} Services`,
      values: MODES.flatMap((m) => {
        const r = rows.find((x) => x.mode === m && x.size === size)!;
        return [r.rssAtFirstSyncMiB, r.peakMiB, ...(REST_S > 0 ? [r.restRssMiB] : [])];
      }),
    })),
  });
  console.log(png ? `wrote ${png}` : `wrote ${NAME}.svg (no PNG converter)`);
}

runBench(main);
