// Benchmark (never a test): the REAL proxy process at 30k and 100k Services
// x 5 endpoints, per kernel mode (iptables, nftables, ebpf; the ipvs mode
// lives in a QEMU guest, bench/ipvs-sync.ts, and is not run here). For each
// mode and size, a fresh node namespace holds the test API server
// (bench/lib/apihost.ts, objects shaped like a real server's) and
// bin/kube-proxy-ts against it; a pod and a server namespace hang off the
// node (bench/lib/podnet.ts) so that connections go through ClusterIPs
// exactly as a pod's would. Three probe Services (the first, the middle and
// the last one created) have their endpoints on the server. Measured:
//   * cold sync: from spawning the proxy until /healthz answers 200 (every
//     Service in the kernel), with the proxy's CPU seconds to then and what
//     its metrics say the full syncs took (the kernel-writing phase);
//   * first answer: from the spawn until the first of the probe Services
//     answers a TCP connection from the pod (polled from before the spawn,
//     every ~10 ms), and the last of them;
//   * one-endpoint change: endpoint 0 of the middle probe Service is
//     replaced by another server address; from the API write (its trigger
//     time) until a connection through the ClusterIP is answered by the new
//     address (a few ms of polling granularity), and, in iptables and
//     nftables mode, until the address is in a committed nf_tables rule
//     (bench/lib/nlmon.c); median and max of --changes made after the
//     proxy was left alone for 5 s, and apart, one change made the moment
//     it is healthy (what the work after a cold start makes a change wait);
//   * RSS of the proxy when healthy, after the changes (steady), and VmHWM
//     (peak); the API host's seeding time and RSS, to tell the harness's
//     share apart.
// A cold sync that has not finished after --cap seconds is reported as
// such, with what was measured up to then. ebpf mode runs with a bpf
// filesystem of its own (test/ebpf/bpfnode.ts). Prints a table and writes
// bench/out/scale.{json,svg,png} (times), scale-rss.{svg,png} and
// scale-change.{svg,png} (the one-endpoint change); --tag
// NAME writes scale-NAME.* instead; --log prints each proxy's log. --api-pace
// N: the API host streams a watch-list's initial events N at a time, reading
// between batches as a real server streams from its cache (default 500; 0
// writes them in one go, which at 100k holds the API host for seconds before
// the proxy can read).
//
//   node --import tsx bench/scale.ts [--sizes 30000,100000] [--modes iptables,nftables,ebpf]
//                                    [--endpoints 5] [--changes 5] [--cap 600] [--api-pace 500]
//                                    [--tag NAME] [--no-build] [--log] [--proxy-flags '--early-sync-after=0']
//                                    [--node-args '--max-semi-space-size=4 --cpu-prof --cpu-prof-dir=/tmp/p']
// --node-args runs the proxy as `node <these> bin/kube-proxy-ts` (its `#!` line's V8 flags dropped, its
// MALLOC_ARENA_MAX=2 kept): for experiments with V8 flags and for CPU profiles (written when the proxy
// exits on the bench's SIGTERM).
//   node --import tsx bench/scale.ts --report bench/out/scale.json,bench/out/scale-NAME.json [--tag NAME]
// --report prints the table and draws the plots of samples earlier runs
// wrote, a later file's sample replacing an earlier one's of the same mode
// and size.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../test/netns/spawn.js';
import { BpfNode } from '../test/ebpf/bpfnode.js';
import { arg, BenchCluster, buildDist, cpuSecondsOf, loadNote, median, memoryOf, runBench } from './lib/cluster.js';
import { writeChart } from './lib/chart.js';
import { clusterIP } from './lib/objects.js';
import { PodNet, serverIP } from './lib/podnet.js';

const SIZES = arg('sizes', '30000,100000').split(',').map(Number);
const MODES = arg('modes', 'iptables,nftables,ebpf').split(',');
const ENDPOINTS = Number(arg('endpoints', '5'));
const CHANGES = Number(arg('changes', '5'));
const CAP_S = Number(arg('cap', '600'));
/** The API host streams a watch-list's initial events this many at a time (0: in one go). */
const PACE = Number(arg('api-pace', '500'));
/** More flags for the proxy, space-separated (e.g. `--early-sync-after=0`, to compare with early syncs off). */
const PROXY_FLAGS = arg('proxy-flags', '').split(' ').filter(Boolean);
const NODE_ARGS = arg('node-args', '').split(' ').filter(Boolean);
/** --tag NAME writes scale-NAME.* instead, so that runs with other settings keep their own results. */
const NAME = arg('tag', '') ? `scale-${arg('tag', '')}` : 'scale';
const OUT = join(REPO_ROOT, 'bench', 'out');
/** A change not seen by then counts as not applied (NaN). */
const CHANGE_TIMEOUT_MS = 120_000;
/** Quiet time after the first change, before the measured ones. */
const SETTLE_MS = 5000;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Sample {
  mode: string;
  size: number;
  /** The API host: seconds to seed its store, its RSS then and its peak, its CPU seconds while the proxy started. */
  apiSeedS: number;
  apiRssMiB: number;
  apiPeakMiB: number;
  apiCpuS: number;
  /** NaN when the cold sync did not finish within --cap. */
  coldSyncS: number;
  coldSyncCpuS: number;
  /** Sum and count of the full syncs (kubeproxy_sync_full_proxy_rules_duration_seconds) when healthy. */
  fullSyncS: number;
  fullSyncs: number;
  /** Seconds from the spawn to the first and to the last probe Service answering (NaN: never). */
  firstAnswerS: number;
  lastAnswerS: number;
  /** A one-endpoint change made as soon as the proxy is healthy, ms until traffic sees it. */
  changeAfterStartMs: number;
  /** One-endpoint changes after SETTLE_MS, ms: seen by traffic, and in nf_tables (empty in ebpf mode). */
  changeMs: number[];
  kernelChangeMs: number[];
  rssHealthyMiB: number;
  steadyRssMiB: number;
  peakMiB: number;
  phases: Phases;
  load: string;
}

/** Seconds from the spawn, read from the proxy's log (--v 2); NaN when not logged. */
interface Phases {
  /** The healthz server listens: modules loaded, the datapath opened. */
  upS: number;
  /** The Service and EndpointSlice lists (or watch-list streams) are in. */
  servicesListedS: number;
  slicesListedS: number;
  /** The first IPv4 sync ended, and how long it took by its own clock. */
  firstSyncEndS: number;
  firstSyncS: number;
  /** The partial IPv4 syncs' own durations, ms (the changes' syncs among them). */
  partialSyncMs?: number[];
}

function phasesOf(log: string, t0: number): Phases {
  const lines = log
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        return {};
      }
    });
  const at = (pred: (m: Record<string, unknown>) => boolean): Record<string, unknown> | undefined => lines.find(pred);
  const since = (m: Record<string, unknown> | undefined): number =>
    m ? (Date.parse(String(m['time'])) - t0) / 1000 : NaN;
  const listed = (r: string) => at((m) => m['msg'] === 'source listed' && m['resource'] === r);
  const sync = at((m) => m['msg'] === 'SyncProxyRules complete' && m['ipFamily'] === 'IPv4');
  return {
    upS: since(at((m) => m['msg'] === 'healthz server listening')),
    servicesListedS: since(listed('services')),
    slicesListedS: since(listed('endpointslices')),
    firstSyncEndS: since(sync),
    firstSyncS: sync ? Number(sync['elapsed']) : NaN,
    partialSyncMs: lines
      .filter((m) => m['msg'] === 'SyncProxyRules complete' && m['ipFamily'] === 'IPv4' && m['partial'] === true)
      .map((m) => Number(m['elapsed']) * 1000),
  };
}

/** Sum and count of a histogram in Prometheus text. */
function histogram(text: string, name: string): { sum: number; count: number } {
  const one = (suffix: string): number =>
    [...text.matchAll(new RegExp(`^${name}_${suffix}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))].reduce(
      (a, m) => a + Number(m[1]),
      0,
    );
  return { sum: one('sum'), count: one('count') };
}

async function once(mode: string, size: number): Promise<Sample> {
  const probes = [...new Set([0, Math.floor(size / 2), size - 1])];
  const changed = probes[Math.floor(probes.length / 2)]!;
  const c = await BenchCluster.start({
    services: size,
    endpoints: ENDPOINTS,
    probes,
    probeIPs: Array.from({ length: ENDPOINTS }, (_, j) => serverIP(j + 1)),
    pace: PACE,
  });
  let net: PodNet | undefined;
  let bpf: BpfNode | undefined;
  try {
    const api = memoryOf(c.apiPid);
    net = await PodNet.start(c.ns);
    bpf = mode === 'ebpf' ? await BpfNode.start(c.ns) : undefined;
    const answers = new Map<string, number>();
    await net.pollFirst(
      probes.map((i) => clusterIP(i)),
      (ip, at) => answers.set(ip, at),
    );
    const apiCpu0 = cpuSecondsOf(c.apiPid);
    const t0 = Date.now();
    c.startProxy(
      mode,
      ['--v', '2', ...PROXY_FLAGS],
      NODE_ARGS.length ? { MALLOC_ARENA_MAX: '2' } : {},
      NODE_ARGS.length ? NODE_ARGS : undefined,
      bpf?.enter(),
    );
    let coldSyncS = NaN;
    try {
      coldSyncS = ((await c.waitHealthy(CAP_S * 1000)) - t0) / 1000;
    } catch (e) {
      if (c.proxy?.child.exitCode !== null) throw e;
      console.log(`${mode} ${size}: not healthy after ${CAP_S} s`);
    }
    const rssHealthyMiB = memoryOf(c.proxyPid).rssMiB;
    const coldSyncCpuS = cpuSecondsOf(c.proxyPid);
    const apiCpuS = cpuSecondsOf(c.apiPid) - apiCpu0;
    const full = histogram(
      String((await c.command('metrics'))['text']),
      'kubeproxy_sync_full_proxy_rules_duration_seconds',
    );
    const changeMs: number[] = [];
    const kernelChangeMs: number[] = [];
    let changeAfterStartMs = NaN;
    if (!Number.isNaN(coldSyncS)) {
      // The probes answer once their rules are in; give the last one a moment if the proxy reported healthy first.
      for (let t = 0; t < 100 && answers.size < probes.length; t++) await sleep(100);
      const mon = mode === 'ebpf' ? undefined : await c.monitor();
      const vip = clusterIP(changed);
      /** One change of endpoint 0 to server address k; [by traffic, in nf_tables] ms after the API write. */
      const change = async (k: number): Promise<[number, number]> => {
        const ip = serverIP(10 + k);
        const seen = net!.until(vip, ip);
        const r = await c.command('change', { service: changed, ip });
        const at = Number(r['at']);
        const inKernel = mon?.expect(ip, at);
        const timeout = sleep(CHANGE_TIMEOUT_MS).then(() => null);
        const s = await Promise.race([seen, timeout]);
        const kt = inKernel ? await Promise.race([inKernel, timeout]) : null;
        return [s ? s.at - at : NaN, kt === null ? NaN : kt - at];
      };
      // One change right away: what the work that follows a cold start (handover checks, a
      // second full sync) makes it wait. Then the proxy is left alone for SETTLE_MS.
      [changeAfterStartMs] = await change(0);
      await sleep(SETTLE_MS);
      for (let k = 1; k <= CHANGES; k++) {
        const [traffic, kernel] = await change(k);
        changeMs.push(traffic);
        if (mon) kernelChangeMs.push(kernel);
        await sleep(1500);
      }
      mon?.stop();
      await sleep(2000);
    }
    const end = memoryOf(c.proxyPid);
    const log = c.proxy!.log();
    if (process.argv.includes('--log')) console.log(log);
    const at = (ip: string): number => ((answers.get(ip) ?? NaN) - t0) / 1000;
    const times = probes.map((i) => at(clusterIP(i)));
    return {
      mode,
      size,
      apiSeedS: c.seedMs / 1000,
      apiRssMiB: api.rssMiB,
      apiPeakMiB: memoryOf(c.apiPid).hwmMiB,
      apiCpuS,
      coldSyncS,
      coldSyncCpuS,
      fullSyncS: full.sum,
      fullSyncs: full.count,
      firstAnswerS: times.every(Number.isNaN) ? NaN : Math.min(...times.filter((x) => !Number.isNaN(x))),
      lastAnswerS: times.some(Number.isNaN) ? NaN : Math.max(...times),
      changeAfterStartMs,
      changeMs,
      kernelChangeMs,
      rssHealthyMiB,
      steadyRssMiB: end.rssMiB,
      peakMiB: end.hwmMiB,
      phases: phasesOf(log, t0),
      load: loadNote(),
    };
  } finally {
    await c.dispose();
    net?.dispose();
    await bpf?.stop();
  }
}

const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '-');
const f0 = (x: number): string => (Number.isFinite(x) ? x.toFixed(0) : '-');
const msList = (xs: number[]): string => {
  const seen = xs.filter((x) => !Number.isNaN(x));
  const missed = xs.length - seen.length;
  const text = seen.length === 0 ? '' : `${f1(median(seen))} (max ${f1(Math.max(...seen))})`;
  const miss = missed > 0 ? `${missed} of ${xs.length} not seen in ${CHANGE_TIMEOUT_MS / 1000} s` : '';
  return [text, miss].filter(Boolean).join(', ') || '-';
};

async function main(): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  // --report A.json,B.json: no runs; the table and plots of samples runs wrote (later files win per mode and size).
  if (process.argv.includes('--report')) {
    const bySlot = new Map<string, Sample>();
    for (const f of arg('report', '').split(','))
      // JSON wrote NaN (not measured, not seen) as null.
      for (const s of (JSON.parse(readFileSync(f, 'utf8'), (_, v: unknown) => v ?? NaN) as { samples: Sample[] })
        .samples)
        bySlot.set(`${s.mode} ${s.size}`, s);
    return report([...bySlot.values()]);
  }
  if (!process.argv.includes('--no-build')) buildDist();
  const samples: Sample[] = [];
  for (const size of SIZES) {
    for (const mode of MODES) {
      const s = await once(mode, size);
      samples.push(s);
      console.log(JSON.stringify(s));
      writeFileSync(join(OUT, `${NAME}.json`), JSON.stringify({ endpoints: ENDPOINTS, samples }, null, 2));
    }
  }
  report(samples);
}

function report(samples: Sample[]): void {
  const sizes = [...new Set(samples.map((s) => s.size))];
  const modes = [...new Set(samples.map((s) => s.mode))];
  console.log(`\n${ENDPOINTS} endpoints per Service, ${CHANGES} one-endpoint changes, cold sync capped at ${CAP_S} s`);
  console.log(
    '| mode | Services | API seed (s) / RSS (MiB) | first Service answers (s) | last probe answers (s) | cold sync (s) | its CPU (s) | full syncs (s, n) | change at healthy (ms) | one-endpoint change, traffic (ms) | in nf_tables (ms) | RSS healthy (MiB) | RSS steady (MiB) | peak VmHWM (MiB) | load |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
  for (const s of samples)
    console.log(
      `| ${s.mode} | ${s.size} | ${f1(s.apiSeedS)} / ${f0(s.apiRssMiB)} | ${Number.isFinite(s.firstAnswerS) ? s.firstAnswerS.toFixed(2) : '-'} | ${f1(s.lastAnswerS)} | ` +
        `${Number.isNaN(s.coldSyncS) ? `not done in ${CAP_S}` : f1(s.coldSyncS)} | ${f1(s.coldSyncCpuS)} | ${f1(s.fullSyncS)}, ${s.fullSyncs} | ` +
        `${f0(s.changeAfterStartMs)} | ${msList(s.changeMs)} | ${msList(s.kernelChangeMs)} | ${f0(s.rssHealthyMiB)} | ${f0(s.steadyRssMiB)} | ${f0(s.peakMiB)} | ${s.load.replace('load ', '')} |`,
    );
  console.log('\nWhere the cold sync goes (seconds from the spawn, from the proxy log at --v 2):');
  console.log(
    '| mode | Services | healthz listening | Services listed | EndpointSlices listed | first IPv4 sync ends (its own time) | healthy | API host CPU (s) | partial IPv4 syncs, own time (ms) |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const s of samples) {
    const p = s.phases;
    console.log(
      `| ${s.mode} | ${s.size} | ${f1(p.upS)} | ${f1(p.servicesListedS)} | ${f1(p.slicesListedS)} | ${f1(p.firstSyncEndS)} (${f1(p.firstSyncS)}) | ${f1(s.coldSyncS)} | ${f1(s.apiCpuS)} | ${p.partialSyncMs?.length ? msList(p.partialSyncMs) : '-'} |`,
    );
  }
  const find = (m: string, n: number): Sample | undefined => samples.find((s) => s.mode === m && s.size === n);
  const groups = (pick: (s: Sample) => number[]) =>
    sizes.map((n) => ({
      label: `${n / 1000}k Services`,
      values: modes.flatMap((m) => {
        const s = find(m, n);
        return s ? pick(s).map((x) => (Number.isFinite(x) ? x : null)) : [null, null];
      }),
    }));
  const png = writeChart(join(OUT, NAME), {
    title: `kube-proxy-ts at scale: first Service answering and cold sync (real process, ${ENDPOINTS} endpoints per Service)`,
    yLabel: 'seconds from start',
    series: modes.flatMap((m) => [`${m} first Service answers`, `${m} cold sync (healthy)`]),
    groups: groups((s) => [s.firstAnswerS, s.coldSyncS]),
  });
  writeChart(join(OUT, `${NAME}-rss`), {
    title: `kube-proxy-ts at scale: RSS (real process, ${ENDPOINTS} endpoints per Service)`,
    yLabel: 'MiB',
    series: modes.flatMap((m) => [`${m} RSS steady`, `${m} peak (VmHWM)`]),
    groups: groups((s) => [s.steadyRssMiB, s.peakMiB]),
  });
  writeChart(join(OUT, `${NAME}-change`), {
    title: `kube-proxy-ts at scale: one-endpoint change, API write to traffic (median ms, log scale)`,
    yLabel: 'ms',
    series: modes.map((m) => `${m} one-endpoint change`),
    groups: sizes.map((n) => ({
      label: `${n / 1000}k Services`,
      values: modes.map((m) => {
        const s = find(m, n);
        const v = s && s.changeMs.length > 0 ? median(s.changeMs) : NaN;
        return Number.isFinite(v) && v > 0 ? v : null;
      }),
    })),
    log: true,
  });
  console.log(png ? `wrote ${png}` : `wrote ${NAME}.svg (no PNG converter)`);
}

runBench(main);
