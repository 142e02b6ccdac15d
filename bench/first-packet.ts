// Benchmark (never a test): first-packet latency through a ClusterIP as the
// ruleset grows. A client in a pod namespace opens fresh TCP connections to a
// ClusterIP; each SYN walks the node's nat rules before conntrack knows the
// flow, so the connect time shows what the Service lookup costs. Measured at
// 0, 10k and 40k other Services (2 endpoints each), in iptables and nftables
// mode (the default layout), the rules written by the real dataplanes.
// Prints a table and writes bench/out/first-packet.{json,svg,png}. Run as root:
//
//   node --import tsx bench/first-packet.ts [--sizes 0,10000,40000] [--modes iptables,nftables] [--connects 3000]
//
// Topology, namespaces kpt-<pid>-<rand>-fp-{node,pod,srv}, removed on exit
// and on SIGINT: pod (10.244.0.10) -- node (routes, the proxy's rules) --
// srv (10.244.1.10, a TCP listener on 8080). The target Service is
// 10.111.255.1:80 -> 10.244.1.10:8080, named to sort after every filler
// Service (the worst place in a linear chain). The client is a small C-free
// loop: Node's net.connect, timed from the call to 'connect' (SYN to
// SYN-ACK plus the event loop's turn), one connection at a time.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { syncStateFromObjects } from '../src/core/snapshot.js';
import type { DataplaneConfig, Dataplane, SyncState } from '../src/core/types.js';
import { realClock } from '../src/platform/clock.js';
import { netnsRunner } from '../src/platform/exec.js';
import { IptablesDataplane, runnerSysctl } from '../src/platform/iptables/index.js';
import { NftablesDataplane } from '../src/platform/nftables/dataplane.js';
import { DEFAULT_ENDPOINT_LAYOUT } from '../src/dataplane/nftables/static.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../test/netns/cleanup.js';
import { newPrefix } from '../test/netns/names.js';
import {
  endpoint,
  makeNode,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
} from '../test/support/fixtures.js';
import { writeChart } from './lib/chart.js';

const here = dirname(fileURLToPath(import.meta.url));
const OUT = process.env['KPT_BENCH_OUT'] ?? join(here, 'out');
const arg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};

const TARGET_IP = '10.111.255.1';
const SERVER_IP = '10.244.1.10';
const NODE_IP = '10.244.0.1';

const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.244.0.0/16'] },
  nodePortAddresses: [`${NODE_IP}/32`],
  localhostNodePorts: false,
  localIPs: ['127.0.0.1', NODE_IP, '10.244.1.1'],
};

type Mode = 'iptables' | 'nftables';

interface Result {
  mode: Mode;
  services: number;
  syncMs: number;
  connects: number;
  p50us: number;
  p99us: number;
  meanUs: number;
  failed: number;
}

/** `size` filler Services (never contacted) and the target, as the engine would hand them over. */
function buildState(size: number): SyncState {
  const services: ReturnType<typeof makeService>[] = [];
  const slices: ReturnType<typeof makeSlice>[] = [];
  const add = (name: string, ip: string, eps: string[]) => {
    services.push(
      withClusterIP(
        makeService('ns', name, (s) => {
          s.spec.ports = [svcPort('p80', 80, 'TCP', { targetPort: 8080 })];
        }),
        ip,
      ),
    );
    slices.push(
      makeSlice('ns', name, 1, (s) => {
        s.endpoints = eps.map((e, k) => endpoint(e, { nodeName: `n${k}` }));
        s.ports = [slicePort('p80', 8080)];
      }),
    );
  };
  for (let i = 0; i < size; i++) {
    const ip = `10.${96 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
    add(`filler${i}`, ip, [`10.250.${(i >> 8) & 255}.${i & 255}`, `10.251.${(i >> 8) & 255}.${i & 255}`]);
  }
  add('zzz-target', TARGET_IP, [SERVER_IP]);
  return syncStateFromObjects({
    services,
    slices,
    family: 'IPv4',
    nodeName: 'n0',
    node: makeNode('n0', { internalIPs: [NODE_IP] }),
    serviceCIDRs: ['10.96.0.0/12'],
  });
}

const sh = (ns: string, cmd: string) => execFileSync('ip', ['netns', 'exec', ns, 'sh', '-ec', cmd]);

/** The three namespaces, wired and routed; returns their names. */
function topology(prefix: string): { node: string; pod: string; srv: string } {
  const ns = { node: `${prefix}fp-node`, pod: `${prefix}fp-pod`, srv: `${prefix}fp-srv` };
  for (const n of Object.values(ns)) {
    trackNamespace(n);
    execFileSync('ip', ['netns', 'add', n]);
    sh(n, 'ip link set lo up');
  }
  execFileSync('ip', ['-n', ns.node, 'link', 'add', 'vp0', 'type', 'veth', 'peer', 'eth0', 'netns', ns.pod]);
  execFileSync('ip', ['-n', ns.node, 'link', 'add', 'vs0', 'type', 'veth', 'peer', 'eth0', 'netns', ns.srv]);
  sh(
    ns.node,
    `ip addr add ${NODE_IP}/24 dev vp0; ip addr add 10.244.1.1/24 dev vs0; ip link set vp0 up; ip link set vs0 up
     sysctl -qw net.ipv4.ip_forward=1`,
  );
  sh(ns.pod, `ip addr add 10.244.0.10/24 dev eth0; ip link set eth0 up; ip route add default via ${NODE_IP}`);
  sh(ns.srv, `ip addr add ${SERVER_IP}/24 dev eth0; ip link set eth0 up; ip route add default via 10.244.1.1`);
  return ns;
}

function dataplane(mode: Mode, nodeNs: string): Dataplane {
  if (mode === 'nftables') return new NftablesDataplane({ config: CONFIG, netns: nodeNs });
  const run = netnsRunner(nodeNs);
  return new IptablesDataplane({
    config: CONFIG,
    run,
    sysctl: runnerSysctl(run),
    clock: realClock,
    syncPeriodMs: 30_000,
  });
}

/** The client loop, run by `node -e` inside the pod namespace; prints microseconds per connect as JSON. */
const CLIENT = String.raw`
const net = require('node:net');
const [host, port, n, warm] = process.argv.slice(1);
const out = []; let failed = 0;
function one(i) {
  if (i >= Number(n) + Number(warm)) { console.log(JSON.stringify({ us: out, failed })); return; }
  const t0 = process.hrtime.bigint();
  const s = net.connect({ host, port: Number(port) });
  s.setTimeout(3000, () => { failed++; s.destroy(); one(i + 1); });
  s.once('connect', () => {
    const us = Number(process.hrtime.bigint() - t0) / 1000;
    if (i >= Number(warm)) out.push(us);
    s.setTimeout(0); s.destroy(); setImmediate(() => one(i + 1));
  });
  s.once('error', () => { failed++; s.setTimeout(0); s.destroy(); one(i + 1); });
}
one(0);
`;

const SERVER = String.raw`
require('node:net').createServer((s) => s.on('error', () => {}).end()).listen(8080, '0.0.0.0', () => console.log('ready'));
`;

async function measure(mode: Mode, size: number, connects: number): Promise<Result> {
  const prefix = newPrefix();
  const ns = topology(prefix);
  const server = spawnSyncDetached(ns.srv);
  try {
    const dp = dataplane(mode, ns.node);
    const state = buildState(size);
    const t0 = performance.now();
    await dp.sync(state);
    const syncMs = performance.now() - t0;
    await dp.close?.();
    const r = spawnSync(
      'ip',
      ['netns', 'exec', ns.pod, process.execPath, '-e', CLIENT, TARGET_IP, '80', String(connects), '200'],
      {
        encoding: 'utf8',
        maxBuffer: 1 << 26,
      },
    );
    if (r.status !== 0) throw new Error(`client failed: ${r.stderr}`);
    const { us, failed } = JSON.parse(r.stdout) as { us: number[]; failed: number };
    us.sort((a, b) => a - b);
    const q = (p: number) => us[Math.min(us.length - 1, Math.floor(p * us.length))] ?? NaN;
    return {
      mode,
      services: size,
      syncMs,
      connects: us.length,
      p50us: q(0.5),
      p99us: q(0.99),
      meanUs: us.reduce((a, b) => a + b, 0) / Math.max(1, us.length),
      failed,
    };
  } finally {
    server.kill();
    for (const n of Object.values(ns)) {
      deleteNamespaceSync(n);
      untrackNamespace(n);
    }
  }
}

/** The echo-less listener in the server namespace; waits until it listens. */
function spawnSyncDetached(ns: string): { kill(): void } {
  const child = execFileSync('sh', [
    '-c',
    `ip netns exec ${ns} ${process.execPath} -e "${SERVER.replace(/"/g, '\\"')}" > /dev/null 2>&1 & echo $!`,
  ])
    .toString()
    .trim();
  const pid = Number(child);
  for (let i = 0; i < 100; i++) {
    const ss = spawnSync('ip', ['netns', 'exec', ns, 'ss', '-ltn', 'sport = :8080'], { encoding: 'utf8' });
    if (ss.stdout.includes('8080')) break;
    spawnSync('sleep', ['0.05']);
  }
  return {
    kill: () => {
      try {
        process.kill(pid);
      } catch {
        // already gone
      }
    },
  };
}

async function main(): Promise<void> {
  const sizes = (arg('sizes') ?? '0,10000,40000').split(',').map(Number);
  const modes = (arg('modes') ?? 'iptables,nftables').split(',') as Mode[];
  const connects = Number(arg('connects') ?? 3000);
  const results: Result[] = [];
  for (const mode of modes)
    for (const size of sizes) {
      const r = await measure(mode, size, connects);
      results.push(r);
      console.error(`${mode} ${size}: p50 ${r.p50us.toFixed(0)} us, p99 ${r.p99us.toFixed(0)} us`);
    }
  const load = execFileSync('cat', ['/proc/loadavg']).toString().split(' ').slice(0, 3).join(' ');
  console.log(`nftables layout: ${DEFAULT_ENDPOINT_LAYOUT}; load average at the end ${load}`);
  console.log(
    '| mode | Services | rules written in | connects | connect p50 | connect p99 | mean | failed | p50 vs 0 Services |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of results) {
    const base = results.find((x) => x.mode === r.mode && x.services === 0);
    const rel = base ? `${(((r.p50us - base.p50us) / base.p50us) * 100).toFixed(1)} %` : '-';
    console.log(
      `| ${r.mode} | ${r.services} | ${(r.syncMs / 1000).toFixed(2)} s | ${r.connects} | ${r.p50us.toFixed(0)} us | ${r.p99us.toFixed(0)} us | ${r.meanUs.toFixed(0)} us | ${r.failed} | ${rel} |`,
    );
  }
  mkdirSync(OUT, { recursive: true });
  writeFileSync(join(OUT, 'first-packet.json'), JSON.stringify(results, null, 2));
  const png = writeChart(join(OUT, 'first-packet'), {
    title: 'First-packet latency through a ClusterIP (TCP connect, microseconds)',
    yLabel: 'microseconds',
    series: modes.flatMap((m) => [`${m} p50`, `${m} p99`]),
    groups: sizes.map((size) => ({
      label: `${size / 1000}k Services`,
      values: modes.flatMap((m) => {
        const r = results.find((x) => x.mode === m && x.services === size);
        return r ? [r.p50us, r.p99us] : [null, null];
      }),
    })),
  });
  console.log(png ? `chart: ${png}` : 'chart: SVG only (no rsvg-convert)');
}

process.on('SIGINT', () => process.exit(130));
main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
