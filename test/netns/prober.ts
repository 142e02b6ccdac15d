// A prober of a stable Service, running in a namespace of the cluster for
// as long as a fault test lasts: one fresh TCP connection every intervalMs,
// each answered by an echo server or counted as failed (no echo within
// timeoutMs). Fault tests assert that stable Services never stopped serving:
// `failed` must stay 0 through whatever the test did to the proxy.
import type { NetnsCluster } from './cluster.js';
import { nsRun } from './spawn.js';

export interface ProbeStats {
  /** Probes started, answered, failed (no echo in time), and the slowest answer in ms. */
  readonly sent: number;
  readonly answered: number;
  readonly failed: number;
  readonly maxMs: number;
  /** The longest gap between two probe starts: far above the interval means the prober's process stalled. */
  readonly maxTickGapMs: number;
  /**
   * The last 100 failures: when (epoch ms) and why; for TCP, the probe's local
   * port (to find its flow in conntrack) and when its handshake completed (-1: never).
   */
  readonly failures: ReadonlyArray<{ at: number; error: string; ms?: number; localPort?: number; connectMs?: number }>;
}

let nextKey = 1;

export class Prober {
  private constructor(
    private readonly cluster: NetnsCluster,
    readonly from: string,
    readonly target: string,
    private readonly key: string,
  ) {}

  /** Start probing host:port (TCP) from the namespace of `from` (a pod, node, 'ext'). */
  static async start(
    cluster: NetnsCluster,
    from: string,
    host: string,
    port: number,
    opts: { intervalMs?: number; timeoutMs?: number } = {},
  ): Promise<Prober> {
    const key = `probe-${nextKey++}`;
    await forgetUnansweredAttempts(cluster, host, port);
    const agent = await cluster.agent(from);
    const r = await agent.request('probeStart', {
      key,
      host,
      port,
      intervalMs: opts.intervalMs ?? 50,
      probeTimeoutMs: opts.timeoutMs ?? 1000,
    });
    if (!r['ok']) throw new Error(`prober from ${from}: ${String(r['error'])}`);
    return new Prober(cluster, from, `${host}:${port}`, key);
  }

  /** The counts so far. */
  async stats(): Promise<ProbeStats> {
    return this.query(false);
  }

  /** Stop probing; the final counts (probes in flight are waited for). */
  async stop(): Promise<ProbeStats> {
    return this.query(true);
  }

  private async query(stop: boolean): Promise<ProbeStats> {
    const agent = await this.cluster.agent(this.from);
    const r = await agent.request('probeStats', { key: this.key, stop }, 5000);
    if (!r['ok']) throw new Error(`prober ${this.target} from ${this.from}: ${String(r['error'])}`);
    return r as unknown as ProbeStats;
  }
}

/**
 * Delete the nodes' conntrack entries of connection attempts to host:port that
 * were never answered (state SYN_SENT), e.g. a waitReachable() try made before
 * the Service was programmed. Such an entry keeps the NAT decision of its
 * first packet (none: the SYN went to the default route and vanished) for
 * 120 s, and a new connection the kernel happens to give the same source
 * port matches it instead of the Service's rules: its SYN and the retransmit
 * vanish the same way, and the probe times out although the Service
 * serves every other source port. Which probe (if any) gets such a port is
 * chance: the kernel's ephemeral port choice can come back to ports it
 * passed a moment ago. Entries that exist before the prober starts are not
 * what it measures; failures after this still count.
 */
async function forgetUnansweredAttempts(cluster: NetnsCluster, host: string, port: number): Promise<void> {
  const family = host.includes(':') ? ['-f', 'ipv6'] : [];
  const argv = [
    'conntrack',
    '-D',
    ...family,
    '-p',
    'tcp',
    '--orig-dst',
    host,
    '--orig-port-dst',
    String(port),
    '--state',
    'SYN_SENT',
  ];
  // conntrack exits 1 when nothing matched.
  await Promise.all(cluster.nodes.map((n) => nsRun(n.ns, argv, { allowFailure: true })));
}

/** One line for logs and assertion messages. */
export function describeProbes(s: ProbeStats): string {
  const fails = s.failures.slice(-5).map((f) => {
    const how = f.localPort
      ? ` port ${f.localPort}, ${f.connectMs! < 0 ? 'no handshake' : `connected at ${f.connectMs} ms`}`
      : '';
    return `${new Date(f.at).toISOString()} ${f.error}${how}`;
  });
  return `${s.answered}/${s.sent} answered, ${s.failed} failed, slowest ${s.maxMs} ms, longest prober stall ${s.maxTickGapMs} ms${fails.length ? ` (${fails.join('; ')})` : ''}`;
}
