// Benchmark (never a test): --ebpf-lb-mode dsr against snat for a NodePort
// connection from outside to an endpoint on ANOTHER node, with real packets.
// The namespace cluster of the e2e tests (ext, node1, node2 on one bridge):
// both nodes run the real programs with the same hand-written NodePort
// (test/ebpf/dsrnodes.ts), node1 also XDP on its uplink; ext connects to
// node1's address, the endpoint is usload's server in pod node2-a. The two
// modes take turns in every round (CFG_DSR switched on both nodes), so load
// swings on the shared machine hit both alike. Per mode:
//   * connection rate: usload rate, closed loop, 64 concurrent, one 64 B
//     request and 64 B answer per connection;
//   * connect latency: usload paced at --paced conn/s, p50/p99;
//   * packets through node1 per connection: node1's uplink rx + tx packet
//     counters over the rate run, divided by its connections (snat: both
//     directions pass node1, in and out; dsr: only the client's).
// Prints a table and writes bench/out/ebpf-dsr.{json,svg,png} and
// -node1.{svg,png}.
//
//   node --import tsx bench/ebpf-dsr.ts [--reps 3] [--seconds 3] [--paced 500]
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NetnsCluster } from '../test/netns/cluster.js';
import { trackChild, untrackChild } from '../test/netns/cleanup.js';
import { nsRun } from '../test/netns/spawn.js';
import { type BpfNode } from '../test/ebpf/bpfnode.js';
import { setDsr, startDsrNodes } from '../test/ebpf/dsrnodes.js';
import { writeChart } from './lib/chart.js';
import { arg, median, runBench } from './lib/cluster.js';

const here = dirname(fileURLToPath(import.meta.url));
const OUT = join(here, 'out');
const REPS = Number(arg('reps', '3'));
const SECONDS = arg('seconds', '3');
const PACED = arg('paced', '500');
const NODE_PORT = 30090;
const MODES = ['snat', 'dsr'] as const;
type Mode = (typeof MODES)[number];

interface Row {
  mode: Mode;
  rate: number;
  p50: number;
  p99: number;
  node1Packets: number;
  errors: number;
}

const json = (out: string) => JSON.parse(out.trim().split('\n').pop()!) as Record<string, number>;

async function main(): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  const bin = join(OUT, 'usload');
  execFileSync('gcc', ['-O2', '-o', bin, join(here, 'userspace-relay.c')]);
  // The pods' own echo servers move off usload's ports (8080-8082).
  const c = await NetnsCluster.create({ tcpPorts: [9000], udpPorts: [9053] });
  let nodes: BpfNode[] = [];
  let server: ReturnType<typeof spawn> | null = null;
  try {
    await nsRun(c.external.ns, ['ethtool', '-K', 'eth0', 'tx', 'off']);
    const started = await startDsrNodes(
      c,
      [{ svcId: 1, nodePort: NODE_PORT, proto: 'TCP', pod: 'node2-a', port: 8080 }],
      false,
    );
    nodes = [started.n1, started.n2];
    const pod = c.pod('node2-a');
    server = spawn('ip', ['netns', 'exec', pod.ns, bin, 'server', pod.ip], { stdio: ['ignore', 'pipe', 'inherit'] });
    trackChild(server.pid);
    await new Promise<void>((res, rej) => {
      server!.stdout!.once('data', () => res());
      server!.once('exit', (code) => rej(new Error(`usload server exited ${code}`)));
    });
    const node1 = c.node('node1');
    const inExt = (args: string[]) =>
      json(execFileSync('ip', ['netns', 'exec', c.external.ns, bin, ...args]).toString());
    const node1Packets = () =>
      ['rx_packets', 'tx_packets']
        .map((f) =>
          Number(execFileSync('ip', ['netns', 'exec', node1.ns, 'cat', `/sys/class/net/eth0/statistics/${f}`])),
        )
        .reduce((a, b) => a + b, 0);
    const acc: Record<Mode, { rate: number[]; p50: number[]; p99: number[]; pk: number[]; errors: number }> = {
      snat: { rate: [], p50: [], p99: [], pk: [], errors: 0 },
      dsr: { rate: [], p50: [], p99: [], pk: [], errors: 0 },
    };
    for (let rep = 0; rep < REPS; rep++) {
      const order = rep % 2 ? [...MODES].reverse() : [...MODES];
      for (const mode of order) {
        await setDsr(nodes, mode === 'dsr');
        const before = node1Packets();
        const r = inExt(['rate', node1.ip, String(NODE_PORT), SECONDS, '64']);
        const pk = (node1Packets() - before) / Math.max(1, r['conns']!);
        const l = inExt(['paced', node1.ip, String(NODE_PORT), SECONDS, PACED]);
        const a = acc[mode];
        a.rate.push(r['rate']!);
        a.pk.push(pk);
        a.p50.push(l['p50_us']!);
        a.p99.push(l['p99_us']!);
        a.errors += r['errors']! + l['errors']!;
        console.log(
          `round ${rep + 1} ${mode}: ${r['rate']!.toFixed(0)} conn/s, ${pk.toFixed(2)} node1 packets/conn, p50 ${l['p50_us']} us, p99 ${l['p99_us']} us (load ${loadavg()[0]!.toFixed(2)})`,
        );
      }
    }
    const rows: Row[] = MODES.map((mode) => ({
      mode,
      rate: median(acc[mode].rate),
      p50: median(acc[mode].p50),
      p99: median(acc[mode].p99),
      node1Packets: median(acc[mode].pk),
      errors: acc[mode].errors,
    }));
    console.log(`\nmedians of ${REPS} rounds (${SECONDS} s each; paced at ${PACED} conn/s)`);
    console.log('| mode | conn/s | p50 us | p99 us | node1 packets/conn | errors |');
    console.log('|---|---:|---:|---:|---:|---:|');
    for (const r of rows)
      console.log(
        `| ${r.mode} | ${r.rate.toFixed(0)} | ${r.p50} | ${r.p99} | ${r.node1Packets.toFixed(2)} | ${r.errors} |`,
      );
    writeFileSync(join(OUT, 'ebpf-dsr.json'), JSON.stringify({ reps: REPS, seconds: SECONDS, rows }, null, 2));
    writeChart(join(OUT, 'ebpf-dsr'), {
      title: 'NodePort from outside to an endpoint on another node: connections per second',
      yLabel: 'conn/s',
      series: [...MODES],
      groups: [{ label: 'ext -> node1:NodePort -> node2 pod', values: rows.map((r) => r.rate) }],
    });
    writeChart(join(OUT, 'ebpf-dsr-node1'), {
      title: "Packets through the entering node's uplink per connection (rx + tx)",
      yLabel: 'packets',
      series: [...MODES],
      groups: [{ label: 'node1 eth0', values: rows.map((r) => r.node1Packets) }],
    });
  } finally {
    if (server) {
      server.kill('SIGKILL');
      untrackChild(server.pid);
    }
    await Promise.all(nodes.map((n) => n.stop()));
    await c.destroy();
  }
}

runBench(main);
