// The family's SyncState kept from sync to sync. Building the snapshot anew
// on every sync walked and sorted every service port, so a one-endpoint
// change cost in proportion to the cluster; here a partial sync touches only
// the ports of the Services that changed, in the very maps the last state
// handed out, and a full sync (or a new node, or a change to a large part of
// the cluster) builds fresh maps in key order as buildSyncState does.
//
// What this means for whoever holds a SyncState: its maps are the family's
// current ones, and the next partial sync changes them in place. A datapath
// that needs what a port was before a sync keeps its own note of it (see the
// ebpf dataplane's stale UDP sweep); nothing else compares two states.

import type { EndpointsMap } from './endpointslicecache.js';
import { endpointsKey } from './endpointslicecache.js';
import { parseCIDR } from './ip.js';
import type { Steps } from './steps.js';
import { categorizeEndpoints } from './topology.js';
import type { CategorizedEndpoints, Endpoint, IPFamily, NodeInfo, ServicePort, SyncState } from './types.js';

/** A service port that is not in the family's maps (the canary), with its endpoints. */
export interface ExtraPort {
  readonly servicePort: ServicePort;
  readonly endpoints: readonly Endpoint[];
}

export interface SnapshotUpdate {
  /** The family's service ports, by ServicePort.key. */
  readonly services: ReadonlyMap<string, ServicePort>;
  /** The family's endpoints, by endpointsKey. */
  readonly endpoints: EndpointsMap;
  /** Keys in `services` of one Service's ports (an index the caller keeps beside the map). */
  readonly portKeysOf: (serviceKey: string) => Iterable<string> | undefined;
  /** Ports added beside the maps, by key; a change to one counts as a change of its Service. */
  readonly extra: ReadonlyMap<string, ExtraPort>;
  readonly node: NodeInfo;
  /** Service keys changed since the last successful sync. */
  readonly changedServices: ReadonlySet<string>;
  readonly fullSync: boolean;
  /** CIDRs of any family; only this family's are kept. */
  readonly serviceCIDRs: readonly string[];
  /**
   * The state is still growing (the proxier's early syncs, while the first
   * lists stream in): however large the change, patch in place. Each early
   * sync adds a quarter or more to what is held, so rebuilding every time
   * would sort and copy the whole state again and again (about four times
   * its size in all, 5 % of the proxy's CPU to healthy at 100k Services);
   * the maps stay out of key order until the next rebuild. Only a hint:
   * patching is correct for any change.
   */
  readonly growing?: boolean;
}

/** Ports walked per step, in both the rebuild and the in-place update. */
const STEP = 500;

/** A partial sync that changes more than this share of the Services rebuilds instead. */
const REBUILD_SHARE = 0.25;

const EMPTY: readonly Endpoint[] = Object.freeze([]);

/** The maps and what is counted over them; a rebuild fills a fresh one and swaps it in at its end. */
class Tables {
  readonly services = new Map<string, ServicePort>();
  readonly endpoints = new Map<string, readonly Endpoint[]>();
  readonly categorized = new Map<string, CategorizedEndpoints>();
  /** Service key -> its port keys held in the maps. */
  readonly held = new Map<string, string[]>();
  /** Held ports with a health-check node port (what the service health server asks for after every sync). */
  readonly healthChecked = new Set<string>();
  readonly noLocal = { internal: 0, external: 0 };

  put(k: string, sp: ServicePort, eps: readonly Endpoint[], cat: CategorizedEndpoints): void {
    this.services.set(k, sp);
    this.endpoints.set(k, eps);
    this.categorized.set(k, cat);
    if (sp.healthCheckNodePort !== 0) this.healthChecked.add(k);
    this.count(sp, cat, 1);
  }

  /** Takes a held port's share out of the counts and indexes, leaving its map entries to be overwritten. */
  drop(k: string): void {
    const sp = this.services.get(k);
    const cat = this.categorized.get(k);
    if (sp && cat) this.count(sp, cat, -1);
    this.healthChecked.delete(k);
  }

  remove(k: string): void {
    this.drop(k);
    this.services.delete(k);
    this.endpoints.delete(k);
    this.categorized.delete(k);
  }

  private count(sp: ServicePort, c: CategorizedEndpoints, by: 1 | -1): void {
    if (!c.hasAnyEndpoints || (c.localEndpoints?.length ?? 0) > 0) return;
    if (sp.internalPolicyLocal) this.noLocal.internal += by;
    if (sp.externalPolicyLocal) this.noLocal.external += by;
  }
}

export class LiveSnapshot {
  private t = new Tables();
  /** Extra ports held, by key: their removal is a change too. */
  private extraHeld = new Map<string, ServicePort>();
  private node: NodeInfo | null = null;

  constructor(readonly family: IPFamily) {}

  /**
   * The next SyncState, as resumable steps. The update's maps must not change
   * until it is done (they change only in a checkout, and a sync runs alone).
   */
  *updateSteps(u: SnapshotUpdate): Steps<SyncState> {
    const changed = new Set(u.changedServices);
    for (const [k, x] of u.extra) {
      if (this.t.services.get(k) !== x.servicePort || !sameList(this.t.endpoints.get(k), x.endpoints))
        changed.add(x.servicePort.serviceKey);
    }
    for (const [k, sp] of this.extraHeld) if (!u.extra.has(k)) changed.add(sp.serviceKey);
    const rebuild =
      u.fullSync || this.node !== u.node || (!u.growing && changed.size > this.t.held.size * REBUILD_SHARE);
    const changedPorts = rebuild ? yield* this.rebuild(u, changed) : yield* this.patch(u, changed);
    this.node = u.node;
    this.extraHeld = new Map([...u.extra].map(([k, x]) => [k, x.servicePort]));
    return {
      family: this.family,
      services: this.t.services,
      endpoints: this.t.endpoints,
      categorized: this.t.categorized,
      changedServices: changed,
      changedServicePorts: changedPorts,
      fullSync: u.fullSync,
      node: u.node,
      serviceCIDRs: serviceCIDRsForFamily(u.serviceCIDRs, this.family),
    };
  }

  /** Upstream's no-local-endpoints gauges over the maps as they are (as countNoLocalEndpoints counts them). */
  noLocalEndpoints(): { internal: number; external: number } {
    return { ...this.t.noLocal };
  }

  /** Keys of the held ports that have a health-check node port. */
  healthCheckedPorts(): ReadonlySet<string> {
    return this.t.healthChecked;
  }

  /**
   * Fresh maps in key order, swapped in at the end (whoever reads the last
   * state between the steps sees it whole); a port whose service port,
   * endpoints and node are unchanged keeps its categories.
   */
  private *rebuild(u: SnapshotUpdate, changed: ReadonlySet<string>): Steps<Set<string>> {
    const sameNode = this.node === u.node;
    const old = this.t;
    const t = new Tables();
    const changedPorts = new Set<string>();
    const keys = [...u.services.keys()];
    for (const k of u.extra.keys()) if (!u.services.has(k)) keys.push(k);
    keys.sort();
    let n = 0;
    for (const k of keys) {
      if (++n % STEP === 0) yield;
      const x = u.extra.get(k);
      const sp = x?.servicePort ?? u.services.get(k)!;
      if (sp.family !== this.family) continue;
      if (changed.has(sp.serviceKey)) changedPorts.add(k);
      const eps = x ? x.endpoints : endpointsOf(u, sp);
      const reuse =
        sameNode && old.services.get(k) === sp && old.endpoints.get(k) === eps ? old.categorized.get(k) : undefined;
      t.put(k, sp, eps, reuse ?? categorizeEndpoints(eps, sp, u.node.name, u.node.labels));
      const ports = t.held.get(sp.serviceKey);
      if (ports) ports.push(k);
      else t.held.set(sp.serviceKey, [k]);
    }
    this.t = t;
    return changedPorts;
  }

  /**
   * In place: only the ports of changed Services are looked at. Between the
   * steps of a large one, a reader of the last state sees some of those
   * Services changed and others not yet; each port is whole.
   */
  private *patch(u: SnapshotUpdate, changed: ReadonlySet<string>): Steps<Set<string>> {
    const t = this.t;
    const extraOf = new Map<string, string[]>();
    for (const [k, x] of u.extra) {
      const svc = x.servicePort.serviceKey;
      extraOf.set(svc, [...(extraOf.get(svc) ?? []), k]);
    }
    const changedPorts = new Set<string>();
    let n = 0;
    for (const svc of changed) {
      const now: string[] = [];
      for (const k of [...(u.portKeysOf(svc) ?? []), ...(extraOf.get(svc) ?? [])]) {
        if (++n % STEP === 0) yield;
        const x = u.extra.get(k);
        const sp = x?.servicePort ?? u.services.get(k);
        if (!sp || sp.family !== this.family) continue;
        now.push(k);
        changedPorts.add(k);
        const had = t.endpoints.get(k);
        const eps = x ? (had && sameList(had, x.endpoints) ? had : x.endpoints) : endpointsOf(u, sp);
        const cat = t.services.get(k) === sp && had === eps ? t.categorized.get(k) : undefined;
        t.drop(k);
        t.put(k, sp, eps, cat ?? categorizeEndpoints(eps, sp, u.node.name, u.node.labels));
      }
      for (const k of t.held.get(svc) ?? []) if (!now.includes(k)) t.remove(k);
      if (now.length > 0) t.held.set(svc, now);
      else t.held.delete(svc);
    }
    return changedPorts;
  }
}

/** Normalised CIDRs of `family`, de-duplicated and sorted; invalid ones dropped. */
export function serviceCIDRsForFamily(cidrs: readonly unknown[], family: IPFamily): string[] {
  const out = new Set<string>();
  for (const c of cidrs) {
    const p = parseCIDR(c);
    if (p && p.family === family) out.add(p.text);
  }
  return [...out].sort();
}

function endpointsOf(u: SnapshotUpdate, sp: ServicePort): readonly Endpoint[] {
  return u.endpoints.get(endpointsKey(sp.name))?.endpoints ?? EMPTY;
}

function sameList<T>(a: readonly T[] | undefined, b: readonly T[]): boolean {
  return a !== undefined && a.length === b.length && a.every((x, i) => x === b[i]);
}
