// The end-to-end environment shared by test/e2e/cluster-*.test.ts and the
// demo: a namespace cluster, the API server in it, one kube-proxy-ts per
// node, and helpers that send real packets and wait (bounded) for the
// proxy to converge on a change.
import { NetnsCluster, type ClusterOptions } from './cluster.js';
import { ControlPlane } from './controlplane.js';
import type { WatchListSupport } from '../apiserver/listoptions.js';
import type { ClientResult, EchoReply } from './agentclient.js';
import type { KubeObject } from './kube.js';
import { ProxyProcess, type E2EMode } from './proxy.js';
import { scaled } from './timescale.js';
import { nsRun } from './spawn.js';
import type { NodeInfo } from './topology.js';

export interface E2EOptions {
  /** Extra proxy flags, e.g. ['--masquerade-all']. */
  readonly proxyArgs?: string[];
  /** Default proxy flags to leave out, e.g. ['--cluster-cidr'] (see ProxyProcess.flags). */
  readonly dropFlags?: string[];
  /** Cluster shape, e.g. { ipv6: true } or { podBridge: 'cbr0' }. */
  readonly cluster?: ClusterOptions;
  /**
   * Standalone mode: no API server; every proxy runs with --manifests and the
   * folder this returns for its node (write the manifests before start).
   */
  readonly manifests?: (node: NodeInfo) => string;
  /** Runs once the cluster (and API server) exist, before any proxy starts (e.g. to plant foreign rules). */
  readonly beforeProxies?: (cluster: NetnsCluster) => Promise<void>;
  /** Extra environment of each node's proxy process. */
  readonly proxyEnv?: (node: NodeInfo) => NodeJS.ProcessEnv;
  /** How the API server treats a streaming watch-list: default 'on'; 'off'/'unknown' refuse it (422). */
  readonly apiWatchList?: WatchListSupport;
}

export type Proto = 'tcp' | 'udp';

export interface SendOpts {
  readonly bind?: string;
  readonly localPort?: number;
  readonly timeoutMs?: number;
  /** UDP: sendto() on an unconnected socket instead of connect() + send(). */
  readonly unconnected?: boolean;
}

export class E2EEnv {
  private constructor(
    readonly mode: E2EMode,
    readonly cluster: NetnsCluster,
    private readonly controlPlane: ControlPlane | null,
    readonly proxies: ReadonlyMap<string, ProxyProcess>,
  ) {}

  /** Environments shared by the suites of one process (KPT_E2E_SHARED=1), per mode. */
  private static readonly shared = new Map<E2EMode, Promise<E2EEnv>>();
  private isShared = false;

  /**
   * Build everything; on any failure tear down what was built and rethrow.
   * With KPT_E2E_SHARED=1, suites of one process that ask for the default
   * environment of a mode get the same one (the QEMU guest runs the cluster
   * suites that way: building a cluster there takes minutes); each suite
   * uses its own Service names and addresses, and disposeShared() ends it.
   */
  static async start(mode: E2EMode, opts: E2EOptions = {}): Promise<E2EEnv> {
    if (process.env['KPT_E2E_SHARED'] !== '1' || Object.keys(opts).length > 0) return E2EEnv.create(mode, opts);
    let env = E2EEnv.shared.get(mode);
    if (!env) {
      env = E2EEnv.create(mode, opts).then((e) => {
        e.isShared = true;
        return e;
      });
      E2EEnv.shared.set(mode, env);
      env.catch(() => E2EEnv.shared.delete(mode));
    }
    return env;
  }

  /** End every shared environment. */
  static async disposeShared(): Promise<void> {
    const envs = await Promise.allSettled([...E2EEnv.shared.values()]);
    E2EEnv.shared.clear();
    for (const e of envs) if (e.status === 'fulfilled') await e.value.disposeNow();
  }

  private static async create(mode: E2EMode, opts: E2EOptions): Promise<E2EEnv> {
    const cluster = await NetnsCluster.create(opts.cluster);
    let cp: ControlPlane | undefined;
    const proxies = new Map<string, ProxyProcess>();
    try {
      if (!opts.manifests) cp = await ControlPlane.start(cluster, opts.apiWatchList);
      await opts.beforeProxies?.(cluster);
      for (const n of cluster.nodes) {
        const standalone = opts.manifests ? ['--manifests', opts.manifests(n)] : [];
        const drop = [...(opts.dropFlags ?? []), ...(cp ? [] : ['--kubeconfig'])];
        const args = [...standalone, ...(opts.proxyArgs ?? [])];
        proxies.set(n.name, new ProxyProcess(cluster, n, mode, cp?.kubeconfig ?? '', args, drop, opts.proxyEnv?.(n)));
      }
      await Promise.all([...proxies.values()].map((p) => p.start()));
      return new E2EEnv(mode, cluster, cp ?? null, proxies);
    } catch (err) {
      await Promise.all([...proxies.values()].map((p) => p.dispose().catch(() => {})));
      await cp?.dispose().catch(() => {});
      await cluster.destroy();
      throw err;
    }
  }

  /** The test API server (not in standalone mode). */
  get cp(): ControlPlane {
    if (!this.controlPlane) throw new Error('standalone environment: no API server');
    return this.controlPlane;
  }

  get kube() {
    return this.cp.kube;
  }

  proxy(node: string): ProxyProcess {
    const p = this.proxies.get(node);
    if (!p) throw new Error(`no proxy on ${node}`);
    return p;
  }

  async apply(...objs: KubeObject[]): Promise<void> {
    for (const o of objs) await this.kube.apply(o);
  }

  /** One exchange from the namespace of `from` (a pod, node, 'ext'). */
  async send(from: string, proto: Proto, host: string, port: number, opts: SendOpts = {}): Promise<ClientResult> {
    const a = await this.cluster.agent(from);
    return proto === 'tcp' ? a.tcp(host, port, opts) : a.udp(host, port, opts);
  }

  /** n exchanges, one after the other (fresh connection / source port each, unless localPort is fixed). */
  async sendMany(
    from: string,
    proto: Proto,
    host: string,
    port: number,
    n: number,
    opts: SendOpts = {},
  ): Promise<ClientResult[]> {
    const out: ClientResult[] = [];
    for (let i = 0; i < n; i++) out.push(await this.send(from, proto, host, port, opts));
    return out;
  }

  /**
   * Poll until check() returns a value other than undefined, or timeoutMs
   * passes (then throw with the last observation). Returns the value and the
   * time it took: the convergence time of whatever change preceded the call.
   */
  async waitFor<T>(
    what: string,
    check: () => Promise<T | undefined>,
    unscaledTimeoutMs = 15000,
    describeLast?: () => string,
  ): Promise<{ value: T; ms: number }> {
    const timeoutMs = scaled(unscaledTimeoutMs);
    const start = Date.now();
    for (;;) {
      const v = await check();
      if (v !== undefined) return { value: v, ms: Date.now() - start };
      if (Date.now() - start > timeoutMs) {
        throw new Error(
          `${this.mode}: ${what}: not within ${timeoutMs} ms${describeLast ? ` (${describeLast()})` : ''}\n${this.proxyLogs()}${await this.kernelState()}`,
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Wait until a single exchange succeeds (e.g. a new Service is programmed). */
  async waitReachable(
    from: string,
    proto: Proto,
    host: string,
    port: number,
    opts: SendOpts = {},
    timeoutMs = 15000,
  ): Promise<{ value: EchoReply; ms: number }> {
    let last: ClientResult | undefined;
    return this.waitFor(
      `${from} -> ${proto} ${host}:${port} reachable`,
      async () => {
        last = await this.send(from, proto, host, port, { timeoutMs: 500, ...opts });
        return last.ok ? last.reply : undefined;
      },
      timeoutMs,
      () => JSON.stringify(last),
    );
  }

  /** Wait until n consecutive exchanges all succeed and are all answered by pods in `pods`. */
  async waitServedBy(
    from: string,
    proto: Proto,
    host: string,
    port: number,
    pods: string[],
    opts: SendOpts = {},
    n = 6,
  ): Promise<{ value: EchoReply[]; ms: number }> {
    let last: ClientResult[] = [];
    return this.waitFor(
      `${from} -> ${proto} ${host}:${port} served only by ${pods.join(',')}`,
      async () => {
        last = await this.sendMany(from, proto, host, port, n, { timeoutMs: 500, ...opts });
        const replies = last.flatMap((r) => (r.ok ? [r.reply] : []));
        return replies.length === n && replies.every((r) => pods.includes(r.pod)) ? replies : undefined;
      },
      15000,
      () => JSON.stringify(last.map((r) => (r.ok ? r.reply.pod : r.error))),
    );
  }

  /**
   * How many ICMP errors a node's kernel has withheld under its per-destination rate limit
   * (IcmpOutRateLimitHost in the node's /proc/net/snmp; null where the kernel does not count them).
   * A REJECT answers with an ICMP error, and the kernel sends at most a burst of 6 to one
   * address, then one a second (net.ipv4.icmp_ratelimit): a withheld one reads as a timeout to
   * the client. REJECT assertions put it in their messages, so such a timeout says what it was,
   * and a wait for a drop uses it to tell a drop from a withheld reject.
   */
  async icmpRateLimited(node: string): Promise<number | null> {
    const snmp = (await nsRun(this.cluster.node(node).ns, ['cat', '/proc/net/snmp'])).stdout;
    const [names, values] = snmp.split('\n').filter((l) => l.startsWith('Icmp: '));
    const i = names?.split(' ').indexOf('OutRateLimitHost') ?? -1;
    return i > 0 ? Number(values?.split(' ')[i]) : null;
  }

  /** IPVS mode: each node's virtual servers, for failure messages (the rules are in dumpRules). */
  private async kernelState(): Promise<string> {
    if (this.mode !== 'ipvs') return '';
    const out: string[] = [];
    for (const n of this.cluster.nodes) {
      for (const cmd of [
        ['ipvsadm', '-Ln', '--stats'],
        ['ip', '-o', 'addr', 'show', 'dev', 'kube-ipvs0'],
        ['iptables-save', '-c'],
        ['conntrack', '-L'],
      ]) {
        const r = await nsRun(n.ns, cmd, { allowFailure: true }).catch((e: unknown) => ({ stdout: String(e) }));
        out.push(`--- ${cmd.join(' ')} on ${n.name} ---\n${r.stdout}`);
      }
    }
    return `\n${out.join('\n')}`;
  }

  /**
   * Replace a node's proxy with one started with other extra flags (after
   * the old one is stopped and disposed); the caller cleans up first when
   * the old proxy's state must not stay. dropFlags (default: the old
   * proxy's) leaves default flags out, e.g. ['--proxy-mode'].
   */
  async replaceProxy(node: string, extraArgs: string[], dropFlags?: string[]): Promise<ProxyProcess> {
    const old = this.proxy(node);
    await old.dispose();
    const drop = dropFlags ?? old.dropFlags;
    const p = new ProxyProcess(this.cluster, old.node, this.mode, old.kubeconfig, extraArgs, drop);
    (this.proxies as Map<string, ProxyProcess>).set(node, p);
    await p.start();
    return p;
  }

  /** Logs of every proxy (tails), for failure messages. */
  proxyLogs(): string {
    return [...this.proxies.values()]
      .map((p) => `--- kube-proxy-ts ${p.node.name} ---\n${p.log().slice(-3000)}`)
      .join('\n');
  }

  /** Tear down, unless shared (then disposeShared() does it). */
  async dispose(): Promise<void> {
    if (!this.isShared) await this.disposeNow();
  }

  private async disposeNow(): Promise<void> {
    await Promise.all([...this.proxies.values()].map((p) => p.dispose().catch(() => {})));
    await this.controlPlane?.dispose().catch(() => {});
    await this.cluster.destroy();
  }
}

/** The distinct pods among successful replies. */
export function podsOf(results: readonly ClientResult[]): string[] {
  return [...new Set(results.flatMap((r) => (r.ok ? [r.reply.pod] : [])))].sort();
}

/** The source IP (without port) an echo server saw. */
export function srcIP(reply: EchoReply): string {
  return reply.src.slice(0, reply.src.lastIndexOf(':'));
}
