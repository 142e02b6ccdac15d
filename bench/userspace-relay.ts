// Benchmark (never a test): the userspace mode's relay beside kernel DNAT
// (an iptables DNAT rule), HAProxy in TCP mode (Debian haproxy, installed
// when missing) and a direct path, on one namespace pair:
//
//   cli 10.0.1.2 --veth-- node 10.0.1.1 | 10.0.2.1 --veth-- srv 10.0.2.2
//
// The node namespace holds the datapath under test: the UserspaceDataplane
// (this file started with --child, Service 10.96.0.10:80/81/82), iptables
// DNAT (10.96.0.20:80/81/82), HAProxy (10.0.1.1:9080/9081/9082). The client
// and the backend are bench/userspace-relay.c (compiled with gcc on the fly):
// backend ports 8080 answer one 64 B request and close, 8081 echo, 8082 sink.
//
// Pinning on this 2-core machine: the relay and HAProxy on CPU 1 (one
// core each, the same core); client and backend on CPU 0. Measured:
//   * connection rate: closed loop, 64 concurrent, one 64 B request per connection;
//   * bulk: one connection writing 256 KiB chunks (Gbit/s after a 1 s warm-up);
//   * latency: open loop at half the relay's max connection rate, p50/p99 per
//     connection (connect to response); "added p99" = path p99 - direct p99;
//   * memory: 1,000 persistent connections doing 64 B ping-pong for --hold
//     seconds through the relay (and HAProxy), RSS sampled each second.
// Prints ratios and writes bench/out/userspace-relay.{json,svg,png} (+ -memory).
//
//   node --import tsx bench/userspace-relay.ts [--seconds 5] [--hold 20] [--conc 64]
//
// Namespaces kpt-us-<pid>-<rand>-{cli,node,srv} are removed on exit and SIGINT.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { deleteNamespaceSync, trackChild, trackNamespace, untrackNamespace } from '../test/netns/cleanup.js';
import { writeChart } from './lib/chart.js';

const here = dirname(fileURLToPath(import.meta.url));
const OUT = here.includes(join('bench', 'out', 'dist')) ? join(here, '..', '..') : join(here, 'out');
const SRC_C = here.includes(join('bench', 'out', 'dist'))
  ? join(here, '..', '..', '..', 'userspace-relay.c')
  : join(here, 'userspace-relay.c');
const VIP_RELAY = '10.96.0.10';
const VIP_DNAT = '10.96.0.20';
const BACKEND = '10.0.2.2';
const NODE_CLI_SIDE = '10.0.1.1';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

// ---------------- child: the relay inside the node namespace ----------------

async function child(): Promise<void> {
  const { syncStateFromObjects } = await import('../src/core/snapshot.js');
  const { UserspaceDataplane } = await import('../src/platform/userspace/dataplane.js');
  const dp = new UserspaceDataplane({
    config: {
      family: 'IPv4',
      masqueradeMark: 0x4000,
      masqueradeAll: false,
      localDetector: { kind: 'none' },
      nodePortAddresses: null,
      localhostNodePorts: true,
      localIPs: ['127.0.0.1', NODE_CLI_SIDE, '10.0.2.1'],
    },
  });
  const ports = [80, 81, 82].map((p) => ({ name: `p${p}`, port: p, protocol: 'TCP', targetPort: 8000 + p }));
  const svc = {
    metadata: { namespace: 'bench', name: 'relay' },
    spec: { type: 'ClusterIP', clusterIP: VIP_RELAY, clusterIPs: [VIP_RELAY], ipFamilies: ['IPv4'], ports },
  };
  const slice = {
    metadata: { namespace: 'bench', name: 'relay-1', labels: { 'kubernetes.io/service-name': 'relay' } },
    addressType: 'IPv4',
    ports: ports.map((p) => ({ name: p.name, port: p.targetPort, protocol: 'TCP' })),
    endpoints: [{ addresses: [BACKEND], conditions: { ready: true, serving: true, terminating: false } }],
  };
  await dp.sync(syncStateFromObjects({ services: [svc], slices: [slice], family: 'IPv4' }));
  process.stdout.write('ready\n');
  process.stdin.resume();
  process.stdin.on('end', () => {
    void dp.cleanup().finally(() => process.exit(0));
  });
}

// ---------------- parent ----------------

type Json = Record<string, number>;

const prefix = `kpt-us-${process.pid}-${randomBytes(2).toString('hex')}-`;
const NS = { cli: `${prefix}cli`, node: `${prefix}node`, srv: `${prefix}srv` };
const procs: ChildProcess[] = [];
const tmpFiles: string[] = [];

function sh(ns: string | null, ...argv: string[]): string {
  const full = ns ? ['ip', 'netns', 'exec', ns, ...argv] : argv;
  return execFileSync(full[0]!, full.slice(1), { encoding: 'utf8' });
}

function buildNamespaces(): void {
  for (const ns of Object.values(NS)) {
    trackNamespace(ns);
    sh(null, 'ip', 'netns', 'add', ns);
    sh(null, 'ip', '-n', ns, 'link', 'set', 'lo', 'up');
  }
  sh(null, 'ip', '-n', NS.cli, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'c0', 'netns', NS.node);
  sh(null, 'ip', '-n', NS.srv, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 's0', 'netns', NS.node);
  const addr = (ns: string, dev: string, a: string) => {
    sh(null, 'ip', '-n', ns, 'addr', 'add', a, 'dev', dev);
    sh(null, 'ip', '-n', ns, 'link', 'set', dev, 'up');
  };
  addr(NS.cli, 'eth0', '10.0.1.2/24');
  addr(NS.node, 'c0', `${NODE_CLI_SIDE}/24`);
  addr(NS.node, 's0', '10.0.2.1/24');
  addr(NS.srv, 'eth0', `${BACKEND}/24`);
  sh(null, 'ip', '-n', NS.cli, 'route', 'add', 'default', 'via', NODE_CLI_SIDE);
  sh(null, 'ip', '-n', NS.srv, 'route', 'add', 'default', 'via', '10.0.2.1');
  // Namespace-local sysctls only: forwarding on the node, wide port ranges and
  // TIME_WAIT reuse so that >100k short connections do not run out of ports.
  sh(NS.node, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1');
  for (const ns of Object.values(NS)) {
    sh(
      ns,
      'sysctl',
      '-q',
      '-w',
      'net.ipv4.ip_local_port_range=1024 65000',
      'net.ipv4.tcp_tw_reuse=1',
      'net.core.somaxconn=8192',
      'net.ipv4.tcp_max_syn_backlog=8192',
    );
  }
  // The node's conntrack table (this namespace only) forgets closed flows at once, so that
  // one path's 100k+ finished connections do not slow down the next path's.
  sh(
    NS.node,
    'sysctl',
    '-q',
    '-w',
    'net.netfilter.nf_conntrack_tcp_timeout_time_wait=1',
    'net.netfilter.nf_conntrack_tcp_timeout_close_wait=1',
    'net.netfilter.nf_conntrack_tcp_timeout_last_ack=1',
    'net.netfilter.nf_conntrack_tcp_timeout_fin_wait=1',
  );
  const dnat = [80, 81, 82].map(
    (p) => `-A PREROUTING -d ${VIP_DNAT}/32 -p tcp -m tcp --dport ${p} -j DNAT --to-destination ${BACKEND}:${8000 + p}`,
  );
  execFileSync('ip', ['netns', 'exec', NS.node, 'iptables-restore', '--noflush'], {
    input: ['*nat', ...dnat, 'COMMIT', ''].join('\n'),
  });
}

function teardown(): void {
  for (const f of tmpFiles) rmSync(f, { force: true });
  for (const p of procs) {
    try {
      p.kill('SIGKILL');
    } catch {
      /* gone */
    }
  }
  for (const ns of Object.values(NS)) {
    deleteNamespaceSync(ns);
    untrackNamespace(ns);
  }
}

/** Start a long-running process in ns pinned to cpu; resolves once its stdout printed `ready` (or after probe() succeeds). */
function startPinned(ns: string, cpu: number, argv: string[], ready: string | null): Promise<ChildProcess> {
  const p = spawn('ip', ['netns', 'exec', ns, 'taskset', '-c', String(cpu), ...argv], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  trackChild(p.pid);
  procs.push(p);
  let err = '';
  p.stderr!.on('data', (b: Buffer) => {
    err = (err + b.toString()).slice(-4000);
  });
  return new Promise((resolve, reject) => {
    if (ready === null) {
      setTimeout(() => resolve(p), 500);
      return;
    }
    let out = '';
    p.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes(ready)) resolve(p);
    });
    p.once('exit', (c) => reject(new Error(`${argv.join(' ')} exited ${c}: ${err}`)));
  });
}

function load(bin: string, mode: string, host: string, port: number, ...rest: Array<string | number>): Json {
  execFileSync('ip', ['netns', 'exec', NS.node, 'conntrack', '-F'], { stdio: 'ignore' });
  const out = sh(NS.cli, 'taskset', '-c', '0', bin, mode, host, String(port), ...rest.map(String));
  return JSON.parse(out.trim().split('\n').at(-1)!) as Json;
}

/** CPU seconds (user + system) the process has used so far, from /proc/<pid>/stat. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

function rssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

/** Hold 1,000 ping-pong connections for `secs` while sampling the RSS of pid each second. */
async function memoryUnderLoad(
  bin: string,
  host: string,
  port: number,
  pid: number,
  secs: number,
  n: number,
): Promise<{ samples: number[]; load: Json }> {
  const samples: number[] = [];
  const p = spawn(
    'ip',
    ['netns', 'exec', NS.cli, 'taskset', '-c', '0', bin, 'hold', host, String(port), String(secs), String(n)],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  trackChild(p.pid);
  let out = '';
  p.stdout.on('data', (b: Buffer) => {
    out += b.toString();
  });
  const timer = setInterval(() => samples.push(rssKiB(pid)), 1000);
  const code = await new Promise<number | null>((r) => p.once('exit', r));
  clearInterval(timer);
  if (code !== 0) throw new Error(`hold exited ${code}`);
  return { samples, load: JSON.parse(out.trim().split('\n').at(-1)!) as Json };
}

function ensureHaproxy(): boolean {
  try {
    execFileSync('haproxy', ['-v'], { stdio: 'ignore' });
    return true;
  } catch {
    /* install */
  }
  try {
    execFileSync('apt-get', ['install', '-y', '-qq', 'haproxy'], {
      stdio: 'ignore',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
    execFileSync('haproxy', ['-v'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function haproxyConfig(): string {
  const listens = [80, 81, 82].map(
    (p) => `listen p${p}\n  bind ${NODE_CLI_SIDE}:${9000 + p}\n  server b ${BACKEND}:${8000 + p}\n`,
  );
  return [
    'global',
    '  nbthread 1',
    '  maxconn 8000',
    'defaults',
    '  mode tcp',
    '  timeout connect 5s',
    '  timeout client 60s',
    '  timeout server 60s',
    '',
    ...listens,
  ].join('\n');
}

interface PathResult {
  name: string;
  rate: Json;
  bulk: Json;
  paced?: Json;
}

async function main(): Promise<void> {
  if (process.argv.includes('--child')) return child();
  const seconds = arg('seconds', 5);
  const holdSecs = arg('hold', 20);
  const conc = arg('conc', 64);
  mkdirSync(OUT, { recursive: true });
  const bin = join(OUT, 'usload');
  execFileSync('gcc', ['-O2', '-o', bin, SRC_C]);
  const haveHaproxy = ensureHaproxy();
  process.once('exit', teardown);
  process.once('SIGINT', () => {
    teardown();
    process.exit(130);
  });
  buildNamespaces();

  await startPinned(NS.srv, 0, [bin, 'server', BACKEND], 'ready');
  // KPT_US_RELAY_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=bench/out/prof") goes to the relay's node.
  const nodeArgs = (process.env['KPT_US_RELAY_NODE_ARGS'] ?? '').split(' ').filter(Boolean);
  const selfArgv = [
    process.execPath,
    ...nodeArgs,
    ...(import.meta.url.endsWith('.ts') ? ['--import', 'tsx'] : []),
    fileURLToPath(import.meta.url),
    '--child',
  ];
  // KPT_US_RELAY_WRAP (e.g. "strace -c -f -o /tmp/relay.strace") prefixes the relay's command line.
  const wrap = (process.env['KPT_US_RELAY_WRAP'] ?? '').split(' ').filter(Boolean);
  const relay = await startPinned(NS.node, 1, [...wrap, ...selfArgv], 'ready');
  let haproxy: ChildProcess | undefined;
  if (haveHaproxy) {
    const cfg = join(OUT, `tmp-haproxy-${process.pid}.cfg`);
    tmpFiles.push(cfg);
    writeFileSync(cfg, haproxyConfig());
    haproxy = await startPinned(NS.node, 1, ['haproxy', '-f', cfg, '-db'], null);
  }

  const paths: Array<{ name: string; host: string; base: number }> = [
    { name: 'direct', host: BACKEND, base: 8000 },
    { name: 'kernel DNAT', host: VIP_DNAT, base: 0 },
    ...(haproxy ? [{ name: 'HAProxy', host: NODE_CLI_SIDE, base: 9000 }] : []),
    { name: 'userspace relay', host: VIP_RELAY, base: 0 },
  ];
  // --paths relay,haproxy (substrings of the names) runs a subset: for quick experiments (ratios need all four).
  const only = process.argv.includes('--paths')
    ? process.argv[process.argv.indexOf('--paths') + 1]!.toLowerCase().split(',')
    : null;
  if (only) paths.splice(0, paths.length, ...paths.filter((p) => only.some((o) => p.name.toLowerCase().includes(o))));
  const results: PathResult[] = [];
  for (const p of paths) {
    // CPU time of the proxy process per connection / per GB: robust against other load on the machine.
    const pid = p.name === 'HAProxy' ? haproxy?.pid : p.name === 'userspace relay' ? relay.pid : undefined;
    const c0 = pid ? cpuSeconds(pid) : 0;
    const rate = load(bin, 'rate', p.host, p.base + 80, seconds, conc);
    const c1 = pid ? cpuSeconds(pid) : 0;
    const bulk = load(bin, 'bulk', p.host, p.base + 82, seconds);
    const c2 = pid ? cpuSeconds(pid) : 0;
    if (pid) {
      // rate['conns'] counts only the measured window (after the warm-up): scale by the whole run.
      rate['cpuUsPerConn'] = ((c1 - c0) * 1e6) / (rate['conns']! * ((seconds + 0.5) / seconds));
      bulk['cpuSecPerGB'] = (c2 - c1) / ((bulk['bytes']! * ((seconds + 1) / seconds)) / 1e9);
    }
    results.push({ name: p.name, rate, bulk });
    const cpu = pid
      ? `  [proxy CPU ${rate['cpuUsPerConn']!.toFixed(1)} us/conn, ${bulk['cpuSecPerGB']!.toFixed(3)} s/GB]`
      : '';
    console.log(
      `${p.name.padEnd(16)} ${rate['rate']!.toFixed(0).padStart(7)} conn/s (errors ${rate['errors']})  bulk ${bulk['gbps']!.toFixed(2)} Gbit/s${cpu}`,
    );
  }
  if (only) {
    relay.stdin!.end();
    await new Promise((r) => relay.once('exit', r));
    process.exit(0);
  }
  const relayMax = results.find((r) => r.name === 'userspace relay')!.rate['rate']!;
  const half = Math.round(relayMax / 2);
  for (const [i, p] of paths.entries()) {
    const paced = load(bin, 'paced', p.host, p.base + 80, seconds, half);
    results[i]!.paced = paced;
    console.log(
      `${p.name.padEnd(16)} at ${half} conn/s: p50 ${paced['p50_us']} us  p99 ${paced['p99_us']} us (done ${paced['conns']}, errors ${paced['errors']})`,
    );
  }
  if (process.argv.includes('--quick')) {
    relay.stdin!.end();
    await new Promise((r) => relay.once('exit', r));
    process.exit(0);
  }
  const memRelay = await memoryUnderLoad(bin, VIP_RELAY, 81, relay.pid!, holdSecs, 1000);
  console.log(
    `relay RSS with 1000 ping-pong connections (MiB/s): ${memRelay.samples.map((k) => (k / 1024).toFixed(1)).join(' ')}; ${memRelay.load['rate']} round trips/s`,
  );
  const memHa = haproxy ? await memoryUnderLoad(bin, NODE_CLI_SIDE, 9081, haproxy.pid!, holdSecs, 1000) : null;
  if (memHa)
    console.log(
      `HAProxy RSS (MiB/s): ${memHa.samples.map((k) => (k / 1024).toFixed(1)).join(' ')}; ${memHa.load['rate']} round trips/s`,
    );

  report(results, half, memRelay, memHa);
  relay.stdin!.end();
  await new Promise((r) => relay.once('exit', r));
  // The backend and HAProxy run until killed: teardown (on 'exit') stops them and removes the namespaces.
  process.exit(0);
}

function report(
  results: PathResult[],
  half: number,
  memRelay: { samples: number[]; load: Json },
  memHa: { samples: number[]; load: Json } | null,
): void {
  const get = (n: string) => results.find((r) => r.name === n);
  const direct = get('direct')!;
  const relay = get('userspace relay')!;
  const ha = get('HAProxy');
  const dnat = get('kernel DNAT')!;
  const steady = memRelay.samples.slice(Math.min(3, memRelay.samples.length - 1));
  const ratios = {
    connRateVsHAProxy: ha ? relay.rate['rate']! / ha.rate['rate']! : null,
    connRateVsDirect: relay.rate['rate']! / direct.rate['rate']!,
    connRateVsDNAT: relay.rate['rate']! / dnat.rate['rate']!,
    bulkVsDirect: relay.bulk['gbps']! / direct.bulk['gbps']!,
    bulkVsDNAT: relay.bulk['gbps']! / dnat.bulk['gbps']!,
    bulkVsHAProxy: ha ? relay.bulk['gbps']! / ha.bulk['gbps']! : null,
    addedP99UsAtHalfRate: relay.paced!['p99_us']! - direct.paced!['p99_us']!,
    addedP99UsDNAT: dnat.paced!['p99_us']! - direct.paced!['p99_us']!,
    addedP99UsHAProxy: ha ? ha.paced!['p99_us']! - direct.paced!['p99_us']! : null,
    cpuPerConnVsHAProxy: ha ? relay.rate['cpuUsPerConn']! / ha.rate['cpuUsPerConn']! : null,
    cpuPerGBVsHAProxy: ha ? relay.bulk['cpuSecPerGB']! / ha.bulk['cpuSecPerGB']! : null,
    relayRssMiBMin: Math.min(...steady) / 1024,
    relayRssMiBMax: Math.max(...steady) / 1024,
  };
  console.log('\nratios:');
  for (const [k, v] of Object.entries(ratios)) console.log(`  ${k.padEnd(24)} ${v === null ? 'n/a' : v.toFixed(2)}`);
  console.log(
    `targets: conn rate >= 0.6x HAProxy: ${ratios.connRateVsHAProxy === null ? 'n/a' : ratios.connRateVsHAProxy >= 0.6}; bulk >= 0.5x direct: ${ratios.bulkVsDirect >= 0.5}; added p99 < 1 ms at ${half}/s: ${ratios.addedP99UsAtHalfRate < 1000}; memory flat (steady-state max/min ${(ratios.relayRssMiBMax / ratios.relayRssMiBMin).toFixed(2)})`,
  );
  const json = {
    when: new Date().toISOString(),
    cpus: 'relay/HAProxy on CPU 1, client+backend on CPU 0',
    halfRate: half,
    results,
    ratios,
    memory: {
      relayKiB: memRelay.samples,
      relayLoad: memRelay.load,
      haproxyKiB: memHa?.samples ?? null,
      haproxyLoad: memHa?.load ?? null,
    },
  };
  writeFileSync(join(OUT, 'userspace-relay.json'), JSON.stringify(json, null, 2));
  const names = results.map((r) => r.name);
  const rel = (f: (r: PathResult) => number) => results.map((r) => f(r) / f(direct));
  writeChart(join(OUT, 'userspace-relay'), {
    title: 'userspace relay vs kernel DNAT vs HAProxy (relative to direct; p99 = latency, lower is better)',
    yLabel: 'x direct',
    series: names,
    groups: [
      { label: 'conn/s', values: rel((r) => r.rate['rate']!) },
      { label: 'bulk Gbit/s', values: rel((r) => r.bulk['gbps']!) },
      { label: `p99 @ ${half}/s`, values: rel((r) => r.paced!['p99_us']!) },
    ],
  });
  writeChart(join(OUT, 'userspace-relay-memory'), {
    title: 'RSS with 1,000 open ping-pong connections',
    yLabel: 'MiB',
    series: ['userspace relay', ...(memHa ? ['HAProxy'] : [])],
    groups: memRelay.samples.map((k, i) => ({
      label: `${i + 1}s`,
      values: [k / 1024, ...(memHa ? [(memHa.samples[i] ?? 0) / 1024] : [])],
    })),
  });
  console.log(`wrote ${join(OUT, 'userspace-relay.json')} and .png charts`);
}

main().catch((err: unknown) => {
  console.error(err);
  teardown();
  process.exit(1);
});
