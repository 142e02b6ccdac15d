// Localhost NodePorts in nftables mode (KEP-6032), the platform half: one
// userspace TCP relay per served NodePort, listening on 127.0.0.1 / ::1, and
// the small reject table for loopback NodePort packets that are not served.
// What is served and rejected is decided by planLocalhostNodePorts
// (src/dataplane/nftables/localhost.ts).
//
// Contracts:
// * The relays are the userspace mode's own (src/platform/userspace,
//   tcp.ts): same backpressure, half-close, RST and dial-retry
//   behaviour. A relay connects
//   to the endpoint from the node, so the endpoint sees the node's address
//   on the route to it (as with upstream's Go relay), never 127.0.0.1.
// * Relays follow the syncs: new NodePorts get one after the sync that
//   programs them; a removed NodePort (or one left without endpoints) has its
//   listener and open connections closed; a changed endpoint set keeps the
//   listener and resets only connections to endpoints that left.
// * A port already taken on loopback is a failure of that one relay: logged,
//   counted (listener_creation_failures_total), tried again at the next sync;
//   the sync itself and the other relays go on.
// * The reject table never fails a sync either: a failed write is reported and
//   rewritten by the next sync.
import { withSidecar } from '../sidecar.js';
import type { LocalhostNodePortsMode } from '../../core/config/nodeport.js';
import type { Dataplane, IPFamily, Protocol, SyncState } from '../../core/types.js';
import type { Clock } from '../../core/clock.js';
import {
  LOCALHOST_PROTOCOLS,
  LOCALHOST_TABLE,
  localhostCleanupScript,
  localhostRejectScript,
  loopbackAddress,
  planLocalhostNodePorts,
  rejectCounterName,
  type LocalhostRelaySpec,
} from '../../dataplane/nftables/localhost.js';
import { RoundRobin } from '../../dataplane/userspace/loadbalancer.js';
import { realClock } from '../clock.js';
import { binding } from '../userspace/bindings.js';
import { TcpListener, type RelayEvent } from '../userspace/tcp.js';
import type { NftFamily } from '../../dataplane/nftables/names.js';
import type { NftRunner } from './leftovers.js';

/** What the relays publish; ProxyMetrics implements it. */
export interface LocalhostNodePortMetrics {
  localhostNodePortListeners(family: IPFamily, n: number): void;
  localhostNodePortListenerFailed(family: IPFamily): void;
}

export interface LocalhostNodePortsOptions {
  readonly family: IPFamily;
  readonly serving: LocalhostNodePortsMode;
  /** nft for the reject table: the host's, or a namespace's in tests. */
  readonly runner: NftRunner;
  /**
   * The reject table's counters (name -> packets) read without `nft`, which
   * loads the whole ruleset first (seconds per scrape at 10k Services).
   * Without it, or when it resolves to null (no netlink here), `nft -j list counters`.
   */
  readonly readCounters?: (family: NftFamily, table: string) => Promise<ReadonlyMap<string, number> | null>;
  readonly metrics: LocalhostNodePortMetrics;
  readonly clock?: Clock;
  readonly onEvent?: RelayEvent;
  /** Dial timeouts per endpoint try (default the userspace mode's). */
  readonly dialTimeoutsMs?: readonly number[];
}

interface Relay {
  readonly lb: RoundRobin;
  readonly listener: TcpListener;
}

export class LocalhostNodePorts {
  readonly family: IPFamily;
  private readonly relays = new Map<string, Relay>();
  private readonly clock: Clock;
  private readonly onEvent: RelayEvent;
  /** The reject script last applied; null = unknown (write at the next sync). */
  private applied: string | null = null;
  /** The last reject-table write failed (its warning was given). */
  private failing = false;

  constructor(private readonly opts: LocalhostNodePortsOptions) {
    this.family = opts.family;
    this.clock = opts.clock ?? realClock;
    this.onEvent = opts.onEvent ?? (() => {});
    // As in the userspace mode: a Node whose tcp_wrap binding changed fails at start, not at every sync.
    if (opts.serving === 'serve') binding();
  }

  /** What this family does with loopback NodePorts: serve, reject, or nothing. */
  get serving(): LocalhostNodePortsMode {
    return this.opts.serving;
  }

  /** Bring relays and the reject table to `state` (after the datapath's own sync succeeded). */
  async sync(state: SyncState): Promise<void> {
    if (this.serving === 'off') {
      // The gate is off: leave nothing of ours behind from a run that had it on.
      if (this.applied === null) await this.writeTable(localhostCleanupScript(this.family));
      return;
    }
    const plan = planLocalhostNodePorts(state, this.serving === 'serve');
    // Close first: a port that moved to another Service is free again for it.
    for (const [key, r] of [...this.relays]) {
      if (plan.relays.has(key)) continue;
      this.relays.delete(key);
      await r.listener.close();
      this.onEvent('debug', { family: this.family, relay: key }, 'localhost NodePort relay closed');
    }
    for (const spec of plan.relays.values()) await this.ensure(spec);
    this.opts.metrics.localhostNodePortListeners(this.family, this.relays.size);
    await this.writeTable(localhostRejectScript(this.family, plan.rejected));
  }

  private async ensure(spec: LocalhostRelaySpec): Promise<void> {
    const existing = this.relays.get(spec.key);
    if (existing) {
      existing.lb.setEndpoints(spec.endpoints, spec.stickyMs);
      existing.lb.cleanupStale();
      existing.listener.closeConnectionsNotIn(new Set(spec.endpoints));
      return;
    }
    const lb = new RoundRobin(this.clock);
    lb.setEndpoints(spec.endpoints, spec.stickyMs);
    const listener = new TcpListener(spec.key, lb, this.onEvent, this.opts.dialTimeoutsMs);
    const addr = loopbackAddress(this.family);
    try {
      await listener.listen(addr, spec.nodePort);
    } catch (err) {
      await listener.close().catch(() => {});
      this.opts.metrics.localhostNodePortListenerFailed(this.family);
      this.onEvent(
        'error',
        {
          family: this.family,
          servicePort: spec.servicePortKey,
          address: `${addr}:${spec.nodePort}`,
          err: err instanceof Error ? err.message : String(err),
        },
        'localhost NodePort relay failed to listen; trying again at the next sync',
      );
      return;
    }
    this.relays.set(spec.key, { lb, listener });
    this.onEvent(
      'debug',
      { family: this.family, servicePort: spec.servicePortKey, port: spec.nodePort, endpoints: spec.endpoints.length },
      'localhost NodePort relay listening',
    );
  }

  private async writeTable(script: string): Promise<void> {
    if (script === this.applied) return;
    try {
      await this.opts.runner(['-f', '-'], script);
      this.applied = script;
      this.failing = false;
    } catch (err) {
      this.applied = null;
      // Once per streak of failures at warn (an nft that keeps failing would say so at every sync).
      this.onEvent(
        this.failing ? 'debug' : 'warn',
        { family: this.family, table: LOCALHOST_TABLE, err: err instanceof Error ? err.message : String(err) },
        'localhost NodePort reject table not written; the next sync tries again',
      );
      this.failing = true;
    }
  }

  /** NodePorts with a listening relay (tests, status). */
  listening(): number[] {
    return [...this.relays.keys()].map((k) => Number(k.slice(k.indexOf('/') + 1))).sort((a, b) => a - b);
  }

  /** Rejected loopback packets per protocol, read from the kernel; empty when the table is absent. */
  async rejectedPackets(): Promise<Partial<Record<Protocol, number>>> {
    if (this.serving === 'off') return {};
    const fam = this.family === 'IPv4' ? 'ip' : 'ip6';
    if (this.opts.readCounters) {
      let byName: ReadonlyMap<string, number> | null;
      try {
        byName = await this.opts.readCounters(fam, LOCALHOST_TABLE);
      } catch {
        return {};
      }
      if (byName !== null) {
        const out: Partial<Record<Protocol, number>> = {};
        for (const p of LOCALHOST_PROTOCOLS) {
          const n = byName.get(rejectCounterName(p));
          if (n !== undefined) out[p] = n;
        }
        return out;
      }
    }
    let out: string;
    try {
      out = (await this.opts.runner(['-j', 'list', 'counters', 'table', fam, LOCALHOST_TABLE])).stdout;
    } catch {
      return {};
    }
    return parseRejectCounters(out);
  }

  /** Close every relay (process stop); the reject table stays, as the datapath's rules do. */
  async close(): Promise<void> {
    const all = [...this.relays.values()];
    this.relays.clear();
    await Promise.all(all.map((r) => r.listener.close()));
    this.opts.metrics.localhostNodePortListeners(this.family, 0);
  }

  /** Close every relay and remove the reject table. */
  async cleanup(): Promise<void> {
    await this.close();
    await this.opts.runner(['-f', '-'], localhostCleanupScript(this.family));
    this.applied = null;
  }
}

/** `nft -j list counters` output -> packets per protocol of our named counters. */
export function parseRejectCounters(json: string): Partial<Record<Protocol, number>> {
  const doc = JSON.parse(json) as { nftables?: Array<{ counter?: { name?: string; packets?: number } }> };
  const out: Partial<Record<Protocol, number>> = {};
  for (const item of doc.nftables ?? []) {
    const c = item.counter;
    const p = LOCALHOST_PROTOCOLS.find((x) => rejectCounterName(x) === c?.name);
    if (p) out[p] = c?.packets ?? 0;
  }
  return out;
}

/** The datapath, with the relays following each successful sync; close and cleanup include them. */
export function withLocalhostNodePorts(dp: Dataplane, lnp: LocalhostNodePorts): Dataplane {
  return withSidecar(dp, lnp);
}
