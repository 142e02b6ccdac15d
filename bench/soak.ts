// Soak (a benchmark, and with --check a CI gate): the real proxy on both
// nodes of the namespace cluster holds --services Services while
// --changes-per-s changes a second churn them (an EndpointSlice moved to
// another pod; every tenth change deletes and re-creates a whole Service),
// and four stable Services are probed with fresh TCP connections at
// --probes-per-s in all (pod -> ClusterIP on each node, outside -> NodePort
// on each node). Every --sample-s it records per proxy:
//   * RSS (/proc/<pid>/status VmRSS) and open file descriptors (/proc/<pid>/fd),
//   * the event-loop delay p99 and the longest stall of the window since the
//     last sample: the proxy's own nodejs_eventloop_lag_{p99,max}_seconds
//     (prom-client measures them with perf_hooks.monitorEventLoopDelay and
//     resets them at every scrape; this is the only scraper),
//   * probes sent and failed so far, changes made.
// At the end: the series as a table, bench/out/soak-<mode>.{json,svg,png}, and
// the verdict against the targets: 0 failed probes; RSS after the warm-up
// growing < 2 MiB per 10 minutes (least-squares slope); fds flat (median of the
// last third after warm-up at most 2 above that of the first third); every window's event-loop p99 < 50 ms.
// --check exits 1 when a failed probe or a growing fd count is seen, and when
// the RSS slope misses its target in runs of 10 minutes or more (shorter runs
// print it, but it is noise). The event-loop p99 is judged only with
// --check-loop: on this shared 2-core machine it follows the machine's load
// (bench/README.md), and CI must not go red on a neighbour's build.
//
//   node dist/bench/soak.js [--minutes 30] [--services 1000] [--changes-per-s 10] [--probes-per-s 200]
//                           [--mode iptables] [--warmup-min 2] [--sample-s 10] [--check | --check-loop]
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { E2EEnv } from '../test/netns/e2e.js';
import { endpointSlice, service, webPorts, type PortSpec } from '../test/netns/fixtures.js';
import { describeProbes, Prober, type ProbeStats } from '../test/netns/prober.js';
import type { E2EMode } from '../test/netns/proxy.js';
import { REPO_ROOT } from '../test/netns/spawn.js';
import type { KubeObject } from '../test/netns/kube.js';
import { loadNote, memoryOf } from './lib/cluster.js';
import { writeLinePanels } from './lib/chart.js';

const arg = (name: string, def: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : def;
};
const MINUTES = Number(arg('minutes', '30'));
const SERVICES = Number(arg('services', '1000'));
const CHANGES_PER_S = Number(arg('changes-per-s', '10'));
const PROBES_PER_S = Number(arg('probes-per-s', '200'));
const MODE = arg('mode', 'iptables') as E2EMode;
const WARMUP_MIN = Number(arg('warmup-min', String(Math.min(2, MINUTES / 3))));
const SAMPLE_S = Number(arg('sample-s', '10'));
const CHECK = process.argv.includes('--check') || process.argv.includes('--check-loop');
const CHECK_LOOP = process.argv.includes('--check-loop');
const OUT = join(REPO_ROOT, 'bench', 'out');

const TCP: PortSpec[] = [{ name: 'tcp', port: 80, targetPort: 8080, protocol: 'TCP' }];
const STABLE = [
  { ip: '10.96.250.1', nodePort: 30901 },
  { ip: '10.96.250.2', nodePort: 30911 },
  { ip: '10.96.250.3', nodePort: 30921 },
  { ip: '10.96.250.4', nodePort: 30931 },
];
/** Churned Services: 10.96.(100 + i / 250).(1 + i % 250). */
const churnIP = (i: number) => `10.96.${100 + Math.floor(i / 250)}.${1 + (i % 250)}`;

interface Sample {
  readonly t: number; // seconds since the start of the churn
  readonly node: string;
  readonly rssMiB: number;
  readonly fds: number;
  readonly loopP99Ms: number;
  /** The longest single stall of the window (issue 23 item 5: none over 100 ms). */
  readonly loopMaxMs: number;
  readonly probesSent: number;
  readonly probesFailed: number;
  readonly changes: number;
}

async function main(): Promise<void> {
  console.log(
    `soak: ${MODE}, ${SERVICES} Services, ${CHANGES_PER_S} changes/s, ${PROBES_PER_S} probes/s, ${MINUTES} min (${loadNote()})`,
  );
  const env = await E2EEnv.start(MODE);
  let stopping = false;
  const probers: Prober[] = [];
  try {
    const pods = env.cluster.pods;
    const stable = STABLE.flatMap((s, i) => [
      service({ name: `stable-${i}`, clusterIP: s.ip, type: 'NodePort', ports: webPorts(s.nodePort) }),
      endpointSlice(
        `stable-${i}`,
        [{ pod: pods[i % pods.length]! }, { pod: pods[(i + 1) % pods.length]! }],
        webPorts(),
      ),
    ]);
    const churn = Array.from({ length: SERVICES - STABLE.length }, (_, i) => churnObjects(env, i, 0)).flat();
    const t0 = Date.now();
    await env.cp.createMany([...stable, ...churn]);
    const last = churnIP(SERVICES - STABLE.length - 1);
    await env.waitReachable('node1-a', 'tcp', last, 80, {}, 120_000);
    await env.waitReachable('node2-a', 'tcp', last, 80, {}, 120_000);
    console.log(`soak: ${SERVICES} Services programmed on both nodes in ${Date.now() - t0} ms`);

    const each = Math.round((1000 * 4) / PROBES_PER_S);
    const n1 = env.cluster.node('node1').ip;
    const n2 = env.cluster.node('node2').ip;
    const targets: Array<[string, string, number]> = [
      ['node1-a', STABLE[0]!.ip, 80],
      ['node2-a', STABLE[1]!.ip, 80],
      ['ext', n1, STABLE[2]!.nodePort],
      ['ext', n2, STABLE[3]!.nodePort],
    ];
    for (const [from, host, port] of targets)
      probers.push(await Prober.start(env.cluster, from, host, port, { intervalMs: each, timeoutMs: 2000 }));

    let changes = 0;
    let changeErrors = 0;
    const generation = new Map<number, number>();
    const churnOne = async (): Promise<void> => {
      const i = Math.floor(Math.random() * (SERVICES - STABLE.length));
      const g = (generation.get(i) ?? 0) + 1;
      generation.set(i, g);
      const [svc, slice] = churnObjects(env, i, g);
      if (g % 10 === 0) {
        await env.kube.remove('Service', svc!.metadata.name, svc!.metadata.namespace);
        await env.kube.apply(svc!);
      } else {
        await env.kube.apply(slice!);
      }
      changes++;
    };
    let inflight = 0;
    const ticker = setInterval(() => {
      if (stopping || inflight >= 8) return;
      inflight++;
      churnOne()
        .catch(() => changeErrors++)
        .finally(() => inflight--);
    }, 1000 / CHANGES_PER_S);

    const samples: Sample[] = [];
    const start = Date.now();
    const end = start + MINUTES * 60_000;
    while (Date.now() < end) {
      await sleep(Math.min(SAMPLE_S * 1000, end - Date.now()));
      const stats = await Promise.all(probers.map((p) => p.stats()));
      const sent = stats.reduce((n, s) => n + s.sent, 0);
      const failed = stats.reduce((n, s) => n + s.failed, 0);
      for (const node of ['node1', 'node2']) {
        const pid = env.proxy(node).pid;
        const loop = await loopDelayMs(env, node);
        const s: Sample = {
          t: Math.round((Date.now() - start) / 1000),
          node,
          rssMiB: memoryOf(pid).rssMiB,
          fds: await settledFds(pid),
          loopP99Ms: loop.p99,
          loopMaxMs: loop.max,
          probesSent: sent,
          probesFailed: failed,
          changes,
        };
        samples.push(s);
        console.log(
          `t=${String(s.t).padStart(5)}s ${node} rss ${s.rssMiB.toFixed(1)} MiB  fds ${s.fds}  loop p99 ${s.loopP99Ms.toFixed(1)} ms max ${s.loopMaxMs.toFixed(0)} ms  ` +
            `probes ${sent} (${failed} failed)  changes ${changes}`,
        );
      }
    }
    stopping = true;
    clearInterval(ticker);
    while (inflight > 0) await sleep(50);
    const final = await Promise.all(probers.splice(0).map((p) => p.stop()));
    const ok = report(samples, final, changes, changeErrors);
    if (CHECK && !ok) process.exitCode = 1;
  } finally {
    stopping = true;
    await Promise.all(probers.map((p) => p.stop().catch(() => null)));
    await env.dispose();
  }
}

/** A churned Service and its slice at generation g (the slice's endpoint moves from pod to pod with g). */
function churnObjects(env: E2EEnv, i: number, g: number): KubeObject[] {
  const pods = env.cluster.pods;
  return [
    service({ name: `churn-${i}`, clusterIP: churnIP(i), ports: TCP }),
    endpointSlice(`churn-${i}`, [{ pod: pods[(i + g) % pods.length]! }], TCP),
  ];
}

/**
 * The proxy's open fds without the pipes of a sync in flight: the fewest of ten reads 100 ms apart. A sync
 * holds a few pipes to iptables-restore or nft for its length, and at 10 changes/s under load one is often
 * running when a sample is taken (a 3-minute CI soak saw 27 -> 35 from that alone); a leaked fd stays in
 * every read.
 */
async function settledFds(pid: number): Promise<number> {
  let fewest = Infinity;
  for (let i = 0; i < 10; i++) {
    if (i > 0) await sleep(100);
    fewest = Math.min(fewest, readdirSync(`/proc/${pid}/fd`).length);
  }
  return fewest;
}

async function loopDelayMs(env: E2EEnv, node: string): Promise<{ p99: number; max: number }> {
  const r = await (await env.cluster.agent(node)).http('http://127.0.0.1:10249/metrics', 5000);
  const gauge = (name: string) => {
    const m = new RegExp(`^${name} (\\S+)`, 'm').exec(r.body ?? '');
    return m ? Number(m[1]) * 1000 : NaN;
  };
  return { p99: gauge('nodejs_eventloop_lag_p99_seconds'), max: gauge('nodejs_eventloop_lag_max_seconds') };
}

function med(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

/** Least-squares slope of y over x. */
function slope(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

function report(samples: readonly Sample[], probes: readonly ProbeStats[], changes: number, errors: number): boolean {
  mkdirSync(OUT, { recursive: true });
  const base = join(OUT, `soak-${MODE}`);
  const failed = probes.reduce((n, s) => n + s.failed, 0);
  const sent = probes.reduce((n, s) => n + s.sent, 0);
  const lines = [
    `soak ${MODE}: ${MINUTES} min, ${SERVICES} Services, ${changes} changes (${errors} API errors), ${loadNote()}`,
    `probes: ${sent} sent, ${failed} failed`,
    ...probes.map((s) => `  ${describeProbes(s)}`),
  ];
  let ok = failed === 0;
  let loopMissed = false;
  for (const node of ['node1', 'node2']) {
    const all = samples.filter((s) => s.node === node);
    const warm = all.filter((s) => s.t >= WARMUP_MIN * 60);
    const use = warm.length >= 2 ? warm : all;
    const rssPer10 = slope(
      use.map((s) => s.t),
      use.map((s) => s.rssMiB),
    );
    const fds = use.map((s) => s.fds);
    const p99s = all.map((s) => s.loopP99Ms).filter((v) => Number.isFinite(v));
    const maxP99 = Math.max(...p99s);
    const medP99 = med(p99s);
    const maxes = all.map((s) => s.loopMaxMs).filter((v) => Number.isFinite(v));
    const over100 = maxes.filter((v) => v > 100).length;
    const growth = rssPer10 * 600;
    // A sync in flight holds a few transient pipes (iptables-restore, nft): compare the medians of the
    // first and last thirds after the warm-up rather than single samples.
    const third = Math.max(1, Math.floor(fds.length / 3));
    const fdTrend = med(fds.slice(-third)) - med(fds.slice(0, third));
    lines.push(
      `${node}: RSS ${use[0]?.rssMiB.toFixed(1)} -> ${use[use.length - 1]?.rssMiB.toFixed(1)} MiB after warm-up, ` +
        `slope ${growth.toFixed(2)} MiB/10 min (target < 2); fds ${Math.min(...fds)}..${Math.max(...fds)}, ` +
        `median of the last third - first third ${fdTrend} (target <= 2); ` +
        `event-loop p99 per ${SAMPLE_S}-s window: median ${medP99.toFixed(1)} ms, max ${maxP99.toFixed(1)} ms (target < 50); ` +
        `longest stall ${Math.max(...maxes).toFixed(0)} ms, ${over100} of ${maxes.length} windows with one over 100 ms`,
    );
    if (MINUTES >= 10 && growth >= 2) ok = false;
    if (fdTrend > 2) ok = false;
    if (!(maxP99 < 50)) {
      loopMissed = true;
      if (CHECK_LOOP) ok = false;
    }
  }
  lines.push(
    `verdict: ${ok ? 'passed' : 'FAILED'}${loopMissed ? ` (event-loop p99 target missed${CHECK_LOOP ? '' : ', not judged without --check-loop'})` : ''}`,
  );
  for (const l of lines) console.log(l);
  writeFileSync(
    `${base}.json`,
    JSON.stringify({ mode: MODE, minutes: MINUTES, samples, probes, summary: lines }, null, 1),
  );
  const series = (node: string, pick: (s: Sample) => number) =>
    samples.filter((s) => s.node === node).map((s) => [s.t / 60, pick(s)] as const);
  const png = writeLinePanels(base, {
    title: `Soak, ${MODE} mode: ${SERVICES} Services, ${CHANGES_PER_S} changes/s, ${PROBES_PER_S} probes/s`,
    xLabel: 'minutes',
    panels: [
      { yLabel: 'RSS MiB', series: ['node1', 'node2'].map((n) => ({ name: n, points: series(n, (s) => s.rssMiB) })) },
      { yLabel: 'open fds', series: ['node1', 'node2'].map((n) => ({ name: n, points: series(n, (s) => s.fds) })) },
      {
        yLabel: 'loop p99 ms',
        series: ['node1', 'node2'].map((n) => ({ name: n, points: series(n, (s) => s.loopP99Ms) })),
      },
      {
        yLabel: 'longest stall ms',
        series: ['node1', 'node2'].map((n) => ({ name: n, points: series(n, (s) => s.loopMaxMs) })),
      },
      {
        yLabel: 'failed probes',
        series: [{ name: 'all probers', points: series('node1', (s) => s.probesFailed) }],
      },
    ],
  });
  console.log(`wrote ${base}.json${png ? ` and ${png}` : ''}`);
  return ok;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
