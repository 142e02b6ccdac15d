// A prober of a stable Service, running in a namespace of the cluster for
// as long as a fault test lasts: one fresh TCP connection every intervalMs,
// each answered by an echo server or counted as failed (no echo within
// timeoutMs). Fault tests assert that stable Services never stopped serving:
// `failed` must stay 0 through whatever the test did to the proxy.
import type { NetnsCluster } from './cluster.js';

export interface ProbeStats {
  /** Probes started, answered, failed (no echo in time), and the slowest answer in ms. */
  readonly sent: number;
  readonly answered: number;
  readonly failed: number;
  readonly maxMs: number;
  /** The last 100 failures: when (epoch ms) and why. */
  readonly failures: ReadonlyArray<{ at: number; error: string }>;
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

/** One line for logs and assertion messages. */
export function describeProbes(s: ProbeStats): string {
  const fails = s.failures.slice(-5).map((f) => `${new Date(f.at).toISOString()} ${f.error}`);
  return `${s.answered}/${s.sent} answered, ${s.failed} failed, slowest ${s.maxMs} ms${fails.length ? ` (${fails.join('; ')})` : ''}`;
}
