// Benchmark (never a test): what the XDP program (src/bpf/xdp.h) and the tc
// ingress program each cost a NodePort packet from outside, per packet, with
// and without XDP in front. The real compiled programs run on crafted frames
// with BPF_PROG_TEST_RUN (private maps, nothing attached, no namespace
// touched); each sample is the kernel's timing of one run. The node is
// bench/ebpf.ts's (the client ext 10.0.3.2, the node's 10.0.3.1, the
// measured Service's NodePort 30080 -> 10.0.2.2:8080), with --services bulk
// Services beside it and the measured one eTP Local (its endpoint on the
// node), so that XDP balances its new connections. Packets:
//   established, tc alone     an ACK (64 B) of a balanced connection through
//                             tc ingress, as ebpf mode without XDP runs it;
//   established, XDP          the same ACK through kpt_xdp (translated);
//   established, tc after XDP the translated ACK through tc ingress, which
//                             lets it go at its first check;
//   new, tc alone / new, XDP  a SYN of a new connection (a new client port
//                             each run), balanced by tc ingress, or by XDP
//                             (and tc after XDP lets the translated SYN go);
//   to the node, XDP / tc     an ACK to the node's own port 22: not a
//                             Service's, but to a node address, so both
//                             programs look it up in full before passing it.
// Kinds take turns in rounds, so load swings hit them alike; the programs'
// counters are checked against what each kind should have done. Prints a
// table (median, p90 ns) and writes bench/out/ebpf-xdp.{json,svg,png}.
//
//   node --import tsx bench/ebpf-xdp.ts [--services 10000] [--rounds 20] [--batch 300]
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as L from '../src/dataplane/ebpf/layout.js';
import { EbpfPlanner } from '../src/platform/ebpf/planner.js';
import { EbpfRuntime } from '../src/platform/ebpf/runtime.js';
import { testRun, testRunXdp } from '../src/platform/ebpf/testrun.js';
import { buildFrame, parseFrame, TCP_ACK } from '../test/ebpf/frames.js';
import { writeChart } from './lib/chart.js';
import { arg, percentile, runBench } from './lib/cluster.js';
import { buildState } from './lib/ebpfstate.js';
import { BACKEND, EXT_CLIENT, NODE_EXT, NODE_PORT_BASE, PATH_CONFIG } from './lib/ebpfpath.js';

const here = dirname(fileURLToPath(import.meta.url));
const OUT = join(here, 'out');
const SERVICES = Number(arg('services', '10000'));
const ROUNDS = Number(arg('rounds', '20'));
const BATCH = Number(arg('batch', '300'));

const KINDS = [
  'established, tc alone',
  'established, XDP',
  'established, tc after XDP',
  'new, tc alone',
  'new, XDP',
  'new, tc after XDP',
  'to the node, XDP',
  'to the node, tc',
] as const;
type Kind = (typeof KINDS)[number];
/** The counter each kind must move once per run (kpt_stats index), or null for none. */
const COUNTS: Record<Kind, number | null> = {
  'established, tc alone': L.STAT.ctHit,
  'established, XDP': L.STAT.xdpHit,
  'established, tc after XDP': L.STAT.pass,
  'new, tc alone': L.STAT.new,
  'new, XDP': L.STAT.xdpNew,
  'new, tc after XDP': L.STAT.pass,
  'to the node, XDP': L.STAT.xdpPass,
  'to the node, tc': null,
};

async function main(): Promise<void> {
  const load0 = loadavg()[0]!;
  const rt = await EbpfRuntime.open({ pinRoot: null });
  const state = buildState(SERVICES, { nodePorts: true, etpLocal: true });
  rt.apply(new EbpfPlanner(PATH_CONFIG).plan({ state: { ...state, fullSync: true } }).ops);
  const ingress = rt.obj.program('kpt_ingress');
  const xdp = rt.obj.program('kpt_xdp');
  const payload = new Uint8Array(64);
  const np = { src: EXT_CLIENT, dst: NODE_EXT, sport: 40000, dport: NODE_PORT_BASE, proto: 'TCP' as const };
  const first = parseFrame(testRun(ingress, { frame: buildFrame(np) }).frame);
  if (first.dst !== BACKEND) throw new Error(`the SYN to the NodePort went to ${first.dst}, not ${BACKEND}`);
  const ack = buildFrame({ ...np, flags: TCP_ACK, payload });
  const translated = testRunXdp(xdp, ack).frame;
  if (parseFrame(translated).dst !== BACKEND) throw new Error('XDP did not translate the ACK');
  const toNode = buildFrame({ ...np, dport: 22, flags: TCP_ACK, payload });
  let port = 0;
  const syn = () => {
    port++;
    return buildFrame({ ...np, src: `10.3.${(port >> 14) & 255}.${(port >> 6) & 255}`, sport: 1024 + (port & 63) });
  };
  const translatedSyn = testRunXdp(xdp, syn()).frame;
  if (parseFrame(translatedSyn).dst !== BACKEND) throw new Error('XDP did not balance the SYN');
  const run: Record<Kind, () => number> = {
    'established, tc alone': () => testRun(ingress, { frame: ack }).durationNs,
    'established, XDP': () => testRunXdp(xdp, ack).durationNs,
    'established, tc after XDP': () => testRun(ingress, { frame: translated }).durationNs,
    'new, tc alone': () => testRun(ingress, { frame: syn() }).durationNs,
    'new, XDP': () => testRunXdp(xdp, syn()).durationNs,
    'new, tc after XDP': () => testRun(ingress, { frame: translatedSyn }).durationNs,
    'to the node, XDP': () => testRunXdp(xdp, toNode).durationNs,
    'to the node, tc': () => testRun(ingress, { frame: toNode }).durationNs,
  };
  const samples = new Map<Kind, number[]>(KINDS.map((k) => [k, []]));
  const moved = new Map<Kind, number>(KINDS.map((k) => [k, 0]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const k of r % 2 === 0 ? KINDS : [...KINDS].reverse()) {
      const idx = COUNTS[k];
      const before = idx === null ? 0 : Number(rt.stats()[idx]!);
      for (let i = 0; i < BATCH; i++) samples.get(k)!.push(run[k]());
      if (idx !== null) moved.set(k, moved.get(k)! + Number(rt.stats()[idx]!) - before);
    }
  }
  rt.close();
  const load1 = loadavg()[0]!;
  const rows = KINDS.map((k) => {
    const xs = samples.get(k)!;
    return { packet: k, samples: xs.length, p50: percentile(xs, 50), p90: percentile(xs, 90) };
  });
  console.log(`NodePort packets from outside, ${SERVICES} Services, BPF_PROG_TEST_RUN, ${ROUNDS} x ${BATCH} runs each`);
  console.log(`load average (1 min) ${load0.toFixed(1)} at start, ${load1.toFixed(1)} at end`);
  console.log('| packet | samples | p50 ns | p90 ns |');
  console.log('|---|---:|---:|---:|');
  for (const r of rows) console.log(`| ${r.packet} | ${r.samples} | ${r.p50} | ${r.p90} |`);
  // Printed first, checked now: a kind whose counter did not move once per run measured another path.
  for (const k of KINDS)
    if (COUNTS[k] !== null && moved.get(k) !== ROUNDS * BATCH)
      throw new Error(`${k}: its counter moved ${moved.get(k)} times, expected ${ROUNDS * BATCH}`);
  mkdirSync(OUT, { recursive: true });
  writeFileSync(
    join(OUT, 'ebpf-xdp.json'),
    JSON.stringify({ services: SERVICES, rounds: ROUNDS, batch: BATCH, load: [load0, load1], rows }, null, 2),
  );
  const p50 = (k: Kind) => rows.find((r) => r.packet === k)!.p50;
  const png = writeChart(join(OUT, 'ebpf-xdp'), {
    title: `A packet from outside: program run time (BPF_PROG_TEST_RUN, p50 ns, ${SERVICES} Services)`,
    yLabel: 'ns',
    series: ['tc alone (ebpf)', 'XDP (ebpfxdp)', 'tc after XDP (ebpfxdp)'],
    groups: [
      {
        label: 'NodePort, established',
        values: [p50('established, tc alone'), p50('established, XDP'), p50('established, tc after XDP')],
      },
      { label: 'NodePort, new (eTP Local)', values: [p50('new, tc alone'), p50('new, XDP'), p50('new, tc after XDP')] },
      // XDP passes it untouched, so tc after XDP runs on the very packet tc alone does.
      {
        label: 'to the node, not a Service',
        values: [p50('to the node, tc'), p50('to the node, XDP'), p50('to the node, tc')],
      },
    ],
  });
  console.log(`wrote ${png ?? join(OUT, 'ebpf-xdp.svg')}`);
}

runBench(main);
