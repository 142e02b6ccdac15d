// UserspaceDataplane: the userspace mode's Dataplane for one IP family. Its
// objects (listeners, and the portals of its redirect table) go through the
// one reconciler (src/engine/reconciler.ts) with the mode's driver
// (src/dataplane/userspace/driver.ts). Each sync:
//   1. plans (planner.ts): when the reconciler needs the live state (the
//      first sync, after a failure or drift), or on a full sync without the
//      drift watch (which then is the only repair), it adopts the listeners
//      this process holds, and no portal, as the transaction replaces the
//      table whole; then what the changed Services (all of them when full)
//      want;
//   2. opens new listeners and hands changed endpoint sets to the ones that
//      stay (no restart: same port, open relays kept), resetting relays to
//      endpoints that were removed;
//   3. writes the table's transaction atomically (one netlink batch, or
//      `nft -f`, ../nftables/writer.ts): the whole table when replacing,
//      else the changed portals' elements (with the drift watch on, a change
//      by anyone else is reported, and the sync that follows replaces);
//   4. only then closes listeners no longer wanted (and their relays), so a
//      redirect never points at a port that was already closed.
// Any failure calls the reconciler's failed() (the next sync replaces the
// table), and so does a listener that would not open (its portals are
// refused until the next sync opens it).
//
// watchDrift() reports what others break between syncs: a change to the
// redirect table (nf_tables events, ../nftables/monitor.ts), and, checked
// every second, a listener that no longer listens (a TCP socket destroyed
// with `ss -K` says so only through SO_ACCEPTCONN, sockstate.ts; a UDP one
// through an error). A dead listener is dropped at once, and either makes
// the reconciler forget, so the full sync that follows opens a new listener
// and points the redirect at it.
import { binding } from './bindings.js';
import type { DataplaneConfig, Dataplane, Drift, IPFamily, SyncOutcome, SyncState } from '../../core/types.js';
import type { Clock } from '../../core/clock.js';
import type { UserspaceKind, UserspaceValue } from '../../dataplane/userspace/driver.js';
import { RoundRobin } from '../../dataplane/userspace/loadbalancer.js';
import type { ListenerSpec } from '../../dataplane/userspace/plan.js';
import { renderCleanup, TABLE_NAME } from '../../dataplane/userspace/rules.js';
import type { LiveObject } from '../../engine/reconciler.js';
import { nftFamily } from '../../dataplane/nftables/names.js';
import { realClock } from '../clock.js';
import { nftRunner, type NftRunner } from '../nftables/leftovers.js';
import { NftMonitor, type NftChange } from '../nftables/monitor.js';
import { NftWriter, type NftTransport } from '../nftables/writer.js';
import { UserspacePlanner } from './planner.js';
import { openSocketState, type SocketState } from './sockstate.js';

export { cleanupUserspaceLeftovers } from './leftovers.js';
import { TcpListener, type RelayEvent } from './tcp.js';
import { UdpListener } from './udp.js';

/** How often listeners are checked for life (drift watch). */
export const LISTENER_CHECK_MS = 1000;
/**
 * Every listener is checked at least once in this many checks, and up to
 * LISTENER_CHECK_ALL listeners every check: a dead one is noticed within a
 * second up to that many listeners, and within 3 s above. A check costs about
 * 2 us of CPU per listener (sockstate.ts), so at 20k listeners (10k Services
 * of two ports) about 13 ms a second.
 */
export const LISTENER_CHECK_ROUND = 3;
export const LISTENER_CHECK_ALL = 2000;

/** Upstream userspace --udp-timeout default. */
export const DEFAULT_UDP_IDLE_TIMEOUT_MS = 250;

export interface UserspaceDataplaneOptions {
  readonly config: DataplaneConfig;
  /** Runs nft (default: the host's, or netns's). Tests pass a recording one. */
  readonly runner?: NftRunner;
  /**
   * 'netlink' (the default without a runner): the table goes in as one
   * nf_tables netlink batch, or through nft where netlink is unavailable.
   * 'nft' (the default with a runner): `nft -f`.
   */
  readonly transport?: NftTransport;
  readonly clock?: Clock;
  /** Address listeners bind (default the wildcard of the family: 0.0.0.0 / ::). */
  readonly bindAddress?: string;
  readonly udpIdleTimeoutMs?: number;
  /** Dial timeouts per try when connecting to endpoints (default upstream's 250/500/1000/2000 ms). */
  readonly dialTimeoutsMs?: readonly number[];
  readonly onEvent?: RelayEvent;
  /** Called with each table transaction's text before it is applied (debug logging). */
  readonly onTransaction?: (family: IPFamily, script: string, via: NftTransport) => void;
  /** The network namespace to work in (tests): nft, the netlink batches and the drift watch. */
  readonly netns?: string;
}

interface Entry {
  readonly lb: RoundRobin;
  readonly listener: TcpListener | UdpListener;
  readonly port: number;
}

export class UserspaceDataplane implements Dataplane {
  readonly mode = 'userspace' as const;
  readonly family: IPFamily;
  /** The listeners this process holds: the live half of the datapath (the table is the other). */
  private readonly entries = new Map<string, Entry>();
  /** The driver under the one reconciler: what each sync does to listeners and table. */
  private readonly planner: UserspacePlanner;
  private readonly runner: NftRunner;
  private readonly writer: NftWriter;
  private readonly clock: Clock;
  private readonly onEvent: RelayEvent;
  /** watchDrift()'s listener; the watch (monitor, listener checks) opens with the first sync. */
  private onDrift: ((drift: Drift) => void) | null = null;
  private watching = false;
  private monitor: NftMonitor | null = null;
  private unsubscribe: (() => void) | null = null;
  private sockets: SocketState | null = null;
  private checkTimer: ReturnType<typeof setInterval> | null = null;
  /** Where the last listener check stopped (it resumes there). */
  private checkCursor: Iterator<[string, Entry]> | null = null;

  constructor(private readonly opts: UserspaceDataplaneOptions) {
    this.family = opts.config.family;
    this.planner = new UserspacePlanner(opts.config);
    this.runner = opts.runner ?? nftRunner(opts.netns);
    this.clock = opts.clock ?? realClock;
    this.onEvent = opts.onEvent ?? (() => {});
    // The TCP relay rests on Node's internal tcp_wrap binding: a Node that changed it fails here, at start,
    // with a clear error, instead of at every sync.
    binding();
    const onTransaction = opts.onTransaction;
    this.writer = new NftWriter({
      family: this.family,
      runner: this.runner,
      transport: opts.transport ?? (opts.runner ? 'nft' : 'netlink'),
      ...(opts.netns !== undefined ? { netns: opts.netns } : {}),
      ...(onTransaction ? { onTransaction: (f, script, _p, via) => onTransaction(f, script, via) } : {}),
      onEvent: this.onEvent,
    });
  }

  /** Tell `onDrift` when the redirect table is changed by others or a listener dies (see the top). */
  watchDrift(onDrift: (drift: Drift) => void): void {
    this.onDrift = onDrift;
  }

  private async startWatch(): Promise<void> {
    if (this.watching || !this.onDrift) return;
    this.watching = true;
    const onDrift = this.onDrift;
    this.monitor = await NftMonitor.open(this.opts.netns);
    const ours = (c: NftChange) => c.table === TABLE_NAME;
    const forget = (drift: Drift) => {
      // What the reconciler remembers of the table may be wrong now.
      this.planner.failed();
      onDrift(drift);
    };
    this.unsubscribe = this.monitor?.subscribe(nftFamily(this.family), ours, forget) ?? null;
    this.sockets = await openSocketState();
    if (!this.monitor || !this.sockets)
      this.onEvent(
        'warn',
        { family: this.family, tableWatch: !!this.monitor, tcpListenerCheck: !!this.sockets },
        'koffi unavailable: the drift watch is partly off (a changed table waits for the next sync; a TCP listener that dies unseen stays dead)',
      );
    this.checkTimer = setInterval(() => this.checkListeners(onDrift), LISTENER_CHECK_MS);
    this.checkTimer.unref();
  }

  /**
   * Drop the listeners that no longer receive, and report them (the next
   * sync opens new ones). Looks at a share of them each time (see
   * LISTENER_CHECK_ROUND), resuming where the last check stopped.
   */
  private checkListeners(onDrift: (drift: Drift) => void): void {
    const dead: string[] = [];
    const budget = Math.min(
      this.entries.size,
      Math.max(LISTENER_CHECK_ALL, Math.ceil(this.entries.size / LISTENER_CHECK_ROUND)),
    );
    for (let i = 0; i < budget; i++) {
      this.checkCursor ??= this.entries.entries();
      let next = this.checkCursor.next();
      if (next.done) {
        this.checkCursor = this.entries.entries();
        next = this.checkCursor.next();
        if (next.done) break;
      }
      const [key, e] = next.value;
      const why =
        e.listener instanceof UdpListener
          ? e.listener.failed()
          : this.sockets?.listening(e.listener.fd()) === false
            ? 'no longer listening'
            : null;
      if (why === null) continue;
      this.entries.delete(key);
      // A dead UDP socket's sessions cannot answer through it anymore; a dead
      // TCP listener's relays were accepted before and still work.
      if (e.listener instanceof UdpListener) void e.listener.close();
      else e.listener.retire();
      dead.push(`${key} port ${e.port} (${why})`);
    }
    if (dead.length === 0) return;
    this.planner.failed();
    onDrift({ reason: 'listener_closed', detail: `${dead.length} listener(s): ${dead.slice(0, 3).join(', ')}` });
  }

  async sync(state: SyncState): Promise<SyncOutcome> {
    await this.startWatch();
    const plan = this.planner.plan(state, () => this.liveListeners(), this.monitor !== null);
    for (const s of plan.skipped)
      this.onEvent('debug', { servicePort: s.servicePortKey, reason: s.reason }, 'service port skipped');
    const { work } = plan;
    let relaysReset = 0;
    let closed = 0;
    let unserved: string[];
    try {
      for (const spec of work.open) await this.open(spec);
      for (const spec of work.update) relaysReset += await this.update(spec);
      const r = this.planner.transaction(plan, (k) => this.entries.get(k)?.port);
      unserved = r.unserved;
      if (r.tx.numOperations > 0) await this.writer.apply(r.tx, !plan.full, this.monitor);
      for (const key of work.close) {
        const e = this.entries.get(key);
        if (!e) continue;
        this.entries.delete(key);
        await e.listener.close();
        closed++;
      }
    } catch (err) {
      this.planner.failed();
      // A socket left mid-exchange may still hold replies; start afresh.
      this.writer.reset();
      throw err;
    }
    // Their listeners did not open (logged), so they are refused; the next sync replaces and tries again.
    if (unserved.length > 0) this.planner.failed();
    return {
      partial: !plan.full,
      counters: {
        listeners: this.entries.size,
        listenersClosed: closed,
        relaysReset,
        skippedServicePorts: plan.skipped.length,
        ...this.stats(),
      },
    };
  }

  private *liveListeners(): IterableIterator<LiveObject<UserspaceKind, UserspaceValue>> {
    // Content unknown: the reconciler then hands each its endpoints again (an update), as the table is
    // replaced only after a failure or drift. Not keeping each listener's spec keeps the heap small.
    for (const key of this.entries.keys()) yield { kind: 'listener', key, value: null };
  }

  /** Hand a changed spec to the open listener. Returns relays reset because their endpoint left. */
  private async update(spec: ListenerSpec): Promise<number> {
    const e = this.entries.get(spec.key);
    // Dropped by the listener check since the plan (which then made the next sync full): open it again now.
    if (!e) {
      await this.open(spec);
      return 0;
    }
    const keys = spec.endpoints.map((ep) => ep.key);
    e.lb.setEndpoints(keys, spec.stickyMs);
    e.lb.cleanupStale();
    return e.listener.closeConnectionsNotIn(new Set(keys));
  }

  /** Open a listener for spec; on failure it stays closed (logged) and its portals are refused. */
  private async open(spec: ListenerSpec): Promise<void> {
    const keys = spec.endpoints.map((e) => e.key);
    const lb = new RoundRobin(this.clock);
    lb.setEndpoints(keys, spec.stickyMs);
    const listener =
      spec.protocol === 'TCP'
        ? new TcpListener(spec.key, lb, this.onEvent, this.opts.dialTimeoutsMs)
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
      this.onEvent('error', { listener: spec.key, err: String(err) }, 'userspace listener failed to open');
      await listener.close().catch(() => {});
    }
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
    this.writer.reset();
    this.planner.failed();
    if (this.checkTimer) clearInterval(this.checkTimer);
    this.checkTimer = null;
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.monitor = null;
    const all = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(all.map((e) => e.listener.close()));
  }

  /** Close everything and remove our table. */
  async cleanup(): Promise<void> {
    await this.close();
    await this.runner(['-f', '-'], renderCleanup(this.family).toString());
  }
}
