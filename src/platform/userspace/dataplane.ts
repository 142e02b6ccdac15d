// UserspaceDataplane: the userspace mode's Dataplane for one IP family.
// Each sync:
//   1. plans listeners and portals (pure UserspaceRenderer.plan),
//   2. opens listeners that are new and hands changed endpoint sets to the
//      ones that stay (no restart: same port, open relays kept), resetting
//      relays to endpoints that were removed,
//   3. writes the redirect table atomically (UserspaceRenderer.render, `nft -f -`),
//   4. only then closes listeners no longer planned (and their relays), so a
//      redirect never points at a port that was already closed.
// A failed rule write rejects (the engine makes the next sync full); every
// sync rewrites the whole table, so syncs are never partial.
import { handleRelayUsable } from './bindings.js';
import type { DataplaneConfig, Dataplane, IPFamily, SyncOutcome, SyncState } from '../../core/types.js';
import type { Clock } from '../../core/clock.js';
import { RoundRobin } from '../../dataplane/userspace/loadbalancer.js';
import type { ListenerSpec } from '../../dataplane/userspace/plan.js';
import { UserspaceRenderer } from '../../dataplane/userspace/renderer.js';
import { realClock } from '../clock.js';
import { nftRunner, type NftRunner } from '../nftables/leftovers.js';

export { cleanupUserspaceLeftovers } from './leftovers.js';
import { HandleTcpListener } from './handletcp.js';
import { TcpListener, type RelayEvent } from './tcp.js';
import { UdpListener } from './udp.js';

/** Upstream userspace --udp-timeout default. */
export const DEFAULT_UDP_IDLE_TIMEOUT_MS = 250;

export interface UserspaceDataplaneOptions {
  readonly config: DataplaneConfig;
  /** Runs nft (default: the host's). Tests pass nftRunner(netns). */
  readonly runner?: NftRunner;
  readonly clock?: Clock;
  /** Address listeners bind (default the wildcard of the family: 0.0.0.0 / ::). */
  readonly bindAddress?: string;
  readonly udpIdleTimeoutMs?: number;
  /** Dial timeouts per try when connecting to endpoints (default upstream's 250/500/1000/2000 ms). */
  readonly dialTimeoutsMs?: readonly number[];
  /**
   * TCP relay implementation: 'handle' (default) relays on libuv handles
   * (handletcp.ts, less CPU per connection), 'stream' on net.Socket (tcp.ts).
   * Both keep the same contracts.
   */
  readonly tcpRelay?: 'handle' | 'stream';
  readonly onEvent?: RelayEvent;
  /** Called with each rule script before it is applied (debug logging). */
  readonly onTransaction?: (family: IPFamily, script: string) => void;
}

interface Entry {
  readonly lb: RoundRobin;
  readonly listener: TcpListener | HandleTcpListener | UdpListener;
  readonly port: number;
}

export class UserspaceDataplane implements Dataplane {
  readonly mode = 'userspace' as const;
  readonly family: IPFamily;
  private readonly entries = new Map<string, Entry>();
  private relayChoice: 'handle' | 'stream' | null = null;
  private readonly renderer: UserspaceRenderer;
  private readonly runner: NftRunner;
  private readonly clock: Clock;
  private readonly onEvent: RelayEvent;

  constructor(private readonly opts: UserspaceDataplaneOptions) {
    this.family = opts.config.family;
    this.renderer = new UserspaceRenderer(opts.config);
    this.runner = opts.runner ?? nftRunner();
    this.clock = opts.clock ?? realClock;
    this.onEvent = opts.onEvent ?? (() => {});
  }

  /**
   * The handle relay (half the CPU per connection) rests on Node's internal tcp_wrap binding; a Node whose
   * binding changed falls back to the net.Socket relay with a warning instead of failing to listen.
   */
  private tcpRelay(): 'handle' | 'stream' {
    if (this.opts.tcpRelay) return this.opts.tcpRelay;
    if (this.relayChoice === null) {
      this.relayChoice = handleRelayUsable() ? 'handle' : 'stream';
      if (this.relayChoice === 'stream')
        this.onEvent('warn', { node: process.version }, 'tcp_wrap binding unusable; using the net.Socket relay');
    }
    return this.relayChoice;
  }

  async sync(state: SyncState): Promise<SyncOutcome> {
    const plan = this.renderer.plan(state);
    for (const s of plan.skipped)
      this.onEvent('debug', { servicePort: s.servicePortKey, reason: s.reason }, 'service port skipped');
    let resetRelays = 0;
    for (const spec of plan.listeners.values()) resetRelays += await this.ensure(spec);
    const ports = new Map<string, number>();
    for (const [k, e] of this.entries) if (plan.listeners.has(k)) ports.set(k, e.port);
    const script = this.renderer.render(plan, ports);
    this.opts.onTransaction?.(this.family, script);
    await this.runner(['-f', '-'], script);
    let closed = 0;
    for (const [k, e] of [...this.entries]) {
      if (plan.listeners.has(k)) continue;
      this.entries.delete(k);
      await e.listener.close();
      closed++;
    }
    return {
      partial: false,
      counters: {
        listeners: this.entries.size,
        listenersClosed: closed,
        relaysReset: resetRelays,
        skippedServicePorts: plan.skipped.length,
        ...this.stats(),
      },
    };
  }

  /** Open a listener for spec, or update the existing one. Returns relays reset because their endpoint left. */
  private async ensure(spec: ListenerSpec): Promise<number> {
    const keys = spec.endpoints.map((e) => e.key);
    const existing = this.entries.get(spec.key);
    if (existing) {
      existing.lb.setEndpoints(keys, spec.stickyMs);
      existing.lb.cleanupStale();
      return existing.listener.closeConnectionsNotIn(new Set(keys));
    }
    const lb = new RoundRobin(this.clock);
    lb.setEndpoints(keys, spec.stickyMs);
    const Tcp = this.tcpRelay() === 'handle' ? HandleTcpListener : TcpListener;
    const listener =
      spec.protocol === 'TCP'
        ? new Tcp(spec.key, lb, this.onEvent, this.opts.dialTimeoutsMs)
        : new UdpListener(
            spec.key,
            lb,
            this.clock,
            this.opts.udpIdleTimeoutMs ?? DEFAULT_UDP_IDLE_TIMEOUT_MS,
            this.onEvent,
            this.family === 'IPv4' ? 'udp4' : 'udp6',
          );
    try {
      const port = await listener.listen(this.bindAddress());
      this.entries.set(spec.key, { lb, listener, port });
      this.onEvent('debug', { listener: spec.key, port, endpoints: keys.length }, 'userspace listener opened');
    } catch (err) {
      // Its portals are rejected by the renderer (no port); the next sync tries again.
      this.onEvent('error', { listener: spec.key, err: String(err) }, 'userspace listener failed to open');
      await listener.close().catch(() => {});
    }
    return 0;
  }

  private bindAddress(): string {
    return this.opts.bindAddress ?? (this.family === 'IPv4' ? '0.0.0.0' : '::');
  }

  /** The port a listener is bound to (tests, benchmark), or undefined. */
  listenerPort(key: string): number | undefined {
    return this.entries.get(key)?.port;
  }

  /** Open relays and sessions right now. */
  stats(): { tcpConnections: number; udpSessions: number } {
    let tcp = 0;
    let udp = 0;
    for (const e of this.entries.values()) {
      if (e.listener instanceof UdpListener) udp += e.listener.sessionCount();
      else tcp += e.listener.connectionCount();
    }
    return { tcpConnections: tcp, udpSessions: udp };
  }

  /** Close every listener and relay; the rules stay (as after a stop of upstream's proxy). */
  async close(): Promise<void> {
    const all = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(all.map((e) => e.listener.close()));
  }

  /** Close everything and remove our table. */
  async cleanup(): Promise<void> {
    await this.close();
    await this.runner(['-f', '-'], this.renderer.cleanup());
  }
}
