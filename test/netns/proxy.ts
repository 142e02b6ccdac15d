// One kube-proxy-ts process per node namespace, started with the flags an
// operator would use, and considered up once its /healthz answers 200 (as
// seen from inside the node). The binary is src/cmd/main.ts (tsx) when the
// tests run from source and dist/src/cmd/main.js when they run from dist/.
import { existsSync, readFileSync } from 'node:fs';
import { release } from 'node:os';
import type { NetnsCluster } from './cluster.js';
import { BpfNode } from '../ebpf/bpfnode.js';
import { run } from '../../src/platform/exec.js';
import { nsRun, nsSpawn, repoScript, REPO_ROOT, type NsProcess } from './spawn.js';
import { CLUSTER_CIDR, type NodeInfo } from './topology.js';
import { scaled } from './timescale.js';

/** Modes the e2e suite can run; adding a mode is adding it here. */
export const ALL_E2E_MODES = ['iptables', 'nftables', 'ebpf', 'ipvs'] as const;
// userspace runs its own suite (test/e2e/userspace-*.test.ts): its relay does not preserve source IPs.
export type E2EMode = (typeof ALL_E2E_MODES)[number] | 'userspace';

/** The modes to run: all, or the comma-separated subset in KPT_E2E_MODES (e.g. `KPT_E2E_MODES=iptables`). */
export const E2E_MODES: readonly E2EMode[] = (() => {
  const want = process.env['KPT_E2E_MODES']
    ?.split(',')
    .map((m) => m.trim())
    .filter(Boolean);
  if (want?.length) return ALL_E2E_MODES.filter((m) => want.includes(m));
  // IPVS only where the kernel has it (the QEMU guest stage, scripts/test-guest), unless asked for.
  return ALL_E2E_MODES.filter((m) => m !== 'ipvs' || ipvsAvailable());
})();

/** The running kernel has IPVS loaded or as a module it can load. */
function ipvsAvailable(): boolean {
  if (existsSync('/proc/net/ip_vs')) return true;
  try {
    return readFileSync(`/lib/modules/${release()}/modules.dep`, 'utf8').includes('/ip_vs.ko');
  } catch {
    return false;
  }
}

export const HEALTHZ_PORT = 10256;

/** True when the proxy's entry point exists (the lead wires src/cmd/main.ts). */
export function proxyAvailable(): boolean {
  return existsSync(`${REPO_ROOT}src/cmd/main.ts`) || existsSync(`${REPO_ROOT}dist/src/cmd/main.js`);
}

/**
 * From dist/: bin/kube-proxy-ts, exactly as an operator runs it: executed
 * itself, so the runtime settings on its #! line apply (V8 flags and glibc's
 * malloc arenas; `node bin/kube-proxy-ts` would drop them, and the tests
 * would measure another heap). From source:
 * src/cmd/main.ts under tsx. KPT_PROXY_ENTRY names another entry point: the
 * QEMU guest stage runs a one-file bundle of the same dist/ build
 * (scripts/test-guest), because loading hundreds of modules under software
 * emulation takes 25-35 s per process and the bundle 5-6 s.
 */
export function proxyArgv(): string[] {
  const entry = process.env['KPT_PROXY_ENTRY'];
  if (entry) return [process.execPath, entry];
  if (import.meta.url.includes('/dist/')) return [`${REPO_ROOT}bin/kube-proxy-ts`];
  return repoScript('src/cmd/main.ts');
}

export class ProxyProcess {
  private proc: NsProcess | undefined;
  /**
   * ebpf mode: the node's bpf filesystem, kept by a holder process so pins
   * outlive a proxy restart as /sys/fs/bpf does on a real node.
   */
  private bpffs: BpfNode | undefined;

  /** dropFlags: default flags to leave out (with their value), e.g. ['--cluster-cidr']. */
  constructor(
    readonly cluster: NetnsCluster,
    readonly node: NodeInfo,
    private currentMode: E2EMode,
    readonly kubeconfig: string,
    private extra: string[] = [],
    readonly dropFlags: string[] = [],
    /** Extra environment (e.g. KPT_FAULT_DIR for the fault tests). */
    readonly env: NodeJS.ProcessEnv = {},
  ) {}

  get mode(): E2EMode {
    return this.currentMode;
  }

  /**
   * Stop, then start in another mode (a mode switch on the node), with these extra flags; the node's
   * bpffs, if any, stays.
   */
  async switchMode(mode: E2EMode, extraArgs: string[] = [...this.extra], timeoutMs = 30000): Promise<void> {
    await this.stop();
    this.currentMode = mode;
    this.extra = extraArgs;
    await this.start(timeoutMs);
  }

  flags(): string[] {
    const defaults = [
      '--kubeconfig',
      this.kubeconfig,
      '--hostname-override',
      this.node.name,
      '--proxy-mode',
      this.mode,
      '--cluster-cidr',
      CLUSTER_CIDR,
      '--healthz-bind-address',
      `${this.node.ip}:${HEALTHZ_PORT}`,
      '--metrics-bind-address',
      '127.0.0.1:10249',
      '-v',
      '2',
      // nf_conntrack_max is global and read-only outside the root namespace: leave it, as kind does.
      '--conntrack-max-per-core',
      '0',
    ];
    const kept: string[] = [];
    for (let i = 0; i < defaults.length; i++) {
      const f = defaults[i]!;
      const hasValue = i + 1 < defaults.length && !defaults[i + 1]!.startsWith('-');
      if (!this.dropFlags.includes(f)) kept.push(f, ...(hasValue ? [defaults[i + 1]!] : []));
      if (hasValue) i++;
    }
    return [...kept, ...this.extra];
  }

  get extraArgs(): readonly string[] {
    return this.extra;
  }

  /** Stop, then start with other extra flags; what outlives a restart (ebpf pins) stays. */
  async restartWith(extraArgs: string[]): Promise<void> {
    await this.stop();
    this.extra = extraArgs;
    await this.start();
  }

  /** Start and wait until /healthz is 200 (timeoutMs bounds it). */
  async start(timeoutMs = 30000): Promise<void> {
    await this.spawn();
    await this.waitHealthy(timeoutMs);
  }

  /** Start the process without waiting for it (e.g. to catch it in its first sync); then waitHealthy(). */
  async spawn(): Promise<void> {
    if (this.proc) throw new Error('proxy already running');
    const enter = await this.enter();
    this.proc = nsSpawn(this.node.ns, [...proxyArgv(), ...this.flags()], {
      env: this.env,
      ...(enter ? { enter } : {}),
    });
  }

  /** Wait until /healthz answers 200; throws if the process exits or timeoutMs (scaled) passes. */
  async waitHealthy(unscaledTimeoutMs = 30000): Promise<void> {
    const timeoutMs = scaled(unscaledTimeoutMs);
    const proc = this.proc;
    if (!proc) throw new Error(`proxy on ${this.node.name} is not running`);
    const agent = await this.cluster.agent(this.node.name);
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      if (proc.child.exitCode !== null)
        throw new Error(`kube-proxy-ts on ${this.node.name} exited ${proc.child.exitCode}:\n${proc.log()}`);
      const r = await agent.http(`http://${this.node.ip}:${HEALTHZ_PORT}/healthz`, 1000);
      if (r.status === 200) return;
      last = JSON.stringify(r);
      await new Promise((res) => setTimeout(res, 200));
    }
    throw new Error(
      `kube-proxy-ts on ${this.node.name} not healthy after ${timeoutMs} ms (last ${last}):\n${proc.log()}`,
    );
  }

  /**
   * ebpf mode, and any mode after it (which finds its pins): the argv prefix entering the node's
   * network and bpffs mount namespaces.
   */
  private async enter(): Promise<string[] | undefined> {
    if (this.mode !== 'ebpf' && !this.bpffs) return undefined;
    this.bpffs ??= await BpfNode.start(this.node.ns);
    return this.bpffs.enter();
  }

  /** The node's bpffs holder (ebpf mode), for tests that look at pins and attachments. */
  get bpfNode(): BpfNode | undefined {
    return this.bpffs;
  }

  /** SIGTERM and wait for the exit. The rules stay in the kernel (as upstream's do). */
  async stop(): Promise<void> {
    await this.proc?.stop(5000);
    this.proc = undefined;
  }

  /** Stop, and let go of what outlives a restart (the ebpf mode's bpffs holder). */
  async dispose(): Promise<void> {
    await this.stop();
    await this.bpffs?.stop();
    this.bpffs = undefined;
  }

  log(): string {
    return this.proc?.log() ?? '';
  }

  /** The exit code once the process has exited by itself, else null. */
  exitCode(): number | null {
    return this.proc?.child.exitCode ?? null;
  }

  /** A mark in the log; logSince(mark) is what the proxy logged after it. */
  logMark(): number {
    return this.proc?.logMark() ?? 0;
  }
  logSince(mark: number): string {
    return this.proc?.logSince(mark) ?? '';
  }

  /** The proxy's pid (`ip netns exec` execs it, so this is the node process itself). */
  get pid(): number {
    const pid = this.proc?.child.pid;
    if (pid === undefined) throw new Error(`proxy on ${this.node.name} is not running`);
    return pid;
  }

  /**
   * SIGKILL, as the OOM killer or a node crash would: no cleanup, no
   * graceful exit; whatever it was doing is cut off. The log is kept in
   * lastLog; start() runs it again.
   */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (!proc) return;
    proc.child.kill('SIGKILL');
    await proc.exited;
    this.lastLog = proc.log();
    this.proc = undefined;
  }

  /** The log of the process killed last (kill()). */
  lastLog = '';

  /** True while the process runs (it was started and has not exited). */
  running(): boolean {
    return this.proc !== undefined && this.proc.child.exitCode === null && this.proc.child.signalCode === null;
  }

  /** Run `kube-proxy-ts --cleanup` in the node namespace; returns its exit code and output. */
  async cleanup(): Promise<{ code: number; output: string }> {
    const argv = [
      ...proxyArgv(),
      '--cleanup',
      '--proxy-mode',
      this.mode,
      '--hostname-override',
      this.node.name,
      '--kubeconfig',
      this.kubeconfig,
    ];
    const enter = await this.enter();
    const r = enter
      ? await run(enter[0]!, [...enter.slice(1), ...argv], { allowFailure: true })
      : await nsRun(this.node.ns, argv, { allowFailure: true });
    return { code: r.code, output: r.stdout + r.stderr };
  }
}

/** What the kernel holds for kube-proxy in ns: iptables-save of nat+filter and the nft ruleset. */
export async function dumpRules(ns: string): Promise<{ iptables: string; nft: string }> {
  const ipt = await nsRun(ns, ['iptables-save'], { allowFailure: true });
  const nft = await nsRun(ns, ['nft', 'list', 'ruleset'], { allowFailure: true });
  return { iptables: ipt.stdout, nft: nft.stdout };
}
