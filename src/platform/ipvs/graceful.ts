// Graceful termination of real servers (upstream graceful_termination.go,
// with a bound): a real server that is no longer wanted gets weight 0, so it
// takes no new connections while the ones it has go on, and is deleted once
// the kernel counts none (active + inactive) or the bounded wait is over.
//
// UDP is where upstream's most reported IPVS bug lives: a client that keeps
// sending from one source port stays on a dead endpoint as long as its IPVS
// connection entry lives. So a UDP real server whose endpoint is gone from
// the EndpointSlices is deleted at once (expire_nodest_conn then moves the
// flow on its next packet, and its conntrack entries are flushed); one whose
// endpoint still exists (terminating, may still answer) drains like TCP,
// within the shorter UDP bound.
//
// Decisions are pure (decide()); the dataplane applies them.
import type { Protocol } from '../../core/types.js';
import type { RetiredRealServer } from '../../dataplane/ipvs/plan.js';
import type { RealServer, RealServerStatus, VirtualServer } from '../../dataplane/ipvs/objects.js';
import { destKey, realServerKey, virtualServerKey } from '../../dataplane/ipvs/objects.js';

export interface DrainBounds {
  /** Longest wait for TCP and SCTP real servers, ms. */
  readonly tcpMs: number;
  /** Longest wait for UDP real servers whose endpoint still exists, ms. */
  readonly udpMs: number;
}

/** Upstream waits without a bound; ours: IPVS's own idle timeouts (TCP 900 s, UDP 300 s). */
export const DEFAULT_DRAIN_BOUNDS: DrainBounds = { tcpMs: 15 * 60_000, udpMs: 5 * 60_000 };

export interface Draining {
  readonly vs: VirtualServer;
  readonly rs: RealServer;
  readonly since: number;
}

export type DrainAction =
  | { readonly kind: 'weight0'; readonly vs: VirtualServer; readonly rs: RealServer }
  | { readonly kind: 'delete'; readonly vs: VirtualServer; readonly rs: RealServer; readonly why: string };

const needsDrain = (p: Protocol, lingering: boolean) => p !== 'UDP' || lingering;

export class GracefulTermination {
  private readonly list = new Map<string, Draining>();

  constructor(private readonly bounds: DrainBounds = DEFAULT_DRAIN_BOUNDS) {}

  get size(): number {
    return this.list.size;
  }

  /** What is draining, by destKey: the kernel holds these at weight 0 though nothing wants them. */
  draining(): ReadonlyMap<string, Draining> {
    return this.list;
  }

  /**
   * Real servers the render retired: those of surviving virtual servers are
   * drained (weight 0, remembered) or deleted at once (UDP, endpoint gone).
   */
  retire(retired: readonly RetiredRealServer[], now: number): DrainAction[] {
    const out: DrainAction[] = [];
    for (const r of retired) {
      if (!r.vsKept) continue; // its virtual server is being deleted with it
      const key = destKey(r.vs, r.rs);
      if (!needsDrain(r.vs.protocol, r.lingering)) {
        this.list.delete(key);
        out.push({ kind: 'delete', vs: r.vs, rs: r.rs, why: 'UDP endpoint gone' });
        continue;
      }
      // Already draining: the clock keeps running from the first retirement.
      if (!this.list.has(key)) this.list.set(key, { vs: r.vs, rs: r.rs, since: now });
      if (r.rs.weight !== 0) out.push({ kind: 'weight0', vs: r.vs, rs: { ...r.rs, weight: 0 } });
    }
    return out;
  }

  /** A real server wanted again: stop draining it (the caller restores its weight). */
  revive(vs: VirtualServer, rs: RealServer): void {
    this.list.delete(destKey(vs, rs));
  }

  /** Forget what is gone with its virtual server. */
  forgetVirtualServer(vsKey: string): void {
    for (const k of [...this.list.keys()]) if (k.startsWith(`${vsKey}/`)) this.list.delete(k);
  }

  /** Virtual servers with something draining (the caller lists their real servers). */
  virtualServers(): VirtualServer[] {
    const m = new Map<string, VirtualServer>();
    for (const d of this.list.values()) m.set(virtualServerKey(d.vs), d.vs);
    return [...m.values()];
  }

  /**
   * Given the kernel's real servers of each draining virtual server (by
   * virtualServerKey; a missing entry means the virtual server is gone),
   * decide which drained real servers to delete now.
   */
  check(dests: ReadonlyMap<string, readonly RealServerStatus[]>, now: number): DrainAction[] {
    const out: DrainAction[] = [];
    for (const [key, d] of [...this.list]) {
      const list = dests.get(virtualServerKey(d.vs));
      const cur = list?.find((x) => realServerKey(x) === realServerKey(d.rs));
      if (!cur) {
        this.list.delete(key); // gone already (virtual server deleted, or by hand)
        continue;
      }
      const conns = cur.activeConns + cur.inactiveConns;
      const bound = d.vs.protocol === 'UDP' ? this.bounds.udpMs : this.bounds.tcpMs;
      if (conns === 0) out.push({ kind: 'delete', vs: d.vs, rs: d.rs, why: 'drained' });
      else if (now - d.since >= bound)
        out.push({ kind: 'delete', vs: d.vs, rs: d.rs, why: `${conns} connection(s) left after ${bound / 1000} s` });
      else continue;
      this.list.delete(key);
    }
    return out;
  }
}
