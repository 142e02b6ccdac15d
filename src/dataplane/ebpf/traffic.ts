// Per-Service traffic counters in the ebpf mode (--service-traffic-metrics
// N), pure side. The programs count into kpt_traffic, a per-CPU hash keyed
// by svc_id (the id each service port's svc entries and connection entries
// already carry), but only with CFG_TRAFFIC set in the family's kpt_cfg
// entry (the renderer's `trafficCounters` option) and only for ids that have
// an entry: the proxy creates a zeroed entry for every counted service port
// and deletes it when the port stops being counted. A port past the cap has
// no entry and counts nothing.
//
// TrafficCounterPlan keeps, per family, which ids are counted and turns each
// sync into the few map operations that change that: a sync that neither
// adds nor removes a service port writes nothing, so partial syncs never
// touch counters. A counted port keeps its entry (and its counts) for as long
// as it keeps its id, also across a proxy restart (the maps are pinned and the
// renderer recovers the ids); a port that leaves and comes back starts at
// zero. An id handed to another port is deleted and created again, so the new
// port never inherits counts. Pure.
import type { IPFamily, Protocol, SyncState } from '../../core/types.js';
import { selectCountedServicePorts } from '../traffic.js';
import * as L from './layout.js';
import type { MapOp } from './store.js';

export interface TrafficSlot {
  readonly svcId: number;
  readonly servicePort: string;
  readonly protocol: Protocol;
}

/**
 * kpt_traffic holds 65536 entries (src/bpf/maps.h) for both families; a
 * family never asks for more than half, whatever N is.
 */
export const TRAFFIC_MAX_PER_FAMILY = 32768;

const ZERO = L.encodeTrafficValue({ conns: 0n, bytes: 0n });

export class TrafficCounterPlan {
  /** svc_id -> the counted port; null until the first plan (then the kernel's ids are asked for). */
  private slots: Map<number, TrafficSlot> | null = null;
  private keys = new Set<string>();
  private untrackedPorts = 0;

  constructor(
    readonly family: IPFamily,
    private readonly max: number,
  ) {}

  /** True when the next update must be given the ids this family has in kpt_traffic now. */
  needsLive(): boolean {
    return this.slots === null;
  }

  /** Forget what is counted (after a failed write); the next update starts from the kernel's ids. */
  reset(): void {
    this.slots = null;
    this.keys = new Set();
  }

  get counted(): ReadonlyMap<number, TrafficSlot> {
    return this.slots ?? new Map();
  }

  get untracked(): number {
    return this.untrackedPorts;
  }

  /**
   * The operations that make kpt_traffic count the first N service ports of
   * this state. `idOf` is the renderer's id of a service port (undefined for
   * one it does not program, such as SCTP: counted against the cap, never
   * counted). `full` (a full render) recomputes the selection even when the
   * set of ports looks unchanged; `live` is this family's ids in the map now
   * (required when needsLive()).
   */
  update(
    state: SyncState,
    full: boolean,
    idOf: (servicePortKey: string) => number | undefined,
    live?: Iterable<number>,
  ): MapOp[] {
    const before = this.slots ?? new Map<number, TrafficSlot | null>(this.liveOwn(live));
    if (this.slots !== null && !full && this.sameKeys(state)) return [];
    const sel = selectCountedServicePorts(state, Math.min(this.max, TRAFFIC_MAX_PER_FAMILY));
    const after = new Map<number, TrafficSlot>();
    for (const sp of sel.counted) {
      const svcId = idOf(sp.key);
      if (svcId !== undefined) after.set(svcId, { svcId, servicePort: sp.key, protocol: sp.protocol });
    }
    const ops: MapOp[] = [];
    const key = (id: number) => L.encodeU32(id);
    for (const [id, was] of before) {
      const now = after.get(id);
      // Live ids of unknown owner stay when their id is still counted (the renderer kept the id for its port).
      if (now === undefined || (was !== null && was.servicePort !== now.servicePort))
        ops.push({ map: 'traffic', op: 'delete', key: key(id) });
    }
    for (const [id, now] of after) {
      const was = before.get(id);
      if (was === undefined || (was !== null && was.servicePort !== now.servicePort))
        ops.push({ map: 'traffic', op: 'update', key: key(id), value: ZERO });
    }
    this.slots = after;
    this.keys = new Set(state.services.keys());
    this.untrackedPorts = sel.untracked;
    return ops;
  }

  /** Deletes of every entry this family has (the flag is off: nothing of ours may stay). */
  static clearOps(family: IPFamily, live: Iterable<number>): MapOp[] {
    const ops: MapOp[] = [];
    for (const id of live)
      if (L.familyOfEntry('traffic', L.encodeU32(id)) === family)
        ops.push({ map: 'traffic', op: 'delete', key: L.encodeU32(id) });
    return ops;
  }

  private liveOwn(live: Iterable<number> | undefined): Array<[number, null]> {
    const out: Array<[number, null]> = [];
    for (const id of live ?? []) if (L.familyOfEntry('traffic', L.encodeU32(id)) === this.family) out.push([id, null]);
    return out;
  }

  /** The state has exactly the ports of the last update (its changed ports are all known, and no more or fewer). */
  private sameKeys(state: SyncState): boolean {
    if (state.services.size !== this.keys.size) return false;
    if (!state.changedServicePorts) {
      for (const k of state.services.keys()) if (!this.keys.has(k)) return false;
      return true;
    }
    for (const k of state.changedServicePorts) if (!this.keys.has(k)) return false;
    return true;
  }
}
