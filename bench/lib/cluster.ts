// One benchmark "cluster": a fresh network namespace kpt-<pid>-<rand>-bench
// holding the test API server (bench/lib/apihost.ts, seeded with N Services)
// and the REAL proxy binary (bin/kube-proxy-ts, from dist/), exactly as an
// operator starts it. The namespace and both processes are removed on
// dispose(), on exit and on Ctrl-C (test/netns/cleanup.ts).
//
// Also: the proxy's memory from /proc/<pid>/status, and a kernel monitor
// (`nft monitor new` in the namespace) that reports when an address first
// appears in a rule, for iptables (iptables-nft) and nftables mode alike.
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as readline from 'node:readline';
import {
  trackChild,
  trackNamespace,
  untrackChild,
  untrackNamespace,
  deleteNamespaceSync,
} from '../../test/netns/cleanup.js';
import { newPrefix } from '../../test/netns/names.js';
import { nsSpawn, REPO_ROOT, type NsProcess } from '../../test/netns/spawn.js';
import { BENCH_NODE, BENCH_NODE_IP } from './objects.js';

const MiB = 1024;

/** Build dist/ (the binary and the API host) once per benchmark run. */
export function buildDist(): void {
  const r = spawnSync('npx', ['tsc', '-p', join(REPO_ROOT, 'tsconfig.json')], { cwd: REPO_ROOT, stdio: 'inherit' });
  if (r.status !== 0) throw new Error('tsc failed');
}

export interface Memory {
  rssMiB: number;
  hwmMiB: number;
}

export function memoryOf(pid: number): Memory {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)?.[1] ?? NaN);
  return { rssMiB: kb('VmRSS') / MiB, hwmMiB: kb('VmHWM') / MiB };
}

/** CPU seconds (user + system) the process has used, from /proc/<pid>/stat: robust on a busy machine. */
export function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 (1-based), i.e. 11 and 12 after the command name.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Load average and CPU count, to print beside results (the machine is shared). */
export function loadNote(): string {
  const [a, b, c] = readFileSync('/proc/loadavg', 'utf8').split(' ');
  return `load ${a} ${b} ${c}`;
}

export class BenchCluster {
  private api!: NsProcess;
  private apiLines!: readline.Interface;
  private nextId = 1;
  private readonly waiting = new Map<number, (m: Record<string, unknown>) => void>();
  proxy: NsProcess | undefined;
  kubeconfig = '';
  /** How long the API host took to seed its store (ms). */
  seedMs = NaN;
  private readonly dir: string;

  private constructor(readonly ns: string) {
    this.dir = mkdtempSync(join(tmpdir(), `${ns}-`));
  }

  /** probes/probeIPs: Services whose endpoints are those real addresses (apihost.ts --probes). */
  static async start(opts: {
    services: number;
    endpoints: number;
    probes?: readonly number[];
    probeIPs?: readonly string[];
    /** apihost.ts --pace: initial events of a watch-list this many at a time. */
    pace?: number;
  }): Promise<BenchCluster> {
    const ns = `${newPrefix()}bench`;
    trackNamespace(ns);
    execFileSync('ip', ['netns', 'add', ns]);
    const c = new BenchCluster(ns);
    const ipn = (...a: string[]): void => void execFileSync('ip', ['-n', ns, ...a]);
    ipn('link', 'set', 'lo', 'up');
    ipn('link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1');
    ipn('link', 'set', 'eth1', 'up');
    ipn('addr', 'add', `${BENCH_NODE_IP}/24`, 'dev', 'eth0');
    ipn('link', 'set', 'eth0', 'up');
    c.api = nsSpawn(
      ns,
      [
        process.execPath,
        // Room for 100k Services and their slices (V8's default heap limit is about 4 GiB).
        '--max-old-space-size=12288',
        join(REPO_ROOT, 'dist/bench/lib/apihost.js'),
        '--dir',
        c.dir,
        '--services',
        String(opts.services),
        '--endpoints',
        String(opts.endpoints),
        ...(opts.pace ? ['--pace', String(opts.pace)] : []),
        ...(opts.probes?.length ? ['--probes', opts.probes.join(','), '--probe-ips', opts.probeIPs!.join(',')] : []),
      ],
      { pipeStdout: true },
    );
    c.apiLines = readline.createInterface({ input: c.api.child.stdout! });
    const ready = await new Promise<Record<string, unknown>>((res, rej) => {
      const t = setTimeout(() => rej(new Error(`API host did not start: ${c.api.log()}`)), 300_000);
      c.apiLines.once('line', (l) => {
        clearTimeout(t);
        res(JSON.parse(l) as Record<string, unknown>);
      });
      void c.api.exited.then((code) => rej(new Error(`API host exited ${code}: ${c.api.log()}`)));
    });
    c.kubeconfig = String(ready['kubeconfig']);
    c.seedMs = Number(ready['seedMs']);
    c.apiLines.on('line', (l) => {
      const m = JSON.parse(l) as Record<string, unknown>;
      const w = c.waiting.get(Number(m['id']));
      c.waiting.delete(Number(m['id']));
      w?.(m);
    });
    return c;
  }

  /** Send one command to the API host and wait for its answer. */
  command(cmd: string, args: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    return new Promise((res, rej) => {
      this.waiting.set(id, (m) => (m['ok'] ? res(m) : rej(new Error(`${cmd}: ${String(m['error'])}`))));
      this.api.child.stdin!.write(JSON.stringify({ id, cmd, ...args }) + '\n');
    });
  }

  /**
   * Start bin/kube-proxy-ts in the namespace with the operator's usual flags
   * plus `extra`. Executed as an operator's DaemonSet does (its `#!` line,
   * with the V8 flags it sets), unless `nodeArgs` is given: then as
   * `node <nodeArgs> bin/kube-proxy-ts`, which ignores that line (experiments
   * with other V8 flags). `enter` replaces `ip netns exec <ns>` (the ebpf
   * mode's bpffs: test/ebpf/bpfnode.ts).
   */
  startProxy(
    mode: string,
    extra: string[] = [],
    env: NodeJS.ProcessEnv = {},
    nodeArgs?: string[],
    enter?: readonly string[],
  ): NsProcess {
    const bin = join(REPO_ROOT, 'bin/kube-proxy-ts');
    const argv = [
      ...(nodeArgs ? [process.execPath, ...nodeArgs, bin] : [bin]),
      '--kubeconfig',
      this.kubeconfig,
      '--hostname-override',
      BENCH_NODE,
      '--proxy-mode',
      mode,
      '--cluster-cidr',
      '10.0.0.0/8',
      '--healthz-bind-address',
      '127.0.0.1:10256',
      '--metrics-bind-address',
      '127.0.0.1:10249',
      // nf_conntrack_max is global and read-only outside the root namespace.
      '--conntrack-max-per-core',
      '0',
      ...extra,
    ];
    this.proxy = nsSpawn(this.ns, argv, { env, ...(enter ? { enter } : {}) });
    return this.proxy;
  }

  /** The API host's pid (`ip netns exec` execs it in place). */
  get apiPid(): number {
    return this.api.child.pid!;
  }

  get proxyPid(): number {
    const pid = this.proxy?.child.pid;
    if (pid === undefined) throw new Error('proxy not started');
    return pid;
  }

  /** Wait until /healthz answers 200 (the first sync of every family is done); returns that time (epoch ms). */
  async waitHealthy(timeoutMs = 600_000): Promise<number> {
    const r = await Promise.race([
      this.command('healthy', { timeoutMs }),
      this.proxy!.exited.then((code) => {
        throw new Error(`proxy exited ${code}:\n${this.proxy!.log()}`);
      }),
    ]);
    return Number(r['at']);
  }

  /** Watch the namespace's nf_tables changes; see KernelMonitor. */
  async monitor(): Promise<KernelMonitor> {
    const m = new KernelMonitor(this.ns);
    await m.ready();
    return m;
  }

  async dispose(): Promise<void> {
    await this.proxy?.stop(5000);
    this.api.child.stdin?.end();
    await this.api.stop(3000);
    deleteNamespaceSync(this.ns);
    untrackNamespace(this.ns);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Compile bench/lib/nlmon.c (gcc) into bench/out once; returns the binary's path. */
function nlmonBinary(): string {
  const bin = join(REPO_ROOT, 'bench', 'out', 'nlmon');
  const src = join(REPO_ROOT, 'bench', 'lib', 'nlmon.c');
  if (!existsSync(bin) || statSync(bin).mtimeMs < statSync(src).mtimeMs) {
    mkdirSync(dirname(bin), { recursive: true });
    execFileSync('gcc', ['-O2', '-o', bin, src]);
  }
  return bin;
}

/**
 * The kernel's view: bench/lib/nlmon in the namespace prints every churn-range
 * address (10.64.0.0/10) found in a committed nf_tables rule or set element,
 * with the wall-clock time it was notified. Works for iptables (iptables-nft)
 * and nftables mode alike. expect(ip, after) resolves to the first sighting
 * at or after `after` (epoch ms).
 */
export class KernelMonitor {
  private readonly child: ChildProcess;
  private readonly seen = new Map<string, number[]>();
  private readonly want = new Map<string, { after: number; resolve: (t: number) => void }>();
  private readonly started: Promise<void>;
  private errors = '';
  lostNotifications = 0;

  constructor(ns: string) {
    this.child = spawn('ip', ['netns', 'exec', ns, nlmonBinary()], { stdio: ['ignore', 'pipe', 'pipe'] });
    trackChild(this.child.pid);
    this.child.stderr!.on('data', (b: Buffer) => (this.errors = (this.errors + b.toString()).slice(-2000)));
    let ready: () => void;
    this.started = new Promise((r) => (ready = r));
    readline.createInterface({ input: this.child.stdout! }).on('line', (l) => {
      if (l === 'ready') return ready();
      const [ip, t] = l.split(' ');
      if (ip === 'lost') return void this.lostNotifications++;
      const at = Number(t);
      const list = this.seen.get(ip!) ?? [];
      list.push(at);
      this.seen.set(ip!, list);
      const w = this.want.get(ip!);
      if (w && at >= w.after) {
        this.want.delete(ip!);
        w.resolve(at);
      }
    });
  }

  async ready(): Promise<void> {
    const exited = new Promise<never>((_, rej) =>
      this.child.once('exit', (c) => rej(new Error(`nlmon exited ${c}: ${this.errors}`))),
    );
    await Promise.race([this.started, exited]);
  }

  expect(ip: string, after: number): Promise<number> {
    const t = this.seen.get(ip)?.find((x) => x >= after);
    if (t !== undefined) return Promise.resolve(t);
    return new Promise((resolve) => this.want.set(ip, { after, resolve }));
  }

  stop(): void {
    this.child.kill('SIGTERM');
    untrackChild(this.child.pid);
  }
}

/** p-th percentile (0..100) of numbers, nearest-rank. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

export function median(xs: readonly number[]): number {
  return percentile(xs, 50);
}

/**
 * A quantile of a Prometheus histogram from /metrics text, interpolated
 * within the bucket as PromQL's histogram_quantile does.
 */
export function histogramQuantile(metricsText: string, name: string, q: number): { value: number; count: number } {
  const buckets: Array<{ le: number; n: number }> = [];
  const re = new RegExp(`^${name}_bucket\\{[^}]*le="([^"]+)"[^}]*\\} (\\S+)$`, 'gm');
  for (const m of metricsText.matchAll(re))
    buckets.push({ le: m[1] === '+Inf' ? Infinity : Number(m[1]), n: Number(m[2]) });
  buckets.sort((a, b) => a.le - b.le);
  const total = buckets.at(-1)?.n ?? 0;
  if (total === 0) return { value: NaN, count: 0 };
  const rank = q * total;
  let prevLe = 0,
    prevN = 0;
  for (const b of buckets) {
    if (b.n >= rank) {
      if (b.le === Infinity) return { value: prevLe, count: total };
      return { value: prevLe + ((b.le - prevLe) * (rank - prevN)) / Math.max(1, b.n - prevN), count: total };
    }
    prevLe = b.le;
    prevN = b.n;
  }
  return { value: prevLe, count: total };
}

/** The value after `--name` on the command line, or `def`. */
export function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : def;
}

/** Run a benchmark's main and exit (0, or 1 after printing the error): namespaces are cleaned on exit. */
export function runBench(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
