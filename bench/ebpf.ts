// Benchmark (never a test): the ebpf mode beside the iptables and nftables
// modes, each programmed by its real dataplane class, and beside no proxy at
// all (`direct`), on one set of namespaces per mode:
//
//   cli 10.0.1.2 --veth-- node 10.0.1.1 | 10.0.2.1 --veth-- srv 10.0.2.2
//   ext 10.0.3.2 --veth-- node 10.0.3.1
//
// The node namespace holds N Services (one endpoint each, never used) plus
// the measured one, ClusterIP 10.96.0.10:80/81/82 -> 10.0.2.2:8080/8081/8082,
// NodePorts 30080/30081/30082, named so that it comes last (iptables walks
// every other Service's rule before it). Two paths: `clusterip`, cli (a
// local pod: DNAT only) to the ClusterIP; `nodeport`, ext (outside the
// cluster: DNAT and masquerade) to the node's 10.0.3.1 and the NodePort.
// `direct` programs nothing: its clients connect to 10.0.2.2:8080 itself,
// routed by the node, the floor under every mode. `directnat` is `direct`
// with the ebpf mode's masquerade table loaded on the node: the floor of a
// node where some NAT table makes conntrack follow every flow (any CNI that
// masquerades has one), without a Service rule or a BPF program. `ebpfsock` is ebpf mode
// with socket-level balancing (--ebpf-socket-lb-cgroup) for a cgroup v2
// directory the benchmark makes (kpt-ebpfb-<pid>-sock, never the machine's
// cgroup root): the cli path's client runs in it, as a pod would under the
// DaemonSet's ebpf patch; the ext client is outside the node, so the NodePort
// path is the tc path there too. `ebpfxdp` is ebpf mode with the XDP fast
// path (--ebpf-xdp=auto) on the node's uplink towards ext (its node IP is
// 10.0.3.1): it changes only the nodeport path. XDP leaves packets whose
// checksum the sender left to the device (CHECKSUM_PARTIAL) to tc, and a
// veth peer's packets are such packets, so with ebpfxdp among the modes
// every mode's ext sends full checksums (checksum offload off on its veth,
// as packets from a real wire arrive; --ext-offload on|off overrides).
// --etp local makes the measured Service externalTrafficPolicy: Local with
// its endpoint on the node (the nodeport path is then DNAT only; XDP
// balances its connections), cluster (the default) masquerades (XDP
// balances those too and sets up their masquerade). Client and backend are
// bench/userspace-relay.c (usload). On each path:
//   * connection rate: closed loop, 64 concurrent, one 64 B request each,
//     with the CPU time per connection of the client and server processes
//     (user + system; without IRQ time accounting the kernel charges the
//     packet work it does in their context, veth, tc and netfilter hooks,
//     to their system time) and of the whole machine (/proc/stat, which
//     counts everyone else's work too);
//   * connect latency: open loop at --paced conn/s (default 1000), p50/p99 connect-to-response;
//   * bulk: one connection writing 256 KiB chunks to the sink (Gbit/s);
//   * cold sync: the first full sync of --cold Services (ebpf: programs already
//     loaded and attached, that one-time start reported apart), the median of
//     --cold-reps fresh processes;
//   * one-endpoint change: a partial sync adding one endpoint to one Service
//     of --change Services (median of --changes), and its map writes.
// Every mode's path is set up at once for a size and the measurements take
// turns, so load swings on a shared machine hit every mode alike.
// Prints tables and writes bench/out/ebpf.{json,svg,png} (+ -nodeport, -cpu,
// -sync).
//
//   node --import tsx bench/ebpf.ts [--sizes 0,10000,40000] [--modes ebpf,ebpfsock,iptables,nftables,direct(,directnat,ebpfxdp)]
//        [--paths clusterip,nodeport] [--etp cluster|local] [--ext-offload on|off]
//        [--seconds 3] [--reps 3] [--paced 1000] [--cold 10000] [--cold-reps 1] [--change 20000] [--changes 15]
//        [--syncs no] [--flat no]
//
// --flat (default yes): after the per-size runs, ebpf at every size again, the
// sizes taking turns, so that its flatness from 0 to 40k Services is read
// from one run rather than from runs minutes apart on a shared machine.
//
// Namespaces kpt-ebpfb-<pid>-<rand>-{cli,node,srv,ext} are removed on exit and
// SIGINT; the ebpf child keeps its bpf filesystem in a private mount
// namespace that ends with it.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import * as readline from 'node:readline';
import type { Dataplane, SyncState } from '../src/core/types.js';
import { deleteNamespaceSync, trackChild, trackNamespace, untrackNamespace } from '../test/netns/cleanup.js';
import { masqueradeTable } from '../src/dataplane/ebpf/masq.js';
import * as L from '../src/dataplane/ebpf/layout.js';
import { writeChart } from './lib/chart.js';
import { BACKEND, EXT_CLIENT, NODE_EXT, NODE_PORT_BASE, PATH_CONFIG, VIP } from './lib/ebpfpath.js';
import { buildState, withExtraEndpoint } from './lib/ebpfstate.js';

const here = dirname(fileURLToPath(import.meta.url));
const OUT = join(here, 'out');
type Mode = 'ebpf' | 'ebpfsock' | 'ebpfxdp' | 'iptables' | 'nftables' | 'direct' | 'directnat';
type ProxyMode = Exclude<Mode, 'direct' | 'directnat'>;
/** No proxy: the client connects to the endpoint itself (directnat: with the ebpf mode's masquerade table on the node). */
const isDirect = (m: Mode): m is 'direct' | 'directnat' => m === 'direct' || m === 'directnat';
type PathKind = 'clusterip' | 'nodeport';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
}
const num = (name: string, dflt: number) => Number(arg(name, String(dflt)));
const PATHS = arg('paths', 'clusterip,nodeport').split(',') as PathKind[];
const isEbpf = (m: Mode): boolean => m === 'ebpf' || m === 'ebpfsock' || m === 'ebpfxdp';
const ETP_LOCAL = arg('etp', 'cluster') === 'local';

/** The ebpfsock clients' cgroup: made by the benchmark under the cgroup v2 mount, removed at exit. */
const SOCK_CGROUP = `${existsSync('/sys/fs/cgroup/unified/cgroup.procs') ? '/sys/fs/cgroup/unified' : '/sys/fs/cgroup'}/kpt-ebpfb-${process.pid}-sock`;

// ---------------- the node side: a dataplane fed SyncStates ----------------

const CONFIG = PATH_CONFIG;

/** start(): the ebpf dataplane's program load, apart from its first sync. */
async function makeDataplane(mode: ProxyMode): Promise<Dataplane & { start?(): Promise<void> }> {
  if (isEbpf(mode)) {
    const { EbpfDataplane, DEFAULT_EBPF_OPTIONS } = await import('../src/platform/ebpf/dataplane.js');
    // ebpfsock: the cgroup the parent made and named (--cgroup); plain ebpf leaves socket balancing off.
    const socketLBCgroup = mode === 'ebpfsock' ? arg('cgroup', '') : '';
    if (mode === 'ebpfsock' && !socketLBCgroup.includes('/kpt-ebpfb-')) throw new Error('ebpfsock needs --cgroup');
    return new EbpfDataplane({
      config: CONFIG,
      ebpf: {
        ...DEFAULT_EBPF_OPTIONS,
        pinRoot: '/sys/fs/bpf/kpt-bench',
        socketLBCgroup,
        xdp: mode === 'ebpfxdp' ? 'auto' : 'off',
      },
    });
  }
  const { realClock } = await import('../src/platform/clock.js');
  if (mode === 'nftables') {
    const { NftablesDataplane } = await import('../src/platform/nftables/dataplane.js');
    return new NftablesDataplane({ config: CONFIG, clock: realClock });
  }
  const { IptablesDataplane, procSysctl } = await import('../src/platform/iptables/index.js');
  const { hostRunner } = await import('../src/platform/exec.js');
  return new IptablesDataplane({
    config: CONFIG,
    run: hostRunner,
    sysctl: procSysctl,
    clock: realClock,
    syncPeriodMs: 30_000,
    onEvent: () => {},
  });
}

/** The child: one dataplane in the node namespace, driven by JSON lines on stdin. */
async function child(mode: ProxyMode): Promise<void> {
  const dp = await makeDataplane(mode);
  let state: SyncState | null = null;
  const say = (o: unknown) => process.stdout.write(JSON.stringify(o) + '\n');
  const timed = async (s: SyncState) => {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const out = await dp.sync(s);
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(c0);
    return { ms, cpuMs: (cpu.user + cpu.system) / 1000, counters: out.counters ?? {} };
  };
  say({ ready: true });
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const req = JSON.parse(line) as {
      op: string;
      n?: number;
      changes?: number;
      nodePorts?: boolean;
      etpLocal?: boolean;
    };
    if (req.op === 'warm') {
      // ebpf: load and attach the programs (one-time start cost) before the timed cold sync,
      // which is then the datapath's first plan, as a proxy's first sync is.
      const t0 = performance.now();
      await dp.start?.();
      say({ ms: performance.now() - t0 });
    } else if (req.op === 'sync') {
      state = buildState(req.n!, { nodePorts: req.nodePorts ?? false, etpLocal: req.etpLocal ?? false });
      // The node's IP as the Node object gives it: where ebpfxdp's XDP program goes (its uplink to ext).
      state = { ...state, node: { ...state.node, nodeIPs: { IPv4: NODE_EXT } } };
      say(await timed({ ...state, fullSync: true }));
    } else if (req.op === 'changes') {
      const out = [];
      for (let r = 0; r < req.changes!; r++) {
        const next = withExtraEndpoint(state!, (r * 7919) % req.n!, r);
        out.push(await timed(next));
        state = next;
      }
      say({ changes: out });
    } else if (req.op === 'stats') {
      say(programStats());
    } else if (req.op === 'exit') {
      dp.close?.();
      say({ bye: true });
      process.exit(0);
    }
  }
}

/** The ebpf child's kpt_stats (src/bpf/abi.h), summed over CPUs: connections balanced by tc, at the socket, in XDP, and packets dropped. */
function programStats(): ProgramStats {
  type Entry = { key: unknown; values: Array<{ value: unknown }> };
  const root = '/sys/fs/bpf/kpt-bench';
  const v = readdirSync(root).find((d) => /^v\d+$/.test(d));
  const dump = JSON.parse(
    execFileSync('bpftool', ['-j', 'map', 'dump', 'pinned', `${root}/${v}/maps/kpt_stats`], { encoding: 'utf8' }),
  ) as Array<{ formatted?: Entry } & Entry>;
  // With BTF, bpftool puts the decoded entry under `formatted` beside the raw bytes.
  const entries = dump.map((e) => e.formatted ?? e);
  const sum = (k: number) => (entries.find((e) => e.key === k)?.values ?? []).reduce((a, x) => a + Number(x.value), 0);
  return {
    tcNew: sum(L.STAT.new),
    socket: sum(L.STAT.sock),
    xdpNew: sum(L.STAT.xdpNew),
    xdpHit: sum(L.STAT.xdpHit),
    dropped: sum(L.STAT.drop),
  };
}
interface ProgramStats {
  tcNew: number;
  socket: number;
  xdpNew: number;
  xdpHit: number;
  /** STAT_DROP: a new connection's packet dropped (no endpoint to DROP, or no free masquerade port). */
  dropped: number;
}

// ---------------- the parent: namespaces, traffic, tables ----------------

function sh(args: string[], input?: string): string {
  return execFileSync(args[0]!, args.slice(1), { encoding: 'utf8', maxBuffer: 1 << 26, ...(input ? { input } : {}) });
}

interface Net {
  readonly cli: string;
  readonly node: string;
  readonly srv: string;
  readonly ext: string;
}

function makeNet(): Net {
  const p = `kpt-ebpfb-${process.pid}-${randomBytes(2).toString('hex')}-`;
  const net = { cli: `${p}cli`, node: `${p}node`, srv: `${p}srv`, ext: `${p}ext` };
  for (const ns of Object.values(net)) {
    trackNamespace(ns);
    sh(['ip', 'netns', 'add', ns]);
    sh(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
  }
  sh(['ip', '-n', net.node, 'link', 'add', 'c0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', net.cli]);
  sh(['ip', '-n', net.node, 'link', 'add', 's0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', net.srv]);
  sh(['ip', '-n', net.node, 'link', 'add', 'e0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', net.ext]);
  sh(['ip', '-n', net.node, 'addr', 'add', '10.0.1.1/24', 'dev', 'c0']);
  sh(['ip', '-n', net.node, 'addr', 'add', '10.0.2.1/24', 'dev', 's0']);
  sh(['ip', '-n', net.node, 'addr', 'add', `${NODE_EXT}/24`, 'dev', 'e0']);
  sh(['ip', '-n', net.cli, 'addr', 'add', '10.0.1.2/24', 'dev', 'eth0']);
  sh(['ip', '-n', net.srv, 'addr', 'add', `${BACKEND}/24`, 'dev', 'eth0']);
  sh(['ip', '-n', net.ext, 'addr', 'add', `${EXT_CLIENT}/24`, 'dev', 'eth0']);
  for (const [ns, dev] of [
    [net.node, 'c0'],
    [net.node, 's0'],
    [net.node, 'e0'],
    [net.cli, 'eth0'],
    [net.srv, 'eth0'],
    [net.ext, 'eth0'],
  ] as const)
    sh(['ip', '-n', ns, 'link', 'set', dev, 'up']);
  sh(['ip', '-n', net.cli, 'route', 'add', 'default', 'via', '10.0.1.1']);
  sh(['ip', '-n', net.srv, 'route', 'add', 'default', 'via', '10.0.2.1']);
  sh(['ip', '-n', net.ext, 'route', 'add', 'default', 'via', NODE_EXT]);
  sh(['ip', 'netns', 'exec', net.node, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
  const xdpRun = arg('modes', '').split(',').includes('ebpfxdp');
  if (arg('ext-offload', xdpRun ? 'off' : 'on') === 'off')
    sh(['ip', 'netns', 'exec', net.ext, 'ethtool', '-K', 'eth0', 'tx', 'off']);
  return net;
}

function dropNet(net: Net): void {
  for (const ns of Object.values(net)) {
    deleteNamespaceSync(ns);
    untrackNamespace(ns);
  }
}

class Child {
  private readonly lines: AsyncIterator<string>;
  private constructor(readonly proc: ChildProcess) {
    this.lines = readline.createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  }
  static async start(mode: ProxyMode, net: Net): Promise<Child> {
    const node = [process.execPath, ...process.execArgv, fileURLToPath(import.meta.url), '--child', mode];
    if (mode === 'ebpfsock') node.push('--cgroup', SOCK_CGROUP);
    const argv = isEbpf(mode)
      ? [
          'unshare',
          '--mount',
          '--propagation',
          'private',
          'sh',
          '-c',
          `mount -t bpf bpf /sys/fs/bpf && exec nsenter --net=/run/netns/${net.node} -- "$@"`,
          'sh',
          ...node,
        ]
      : ['ip', 'netns', 'exec', net.node, ...node];
    const proc = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
    trackChild(proc.pid);
    const c = new Child(proc);
    await c.read();
    return c;
  }
  async ask<T>(req: object): Promise<T> {
    this.proc.stdin!.write(JSON.stringify(req) + '\n');
    return this.read() as Promise<T>;
  }
  private async read(): Promise<unknown> {
    const r = await this.lines.next();
    if (r.done) throw new Error('bench child exited');
    return JSON.parse(r.value);
  }
  async stop(): Promise<void> {
    await this.ask({ op: 'exit' }).catch(() => {});
    await new Promise((r) => (this.proc.exitCode !== null ? r(null) : this.proc.once('exit', r)));
  }
}

function usload(): string {
  const bin = join(OUT, 'usload');
  mkdirSync(OUT, { recursive: true });
  sh(['gcc', '-O2', '-o', bin, join(here, 'userspace-relay.c')]);
  return bin;
}

/** Run argv in namespace ns (and, with cgroup, in that cgroup from its first instruction). */
function inNs(ns: string, argv: string[], cgroup?: string): Record<string, number> {
  const run = cgroup
    ? ['sh', '-c', `echo $$ > ${cgroup}/cgroup.procs && exec ip netns exec "$0" "$@"`, ns, ...argv]
    : ['ip', 'netns', 'exec', ns, ...argv];
  return JSON.parse(sh(run).trim().split('\n').pop()!) as Record<string, number>;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface TrafficRow {
  mode: Mode;
  path: PathKind;
  services: number;
  rate: number;
  p50: number;
  p99: number;
  gbps: number;
  errors: number;
  /**
   * CPU per connection of the rate run, µs: the client's and the server's
   * processes (user + system; the kernel's packet work done in their
   * context counts as their system time), that system part, and every
   * CPU's busy time (/proc/stat: on a machine others load too, an upper bound).
   */
  cpuUs: number;
  kernelUs: number;
  machineUs: number;
  /** Load average (1 min) when the row's last turn ended. */
  load: number;
}

const TICK_US = 10_000; // USER_HZ is 100 on Linux

/** /proc/stat's first line: busy jiffies of all CPUs together. */
function machineJiffies(): number {
  const f = sh(['head', '-1', '/proc/stat']).trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq] = f as [number, number, number, number, number, number, number];
  return user + nice + system + irq + softirq;
}

/** user and system jiffies: of a process (its /proc/<pid>/stat), or of our waited-for children. */
function procJiffies(pid: number | 'children'): { user: number; system: number } {
  const stat = readFileSync(`/proc/${pid === 'children' ? 'self' : pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After the ")": state is field 3 of the line, utime/stime 14/15, cutime/cstime 16/17.
  const at = pid === 'children' ? 13 : 11;
  return { user: Number(f[at]), system: Number(f[at + 1]) };
}

/** One mode's namespaces: the node programmed with n Services (nothing for direct), the server up. */
interface Path {
  readonly mode: Mode;
  readonly net: Net;
  readonly server: ChildProcess;
  readonly child: Child | null;
}

/** Where a path's client runs (namespace, and for ebpfsock's pod client its cgroup) and what it connects to. */
function endpoints(
  mode: Mode,
  path: PathKind,
  net: Net,
): { ns: string; cgroup?: string; addr: string; rr: number; sink: number } {
  const ns = path === 'clusterip' ? net.cli : net.ext;
  if (isDirect(mode)) return { ns, addr: BACKEND, rr: 8080, sink: 8082 };
  return path === 'clusterip'
    ? { ns, ...(mode === 'ebpfsock' ? { cgroup: SOCK_CGROUP } : {}), addr: VIP, rr: 80, sink: 82 }
    : { ns, addr: NODE_EXT, rr: NODE_PORT_BASE, sink: NODE_PORT_BASE + 2 };
}

async function openPath(mode: Mode, n: number, bin: string): Promise<Path> {
  const net = makeNet();
  const server = spawn('ip', ['netns', 'exec', net.srv, bin, 'server', BACKEND], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  trackChild(server.pid);
  await new Promise((r) => server.stdout!.once('data', r));
  if (mode === 'directnat')
    // What a node pays when any NAT table is loaded (every CNI that masquerades has one): conntrack on every
    // flow and the nat hooks, without a Service rule or a BPF program.
    sh(['ip', 'netns', 'exec', net.node, 'nft', '-f', '-'], masqueradeTable('IPv4', 0x4000).toString());
  if (isDirect(mode)) return { mode, net, server, child: null };
  const child = await Child.start(mode, net);
  if (isEbpf(mode)) await child.ask({ op: 'warm' });
  await child.ask({ op: 'sync', n, nodePorts: true, etpLocal: ETP_LOCAL });
  return { mode, net, server, child };
}

async function closePath(p: Path): Promise<void> {
  await p.child?.stop();
  p.server.kill('SIGKILL');
  dropNet(p.net);
}

/**
 * Every target's path (a mode at a number of Services) exists at once and
 * the measurements take turns (A, B, C, then A again...), so a load swing on
 * this shared machine hits every target alike; each figure is the median
 * over --reps turns. The modes at one size are one run; ebpf at every size
 * is another (--flat), which is what "flat from 0 to 40k" compares.
 */
async function traffic(targets: ReadonlyArray<{ mode: Mode; n: number }>, bin: string): Promise<TrafficRow[]> {
  const paths: Array<Path & { n: number }> = [];
  const load = () => Number(sh(['cat', '/proc/loadavg']).split(' ')[0]);
  try {
    for (const t of targets) paths.push({ ...(await openPath(t.mode, t.n, bin)), n: t.n });
    const secs = String(num('seconds', 3));
    const acc = paths.map(() =>
      PATHS.map(() => ({
        rate: [] as number[],
        p50: [] as number[],
        p99: [] as number[],
        gbps: [] as number[],
        cpu: [] as number[],
        kernel: [] as number[],
        machine: [] as number[],
        errors: 0,
        load: 0,
      })),
    );
    for (let rep = 0; rep < num('reps', 3); rep++) {
      PATHS.forEach((kind, k) => {
        paths.forEach((p, i) => {
          const e = endpoints(p.mode, kind, p.net);
          const a = acc[i]![k]!;
          const m0 = machineJiffies();
          const c0 = procJiffies('children');
          const s0 = procJiffies(p.server.pid!);
          const r = inNs(e.ns, [bin, 'rate', e.addr, String(e.rr), secs, '64'], e.cgroup);
          const s1 = procJiffies(p.server.pid!);
          const c1 = procJiffies('children');
          const m1 = machineJiffies();
          const per = (j: number) => (j * TICK_US) / Math.max(1, r['conns']!);
          const system = c1.system - c0.system + s1.system - s0.system;
          a.rate.push(r['rate']!);
          a.cpu.push(per(c1.user - c0.user + s1.user - s0.user + system));
          a.kernel.push(per(system));
          a.machine.push(per(m1 - m0));
          a.errors += r['errors']!;
        });
        paths.forEach((p, i) => {
          const e = endpoints(p.mode, kind, p.net);
          const l = inNs(e.ns, [bin, 'paced', e.addr, String(e.rr), secs, String(num('paced', 1000))], e.cgroup);
          const a = acc[i]![k]!;
          a.p50.push(l['p50_us']!);
          a.p99.push(l['p99_us']!);
          a.errors += l['errors']!;
        });
        paths.forEach((p, i) => {
          const e = endpoints(p.mode, kind, p.net);
          acc[i]![k]!.gbps.push(inNs(e.ns, [bin, 'bulk', e.addr, String(e.sink), secs], e.cgroup)['gbps']!);
          acc[i]![k]!.load = load();
        });
      });
    }
    return paths.flatMap((p, i) =>
      PATHS.map((kind, k) => {
        const a = acc[i]![k]!;
        return {
          mode: p.mode,
          path: kind,
          services: p.n,
          rate: median(a.rate),
          p50: median(a.p50),
          p99: median(a.p99),
          gbps: median(a.gbps),
          errors: a.errors,
          cpuUs: median(a.cpu),
          kernelUs: median(a.kernel),
          machineUs: median(a.machine),
          load: a.load,
        };
      }),
    );
  } finally {
    for (const p of paths) {
      // Which path balanced the connections: ebpfsock's ClusterIP clients at the socket, everything else at tc.
      const st = p.child && isEbpf(p.mode) ? await p.child.ask<ProgramStats>({ op: 'stats' }) : null;
      if (st)
        console.log(
          `${p.mode} at ${p.n} Services: ${st.socket} connections balanced at the socket, ${st.tcNew} by tc, ${st.xdpNew} in XDP (${st.xdpHit} packets translated in XDP), ${st.dropped} packets dropped`,
        );
      await closePath(p);
    }
  }
}

interface SyncRow {
  mode: ProxyMode;
  startMs: number | null;
  coldN: number;
  coldMs: number;
  coldCpuMs: number;
  changeN: number;
  changeMs: number;
  changeMaxMs: number;
  changeCpuMs: number;
  writes: number | null;
  /** ebpf: the cold sync's render and map-write parts (ms). */
  renderMs: number | null;
  applyMs: number | null;
}

type Timed = { ms: number; cpuMs: number; counters: Record<string, number> };
type Cold = { start: number | null; cold: Timed };

/** One cold sync of n Services in a fresh child (ebpf: programs loaded first, timed apart). */
async function coldOnce(mode: ProxyMode, n: number): Promise<Cold> {
  const net = makeNet();
  let child: Child | null = null;
  try {
    child = await Child.start(mode, net);
    const start = mode === 'ebpf' ? (await child.ask<{ ms: number }>({ op: 'warm' })).ms : null;
    const cold = await child.ask<Timed>({ op: 'sync', n });
    return { start, cold };
  } finally {
    await child?.stop();
    dropNet(net);
  }
}

async function syncs(mode: ProxyMode): Promise<SyncRow> {
  const coldN = num('cold', 10000);
  const changeN = num('change', 20000);
  // --cold-reps: that many fresh processes, medians (each figure on its own).
  const colds: Cold[] = [];
  for (let r = 0; r < num('cold-reps', 1); r++) colds.push(await coldOnce(mode, coldN));
  const med = (f: (c: Cold) => number | null | undefined) => {
    const xs = colds.map(f).filter((x): x is number => typeof x === 'number');
    return xs.length ? median(xs) : null;
  };
  const net = makeNet();
  let child: Child | null = null;
  try {
    child = await Child.start(mode, net);
    if (mode === 'ebpf') await child.ask({ op: 'warm' });
    await child.ask({ op: 'sync', n: changeN });
    const ch = await child.ask<{ changes: Timed[] }>({ op: 'changes', n: changeN, changes: num('changes', 15) });
    const ms = ch.changes.map((c) => c.ms);
    return {
      mode,
      startMs: med((c) => c.start),
      coldN,
      coldMs: med((c) => c.cold.ms)!,
      coldCpuMs: med((c) => c.cold.cpuMs)!,
      changeN,
      changeMs: median(ms),
      changeMaxMs: Math.max(...ms),
      changeCpuMs: median(ch.changes.map((c) => c.cpuMs)),
      writes: mode === 'ebpf' ? median(ch.changes.map((c) => c.counters['writes'] ?? 0)) : null,
      renderMs: mode === 'ebpf' ? med((c) => c.cold.counters['renderMs']) : null,
      applyMs: mode === 'ebpf' ? med((c) => c.cold.counters['applyMs']) : null,
    };
  } finally {
    await child?.stop();
    dropNet(net);
  }
}

async function main(): Promise<void> {
  const modes = arg('modes', 'ebpf,ebpfsock,iptables,nftables,direct').split(',') as Mode[];
  // ebpfsock's syncs are ebpf's (the same maps; the socket programs add no map work).
  const proxyModes = modes.filter((m): m is ProxyMode => !isDirect(m) && m !== 'ebpfsock');
  if (modes.includes('ebpfsock')) {
    mkdirSync(SOCK_CGROUP);
    process.on('exit', () => {
      if (existsSync(SOCK_CGROUP)) rmdirSync(SOCK_CGROUP); // empty: its clients have exited
    });
  }
  const sizes = arg('sizes', '0,10000,40000').split(',').map(Number);
  const bin = usload();
  const load = () => sh(['cat', '/proc/loadavg']).split(' ').slice(0, 3).join(' ');
  console.log(`load average at start: ${load()}`);
  const rows: TrafficRow[] = [];
  const say = (r: TrafficRow, what = '') =>
    console.log(
      `${r.mode.padEnd(8)} ${r.path.padEnd(9)} ${String(r.services).padStart(6)} Services${what}: ${r.rate.toFixed(0)} conn/s, p50 ${r.p50} us, p99 ${r.p99} us, bulk ${r.gbps.toFixed(2)} Gbit/s, cpu ${r.cpuUs.toFixed(0)} us/conn (kernel ${r.kernelUs.toFixed(0)}; machine ${r.machineUs.toFixed(0)}), errors ${r.errors} (load ${load()})`,
    );
  for (const n of sizes) {
    for (const r of await traffic(
      modes.map((mode) => ({ mode, n })),
      bin,
    )) {
      rows.push(r);
      say(r);
    }
  }
  const flatRows: TrafficRow[] = [];
  if (arg('flat', 'yes') !== 'no' && modes.includes('ebpf'))
    for (const r of await traffic(
      sizes.map((n) => ({ mode: 'ebpf' as Mode, n })),
      bin,
    )) {
      flatRows.push(r);
      say(r, ' (sizes interleaved)');
    }
  const syncRows: SyncRow[] = [];
  if (arg('syncs', 'yes') !== 'no')
    for (const mode of proxyModes) {
      const s = await syncs(mode);
      syncRows.push(s);
      console.log(
        `${mode.padEnd(8)} cold ${s.coldN}: ${s.coldMs.toFixed(1)} ms (cpu ${s.coldCpuMs.toFixed(1)}` +
          `${s.renderMs !== null && s.applyMs !== null ? `; render ${s.renderMs.toFixed(1)}, map writes ${s.applyMs.toFixed(1)}` : ''})` +
          `${s.startMs !== null ? ` [start ${s.startMs.toFixed(0)} ms]` : ''}; one-endpoint change at ${s.changeN}: ` +
          `median ${s.changeMs.toFixed(2)} ms, max ${s.changeMaxMs.toFixed(2)} ms, cpu ${s.changeCpuMs.toFixed(2)} ms` +
          `${s.writes !== null ? `, ${s.writes} map writes` : ''}`,
      );
    }
  console.log(`load average at end: ${load()}`);
  printTables(rows, syncRows, sizes, modes, flatRows);
  mkdirSync(OUT, { recursive: true });
  writeFileSync(join(OUT, 'ebpf.json'), JSON.stringify({ rows, flatRows, syncRows }, null, 2));
  const rateChart = (path: PathKind, file: string, what: string) =>
    writeChart(join(OUT, file), {
      title: `Connections per second ${what} (closed loop, 64 concurrent)`,
      yLabel: 'conn/s',
      series: modes,
      groups: sizes.map((n) => ({
        label: `${n} Services`,
        values: modes.map((m) => rows.find((r) => r.mode === m && r.path === path && r.services === n)?.rate ?? null),
      })),
    });
  const png = rateChart('clusterip', 'ebpf', 'through a ClusterIP');
  rateChart('nodeport', 'ebpf-nodeport', 'from outside to a NodePort');
  writeChart(join(OUT, 'ebpf-cpu'), {
    title: 'CPU per connection of client and server processes, kernel work in their context included (µs)',
    yLabel: 'µs per connection',
    series: modes,
    groups: sizes.flatMap((n) =>
      PATHS.map((path) => ({
        label: `${n} ${path}`,
        values: modes.map((m) => rows.find((r) => r.mode === m && r.path === path && r.services === n)?.cpuUs ?? null),
      })),
    ),
  });
  if (syncRows.length)
    writeChart(join(OUT, 'ebpf-sync'), {
      title: `Cold sync (${num('cold', 10000)}) and one-endpoint change (${num('change', 20000)}), wall ms`,
      yLabel: 'ms (log)',
      log: true,
      series: proxyModes,
      groups: [
        { label: 'cold sync', values: proxyModes.map((m) => syncRows.find((s) => s.mode === m)?.coldMs ?? null) },
        {
          label: 'one-endpoint change',
          values: proxyModes.map((m) => syncRows.find((s) => s.mode === m)?.changeMs ?? null),
        },
      ],
    });
  console.log(`wrote ${join(OUT, 'ebpf.json')}${png ? ` and ${png}` : ''}`);
}

function printTables(
  rows: TrafficRow[],
  syncRows: SyncRow[],
  sizes: number[],
  modes: Mode[],
  flatRows: TrafficRow[],
): void {
  for (const path of PATHS) {
    console.log(
      `\n${path}\n| Services | mode | conn/s | x iptables | x nftables | x direct | p50 us | p99 us | bulk Gbit/s | cpu us/conn | kernel us/conn | machine us/conn | load |`,
    );
    console.log('|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const n of sizes)
      for (const m of modes) {
        const at = (mode: Mode) => rows.find((x) => x.mode === mode && x.path === path && x.services === n);
        const r = at(m)!;
        const ratio = (to: Mode) => {
          const o = at(to);
          return o ? (r.rate / o.rate).toFixed(2) : '-';
        };
        console.log(
          `| ${n} | ${m} | ${r.rate.toFixed(0)} | ${ratio('iptables')} | ${ratio('nftables')} | ${ratio('direct')} | ${r.p50} | ${r.p99} | ${r.gbps.toFixed(2)} | ${r.cpuUs.toFixed(0)} | ${r.kernelUs.toFixed(0)} | ${r.machineUs.toFixed(0)} | ${r.load.toFixed(1)} |`,
        );
      }
  }
  if (flatRows.length) {
    console.log(
      '\n| Services (ebpf, sizes interleaved) | path | conn/s | x at 0 | p50 us | p99 us | bulk Gbit/s | cpu us/conn |',
    );
    console.log('|---:|---|---:|---:|---:|---:|---:|---:|');
    for (const r of flatRows) {
      const base = flatRows.find((b) => b.services === 0 && b.path === r.path) ?? r;
      console.log(
        `| ${r.services} | ${r.path} | ${r.rate.toFixed(0)} | ${(r.rate / base.rate).toFixed(2)} | ${r.p50} | ${r.p99} | ${r.gbps.toFixed(2)} | ${r.cpuUs.toFixed(0)} |`,
      );
    }
  }
  if (!syncRows.length) return;
  console.log(
    '\n| mode | cold sync (Services) | wall ms | cpu ms | one-endpoint change (Services) | median ms | max ms | cpu ms | writes |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const s of syncRows)
    console.log(
      `| ${s.mode} | ${s.coldN} | ${s.coldMs.toFixed(1)} | ${s.coldCpuMs.toFixed(1)} | ${s.changeN} | ${s.changeMs.toFixed(2)} | ${s.changeMaxMs.toFixed(2)} | ${s.changeCpuMs.toFixed(2)} | ${s.writes ?? '-'} |`,
    );
}

if (process.argv.includes('--child')) await child(arg('child', 'ebpf') as ProxyMode);
else await main();
