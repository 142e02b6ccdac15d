// Benchmark (never a test): what the per-Service traffic counters
// (--service-traffic-metrics) cost the ebpf mode's tc program per packet.
// The real compiled program runs on crafted frames with BPF_PROG_TEST_RUN
// (private maps, nothing attached, no namespace touched), and the kernel's
// own timing of each run is collected, for three settings:
//   off        CFG_TRAFFIC unset (the flag off), though the port has an entry;
//   counted    CFG_TRAFFIC set, the port has an entry (one per-CPU hash lookup, two adds);
//   uncounted  CFG_TRAFFIC set, the port has none (past the cap: one missed lookup);
// and two paths:
//   established  an ACK with 64 B of payload of a balanced connection (connection-map hit);
//   first packet a SYN from a new source port (service lookup, endpoint choice, two connection entries).
// The settings take turns in rounds, so load swings on the shared machine hit them alike. Then the scrape
// side: reading N counted entries (one lookup each, summed over the CPUs), as each scrape does twice (once
// per metric). Prints tables (median, p90 ns; ms per read) and writes bench/out/ebpf-traffic.{json,svg,png}.
//
//   node --import tsx bench/ebpf-traffic.ts [--rounds 20] [--batch 500]
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import * as L from '../src/dataplane/ebpf/layout.js';
import { EbpfPlanner } from '../src/platform/ebpf/planner.js';
import { EbpfRuntime } from '../src/platform/ebpf/runtime.js';
import { testRun } from '../src/platform/ebpf/testrun.js';
import { buildFrame, TCP_ACK } from '../test/ebpf/frames.js';
import { writeChart } from './lib/chart.js';
import { arg, percentile, runBench } from './lib/cluster.js';
import { pathServiceState } from './lib/ebpfstate.js';
import { CLIENT, PATH_CONFIG, VIP } from './lib/ebpfpath.js';

const here = dirname(fileURLToPath(import.meta.url));
const OUT = join(here, 'out');
const ROUNDS = Number(arg('rounds', '20'));
const BATCH = Number(arg('batch', '500'));

const SETTINGS = ['off', 'counted', 'uncounted'] as const;
type Setting = (typeof SETTINGS)[number];
const PATHS = ['established', 'first packet'] as const;

const SCRAPE_SIZES = [100, 1000, 10000];

/** ms to look up n entries of kpt_traffic (ids 1,000,000 + i, created here and removed after). */
function readCost(rt: EbpfRuntime, n: number): number {
  const keys = Array.from({ length: n }, (_, i) => L.encodeU32(1_000_000 + i));
  const zero = L.encodeTrafficValue({ conns: 0n, bytes: 0n });
  rt.apply(keys.map((key) => ({ map: 'traffic' as const, op: 'update' as const, key, value: zero })));
  const times: number[] = [];
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    for (const k of keys) L.decodeTrafficValue(rt.lookup('traffic', k)!);
    times.push(performance.now() - t0);
  }
  rt.apply(keys.map((key) => ({ map: 'traffic' as const, op: 'delete' as const, key })));
  return percentile(times, 50);
}

async function main(): Promise<void> {
  const load0 = loadavg()[0]!;
  const rt = await EbpfRuntime.open({ pinRoot: null });
  const state = pathServiceState();
  const renderer = new EbpfPlanner(PATH_CONFIG, { trafficCounters: true });
  rt.apply(renderer.plan({ state }).ops);
  const key = L.encodeU32(renderer.idOf('bench/web:http')!);
  const cfgKey = L.encodeU32(0);
  const cfg = L.decodeCfgValue(rt.lookup('cfg', cfgKey)!);
  const zero = L.encodeTrafficValue({ conns: 0n, bytes: 0n });
  const set = (s: Setting) => {
    const flags = s === 'off' ? cfg.flags & ~L.CFG_TRAFFIC : cfg.flags | L.CFG_TRAFFIC;
    rt.apply([{ map: 'cfg', op: 'update', key: cfgKey, value: L.encodeCfgValue({ ...cfg, flags }) }]);
    const has = rt.lookup('traffic', key) !== null;
    if (s === 'uncounted' && has) rt.apply([{ map: 'traffic', op: 'delete', key }]);
    if (s !== 'uncounted' && !has) rt.apply([{ map: 'traffic', op: 'update', key, value: zero }]);
  };

  const prog = rt.obj.program('kpt_ingress');
  const payload = new Uint8Array(64);
  const est = { src: CLIENT, dst: VIP, sport: 40000, dport: 80, proto: 'TCP' as const };
  testRun(prog, { frame: buildFrame(est) }); // balance the established flow once
  const ack = buildFrame({ ...est, flags: TCP_ACK, payload });
  let sport = 1024;
  const samples = new Map<string, number[]>();
  const add = (s: Setting, p: string, ns: number) => {
    const k = `${s}|${p}`;
    if (!samples.has(k)) samples.set(k, []);
    samples.get(k)!.push(ns);
  };
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? SETTINGS : [...SETTINGS].reverse();
    for (const s of order) {
      set(s);
      for (let i = 0; i < BATCH; i++) {
        add(s, 'established', testRun(prog, { frame: ack }).durationNs);
        if (sport > 65000) sport = 1024;
        const syn = buildFrame({ ...est, sport: sport++ });
        add(s, 'first packet', testRun(prog, { frame: syn }).durationNs);
      }
    }
  }
  set('counted');
  const counted = L.decodeTrafficValue(rt.lookup('traffic', key)!);
  const scrape = SCRAPE_SIZES.map((n) => ({ entries: n, ms: readCost(rt, n) }));
  rt.close();
  const load1 = loadavg()[0]!;

  const rows = PATHS.flatMap((p) =>
    SETTINGS.map((s) => {
      const xs = samples.get(`${s}|${p}`)!;
      return { path: p, setting: s, runs: xs.length, p50: percentile(xs, 50), p90: percentile(xs, 90) };
    }),
  );
  console.log(`kpt_ingress per packet, BPF_PROG_TEST_RUN, ${ROUNDS} rounds x ${BATCH} runs per setting and path`);
  console.log(`load average (1 min) ${load0.toFixed(1)} at start, ${load1.toFixed(1)} at end`);
  console.log('| path | setting | runs | p50 ns | p90 ns | p50 - off |');
  console.log('|---|---|---:|---:|---:|---:|');
  for (const r of rows) {
    const off = rows.find((x) => x.path === r.path && x.setting === 'off')!.p50;
    console.log(`| ${r.path} | ${r.setting} | ${r.runs} | ${r.p50} | ${r.p90} | ${r.p50 - off} |`);
  }
  // What the 'counted' turns since the last 'uncounted' one (which deletes the entry) added: a check of the counting.
  console.log(`kpt_traffic entry after the runs: conns ${counted.conns}, bytes ${counted.bytes}`);
  console.log('| counted entries | ms to read them all (median of 5) |');
  console.log('|---:|---:|');
  for (const r of scrape) console.log(`| ${r.entries} | ${r.ms.toFixed(2)} |`);

  mkdirSync(OUT, { recursive: true });
  writeFileSync(
    join(OUT, 'ebpf-traffic.json'),
    JSON.stringify({ rounds: ROUNDS, batch: BATCH, load: [load0, load1], rows, scrape }, null, 2),
  );
  const png = writeChart(join(OUT, 'ebpf-traffic'), {
    title: 'kpt_ingress run time per packet with per-Service traffic counters (p50)',
    yLabel: 'ns',
    series: [...SETTINGS],
    groups: PATHS.map((p) => ({
      label: p,
      values: SETTINGS.map((s) => rows.find((r) => r.path === p && r.setting === s)!.p50),
    })),
  });
  console.log(`wrote ${png ?? join(OUT, 'ebpf-traffic.svg')}`);
}

runBench(main);
