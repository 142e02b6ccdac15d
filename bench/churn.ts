// Benchmark (never a test): network programming latency under churn, with the
// REAL proxy (bin/kube-proxy-ts, default flags) against the test API server,
// both in a fresh network namespace. N Services x 5 endpoints (default 10k);
// after the first sync, endpoint changes at --rate per second for --seconds,
// each replacing one endpoint of one Service with a fresh address and
// stamping its slice's endpoints.kubernetes.io/last-change-trigger-time.
// Reported, per mode:
//   * p50 / p99 of kubeproxy_network_programming_duration_seconds, read from
//     the proxy's /metrics (interpolated within buckets, as histogram_quantile);
//   * p50 / p99 of the time from the trigger time until the new address is in
//     a rule the kernel committed (bench/lib/nlmon: nf_tables notifications),
//     exact, per change (modes whose rules live in nf_tables only); and how
//     many syncs the proxy ran meanwhile;
//   * the proxy's event loop per 10-s window (bench/lib/loopwatch.ts): the
//     p99 and the longest stall, through the cold sync and through the churn,
//     and how long /healthz and /metrics took to answer meanwhile.
// Prints two tables and writes bench/out/churn.{json,svg,png} and
// bench/out/churn-loop.{svg,png}.
//
//   node --import tsx bench/churn.ts [--services 10000] [--rate 10] [--seconds 60] [--modes iptables,nftables,ebpf]
//     [--proxy-args '--v 2'] [--log DIR] [--node-args '--max-semi-space-size=4 --trace-gc']
// --proxy-args: more flags for the proxy (split on spaces); --log: write each
// mode's proxy output to DIR/churn-<mode>.log (to read its per-sync timings);
// --node-args: run the proxy as `node <these> bin/kube-proxy-ts`, which drops
// the binary's own V8 flags (give them again if wanted).
import { createWriteStream, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../test/netns/spawn.js';
import { writeChart, writeLinePanels } from './lib/chart.js';
import {
  arg,
  BenchCluster,
  buildDist,
  cpuSecondsOf,
  histogramQuantile,
  loadNote,
  percentile,
  runBench,
} from './lib/cluster.js';
import { describeLoop, LoopWatch, type LoopSummary, type LoopWindow } from './lib/loopwatch.js';

const SERVICES = Number(arg('services', '10000'));
const RATE = Number(arg('rate', '10'));
const SECONDS = Number(arg('seconds', '60'));
const MODES = arg('modes', 'iptables,nftables').split(',');
const PROXY_ARGS = arg('proxy-args', '')
  .split(' ')
  .filter((a) => a !== '');
const LOG_DIR = arg('log', '');
const NODE_ARGS = arg('node-args', '')
  .split(' ')
  .filter((a) => a !== '');
const OUT = join(REPO_ROOT, 'bench', 'out');
const METRIC = 'kubeproxy_network_programming_duration_seconds';
/** Modes whose rules the kernel monitor (nf_tables notifications) sees. */
const NF_TABLES_MODES = new Set(['iptables', 'nftables']);

interface Row {
  mode: string;
  changes: number;
  applied: number;
  metric: { count: number; p50: number; p99: number };
  kernel: { p50: number; p99: number; max: number };
  syncs: number;
  proxyCpuS: number;
  load: string;
  /** Seconds from the proxy's start until /healthz answered 200 (its first sync done). */
  coldSyncS: number;
  loop: { cold: LoopSummary; churn: LoopSummary; windows: LoopWindow[] };
}

/** A counter's value for the IPv4 family (dual-stack modes sync both families each time). */
function counter(text: string, name: string): number {
  const m = new RegExp(`^${name}\\{[^}]*ip_family="IPv4"[^}]*\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

async function runMode(mode: string): Promise<Row> {
  const c = await BenchCluster.start({ services: SERVICES, endpoints: 5 });
  const watch = new LoopWatch(c.ns);
  try {
    watch.phase('cold');
    const started = Date.now();
    const proxy = c.startProxy(mode, PROXY_ARGS, {}, NODE_ARGS.length > 0 ? NODE_ARGS : undefined);
    if (LOG_DIR !== '') {
      mkdirSync(LOG_DIR, { recursive: true });
      const log = createWriteStream(join(LOG_DIR, `churn-${mode}.log`));
      proxy.child.stderr?.pipe(log);
      proxy.child.stdout?.pipe(log);
    }
    const healthyAt = await c.waitHealthy();
    watch.phase('quiet');
    const mon = NF_TABLES_MODES.has(mode) ? await c.monitor() : null;
    await new Promise((r) => setTimeout(r, 5000));
    const before = String((await c.command('metrics'))['text']);
    const cpu0 = cpuSecondsOf(c.proxyPid);
    watch.phase('churn');
    const res = await c.command('churn', { rate: RATE, seconds: SECONDS, services: SERVICES });
    const changes = res['changes'] as Array<{ ip: string; at: number }>;
    const lat = mon
      ? await Promise.all(
          changes.map((ch) =>
            Promise.race([
              mon.expect(ch.ip, ch.at).then((t) => (t - ch.at) / 1000),
              new Promise<number>((r) => setTimeout(() => r(NaN), 30_000)),
            ]),
          ),
        )
      : [];
    await new Promise((r) => setTimeout(r, 2000));
    watch.phase('after');
    const proxyCpuS = cpuSecondsOf(c.proxyPid) - cpu0;
    const after = String((await c.command('metrics'))['text']);
    mon?.stop();
    // The window in progress closes at its own time; wait for it so the churn's last one is in.
    await new Promise((r) => setTimeout(r, 10_500));
    await watch.stop();
    const applied = lat.filter((x) => Number.isFinite(x));
    const syncsOf = (t: string): number => counter(t, 'kubeproxy_sync_proxy_rules_duration_seconds_count');
    // The histogram counts since start; the first sync's changes predate the tracker, so the churn is all of it.
    const q = (p: number) => histogramQuantile(after, METRIC, p);
    return {
      mode,
      changes: changes.length,
      applied: mon ? applied.length : NaN,
      metric: { count: q(0.5).count, p50: q(0.5).value, p99: q(0.99).value },
      kernel: { p50: percentile(applied, 50), p99: percentile(applied, 99), max: Math.max(...applied) },
      syncs: syncsOf(after) - syncsOf(before),
      proxyCpuS,
      load: loadNote(),
      coldSyncS: (healthyAt - started) / 1000,
      loop: { cold: watch.summary('cold'), churn: watch.summary('churn'), windows: watch.windows },
    };
  } finally {
    await watch.stop();
    await c.dispose();
  }
}

async function main(): Promise<void> {
  buildDist();
  mkdirSync(OUT, { recursive: true });
  const rows: Row[] = [];
  for (const mode of MODES) {
    const r = await runMode(mode);
    rows.push(r);
    console.log(JSON.stringify({ ...r, loop: { cold: r.loop.cold, churn: r.loop.churn } }));
    console.log(`${mode} ${describeLoop(r.loop.cold)}\n${mode} ${describeLoop(r.loop.churn)}`);
  }
  console.log(
    `\n${SERVICES} Services x 5 endpoints, ${RATE} endpoint changes/s for ${SECONDS} s, default flags (minSyncPeriod 1 s)`,
  );
  console.log(
    '| mode | changes applied | metric p50 (s) | metric p99 (s) | kernel p50 (s) | kernel p99 (s) | kernel max (s) | syncs | proxy CPU (s) |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    console.log(
      `| ${r.mode} | ${Number.isNaN(r.applied) ? 'n/a' : r.applied}/${r.changes} | ${r.metric.p50.toFixed(2)} | ${r.metric.p99.toFixed(2)} | ${r.kernel.p50.toFixed(2)} | ${r.kernel.p99.toFixed(2)} | ${r.kernel.max.toFixed(2)} | ${r.syncs} | ${r.proxyCpuS.toFixed(1)} |`,
    );
  }
  console.log(
    "\nEvent loop per 10-s window (the proxy's nodejs_eventloop_lag_*), cold sync and churn; /healthz probed every 200 ms",
  );
  console.log(
    '| mode | cold sync (s) | cold: p99 worst window (ms) | cold: longest stall (ms) | churn: p99 median / worst window (ms) | churn: longest stall (ms) | windows over 100 ms (cold + churn) | /healthz slowest (ms) | /metrics slowest (ms) |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const { cold, churn } = r.loop;
    console.log(
      `| ${r.mode} | ${r.coldSyncS.toFixed(1)} | ${cold.p99MaxMs.toFixed(0)} | ${cold.maxMs.toFixed(0)} | ` +
        `${churn.p99MedianMs.toFixed(0)} / ${churn.p99MaxMs.toFixed(0)} | ${churn.maxMs.toFixed(0)} | ` +
        `${cold.windowsOver100} + ${churn.windowsOver100} | ${Math.max(cold.healthMaxMs, churn.healthMaxMs)} | ` +
        `${Math.max(cold.metricsMaxMs, churn.metricsMaxMs)} |`,
    );
  }
  writeFileSync(
    join(OUT, 'churn.json'),
    JSON.stringify({ services: SERVICES, rate: RATE, seconds: SECONDS, rows }, null, 2),
  );
  const png = writeChart(join(OUT, 'churn'), {
    title: `Network programming latency, ${SERVICES} Services, ${RATE} changes/s`,
    yLabel: 'seconds',
    series: ['metric p50', 'metric p99', 'kernel p50', 'kernel p99'],
    groups: rows.map((r) => ({ label: r.mode, values: [r.metric.p50, r.metric.p99, r.kernel.p50, r.kernel.p99] })),
  });
  console.log(png ? `wrote ${png}` : 'wrote churn.svg (no PNG converter)');
  const series = (pick: (w: LoopWindow) => number) =>
    rows.map((r) => ({ name: r.mode, points: r.loop.windows.map((w) => [w.t, pick(w)] as const) }));
  const loopPng = writeLinePanels(join(OUT, 'churn-loop'), {
    title: `Proxy event loop per 10-s window, ${SERVICES} Services: cold sync, then ${RATE} changes/s for ${SECONDS} s`,
    xLabel: 'seconds since the proxy started',
    panels: [
      { yLabel: 'longest stall ms', series: series((w) => w.loopMaxMs) },
      { yLabel: 'loop p99 ms', series: series((w) => w.loopP99Ms) },
      { yLabel: '/healthz slowest ms', series: series((w) => w.healthMaxMs) },
    ],
  });
  console.log(loopPng ? `wrote ${loopPng}` : 'wrote churn-loop.svg (no PNG converter)');
}

runBench(main);
