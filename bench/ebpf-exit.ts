// Benchmark (never a test): what the ebpf mode's tc programs cost a packet
// that is not theirs, beside one they translate. The real compiled programs
// run on crafted frames with BPF_PROG_TEST_RUN (private maps, nothing
// attached, no namespace touched); each sample is the kernel's own timing of
// one run (one, because a translated frame is rewritten in place: a second
// run on it would be another packet). The node is bench/ebpf.ts's
// path (one ClusterIP Service, ServiceCIDR 10.96.0.0/12, the client a local
// pod). Packets:
//   pod -> pod        an ACK from the client straight to another pod
//                     (10.0.2.3), as a flow balanced at the socket sends it
//                     (ingress hook);
//   pod <- pod        its reply (egress hook);
//   pod <- endpoint   a reply from 10.0.2.2:8080 without a connection entry:
//                     a flow balanced at the socket to an endpoint that the tc
//                     programs also balance flows to (egress hook);
//   translated        an ACK of a flow the programs balanced (ingress: DNAT);
//   translated reply  the reply of that flow (egress: source rewritten back);
//   not IP            an ARP frame: the program returns after reading the
//                     EtherType, so this is about what a run costs at all;
//   disabled          pod -> pod with the family not yet synced (CFG_ENABLED
//                     unset): parsing and the config lookup only, the least
//                     any program of this shape can cost.
// The packets take turns in rounds, so load swings hit them alike. After the
// runs, the programs' own counters (kpt_stats) per packet kind are checked
// against what each kind should have done. Prints a table (median, p90 ns)
// and writes bench/out/ebpf-exit.{json,svg,png}.
//
//   node --import tsx bench/ebpf-exit.ts [--rounds 20] [--batch 500]
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as L from '../src/dataplane/ebpf/layout.js';
import { EbpfPlanner } from '../src/platform/ebpf/planner.js';
import { EbpfRuntime } from '../src/platform/ebpf/runtime.js';
import { testRun } from '../src/platform/ebpf/testrun.js';
import { buildFrame, parseFrame, TCP_ACK } from '../test/ebpf/frames.js';
import { writeChart } from './lib/chart.js';
import { arg, percentile, runBench } from './lib/cluster.js';
import { pathServiceState } from './lib/ebpfstate.js';
import { BACKEND, CLIENT, PATH_CONFIG, VIP } from './lib/ebpfpath.js';

const here = dirname(fileURLToPath(import.meta.url));
const OUT = join(here, 'out');
const ROUNDS = Number(arg('rounds', '20'));
const BATCH = Number(arg('batch', '500'));

/** A pod beside the endpoint, which the tc programs never balanced a connection to. */
const OTHER_POD = '10.0.2.3';

const KINDS = [
  'not IP',
  'disabled',
  'pod -> pod',
  'pod <- pod',
  'pod <- endpoint',
  'translated',
  'translated reply',
] as const;
type Kind = (typeof KINDS)[number];

/** A broadcast ARP request (who has 10.0.1.1, tell 10.0.1.2). */
function arpFrame(): Uint8Array {
  const f = new Uint8Array(42);
  f.fill(0xff, 0, 6);
  f.set([2, 0, 0, 0, 0, 1], 6);
  f.set([0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1], 12);
  f.set([2, 0, 0, 0, 0, 1, 10, 0, 1, 2], 22);
  f.set([10, 0, 1, 1], 38);
  return f;
}

async function main(): Promise<void> {
  const load0 = loadavg()[0]!;
  const rt = await EbpfRuntime.open({ pinRoot: null });
  const state = pathServiceState();
  rt.apply(new EbpfPlanner(PATH_CONFIG).plan({ state }).ops);
  const cfgKey = L.encodeU32(0);
  const cfg = L.decodeCfgValue(rt.lookup('cfg', cfgKey)!);
  const enable = (on: boolean) => {
    const flags = on ? cfg.flags | L.CFG_ENABLED : cfg.flags & ~L.CFG_ENABLED;
    rt.apply([{ map: 'cfg', op: 'update', key: cfgKey, value: L.encodeCfgValue({ ...cfg, flags }) }]);
  };
  const ingress = rt.obj.program('kpt_ingress');
  const egress = rt.obj.program('kpt_egress');
  const payload = new Uint8Array(64);
  const direct = { src: CLIENT, dst: OTHER_POD, sport: 40000, dport: 8080, proto: 'TCP' as const };
  const viaVip = { src: CLIENT, dst: VIP, sport: 40001, dport: 80, proto: 'TCP' as const };
  const syn = testRun(ingress, { frame: buildFrame(viaVip) });
  const balanced = parseFrame(syn.frame);
  if (balanced.dst !== BACKEND) throw new Error(`the SYN to ${VIP} went to ${balanced.dst}, not ${BACKEND}`);
  const frames: Record<Kind, { prog: number; frame: Uint8Array }> = {
    'not IP': { prog: ingress, frame: arpFrame() },
    disabled: { prog: ingress, frame: buildFrame({ ...direct, flags: TCP_ACK, payload }) },
    'pod -> pod': { prog: ingress, frame: buildFrame({ ...direct, flags: TCP_ACK, payload }) },
    'pod <- pod': {
      prog: egress,
      frame: buildFrame({
        src: OTHER_POD,
        dst: CLIENT,
        sport: 8080,
        dport: 40000,
        proto: 'TCP',
        flags: TCP_ACK,
        payload,
      }),
    },
    'pod <- endpoint': {
      prog: egress,
      frame: buildFrame({
        src: BACKEND,
        dst: CLIENT,
        sport: 8080,
        dport: 40000,
        proto: 'TCP',
        flags: TCP_ACK,
        payload,
      }),
    },
    translated: { prog: ingress, frame: buildFrame({ ...viaVip, flags: TCP_ACK, payload }) },
    'translated reply': {
      prog: egress,
      frame: buildFrame({
        src: BACKEND,
        dst: CLIENT,
        sport: 8080,
        dport: 40001,
        proto: 'TCP',
        flags: TCP_ACK,
        payload,
      }),
    },
  };
  const stats = () => Number(rt.stats()[1]!); // STAT_CT_HIT
  const samples = new Map<Kind, number[]>(KINDS.map((k) => [k, []]));
  const hits = new Map<Kind, number>(KINDS.map((k) => [k, 0]));
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? KINDS : [...KINDS].reverse();
    for (const k of order) {
      enable(k !== 'disabled');
      const before = stats();
      for (let i = 0; i < BATCH; i++) {
        const { prog, frame } = frames[k];
        samples.get(k)!.push(testRun(prog, { frame }).durationNs);
      }
      hits.set(k, hits.get(k)! + stats() - before);
    }
  }
  enable(true);
  rt.close();
  const load1 = loadavg()[0]!;

  const rows = KINDS.map((k) => {
    const xs = samples.get(k)!;
    return { packet: k, samples: xs.length, p50: percentile(xs, 50), p90: percentile(xs, 90) };
  });
  console.log(`tc programs per packet, BPF_PROG_TEST_RUN, ${ROUNDS} rounds x ${BATCH} runs per packet`);
  console.log(`load average (1 min) ${load0.toFixed(1)} at start, ${load1.toFixed(1)} at end`);
  console.log('| packet | samples | p50 ns | p90 ns | p50 - disabled |');
  console.log('|---|---:|---:|---:|---:|');
  const off = rows.find((r) => r.packet === 'disabled')!.p50;
  for (const r of rows) console.log(`| ${r.packet} | ${r.samples} | ${r.p50} | ${r.p90} | ${r.p50 - off} |`);
  // Printed first, checked now: only the translated packets are connection-map hits; anything else means the bench measured the wrong path.
  for (const k of KINDS) {
    const want = k.startsWith('translated') ? ROUNDS * BATCH : 0;
    if (hits.get(k) !== want) throw new Error(`${k}: ${hits.get(k)} connection-map hits, expected ${want}`);
  }
  mkdirSync(OUT, { recursive: true });
  writeFileSync(
    join(OUT, 'ebpf-exit.json'),
    JSON.stringify({ rounds: ROUNDS, batch: BATCH, load: [load0, load1], rows }, null, 2),
  );
  const png = writeChart(join(OUT, 'ebpf-exit'), {
    title: 'tc program run time per packet (BPF_PROG_TEST_RUN, p50)',
    yLabel: 'ns',
    series: ['p50'],
    groups: rows.map((r) => ({ label: r.packet, values: [r.p50] })),
  });
  console.log(`wrote ${png ?? join(OUT, 'ebpf-exit.svg')}`);
}

runBench(main);
