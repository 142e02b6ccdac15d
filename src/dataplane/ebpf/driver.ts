// EbpfDriver: the ebpf mode's driver for the one reconciler
// (src/engine/reconciler.ts; the platform half, src/platform/ebpf/planner.ts,
// puts the two together). One driver per family.
//
// Objects: BPF map entries. The kind is the map, the key the map key's hex,
// the value its bytes; an entry is rewritten only when its bytes change
// (same), and the addrs entry of an address several owners use holds the OR
// of their flags (merge). Owners: each service port (by its key) and the
// node (NODE_OWNER). A partial sync asks for the ports of changed Services
// only (including ports they no longer have) and the node, so adding one
// endpoint is a slot, a membership and a count (three writes), plus the same
// for the local set when the endpoint is local.
//
// Order (EBPF_SPEC.order), so that a packet never finds a half-built
// service: endpoint slots and Maglev tables first, then set counts, then
// services, then addresses; removals in the opposite order. Within a set, a
// removed endpoint's slot is refilled (by a new endpoint, or the last slot
// moved down) before the count shrinks, and the freed tail slot goes last.
//
// The driver's own memory is the service-port ids (svc_id: names the port's
// endpoint sets, source ranges and traffic counter). They stay stable while
// a port exists, and after a restart or a failed apply they are recovered
// from the live svc entries (restart()), so a restarted proxy rewrites
// nothing. Endpoint slots are read back from what the reconciler says the
// maps hold (EbpfMemory).
import type { ObjectDriver, ObjectOp, ObjectSpec } from '../../core/objects.js';
import type { DataplaneConfig, IPFamily, ServicePort, SyncState } from '../../core/types.js';
import { nodeEntries, servicePortEntries, type IfaceInfo, type MapEntry, type PortContext } from './entries.js';
import * as L from './layout.js';
import type { MapOp } from './store.js';
import { finish, type Steps } from '../../core/steps.js';

/** Service ports rendered per step of renderSteps(). */
const STEP_PORTS = 64;

export interface EbpfDriverOptions {
  /** Endpoint choice for services without the annotation (--ebpf-lb-algorithm). */
  readonly algorithm?: L.LbAlgorithm;
  /** Maglev table size, a prime (--ebpf-maglev-table-size). */
  readonly maglevM?: number;
  /** Set CFG_TRAFFIC: the programs count per-Service traffic (--service-traffic-metrics; see traffic.ts). */
  readonly trafficCounters?: boolean;
  /** Set CFG_DSR and give external eTP Cluster ports a local set (--ebpf-lb-mode=dsr; see src/bpf/dsr.h). */
  readonly dsr?: boolean;
}

export interface EbpfDesiredInput {
  readonly state: SyncState;
  /** The node's addresses of this family now; default config.localIPs. */
  readonly localIPs?: readonly string[];
  /** Interfaces, for the bridge and interface-prefix local detectors. */
  readonly ifaces?: readonly IfaceInfo[];
  /** The node's network namespace cookie (socket-level load balancing). */
  readonly netnsCookie?: bigint;
}

/** This family's entries in the kernel (L.keyOf(key) -> L.valueText(value), per map). */
export type LiveEntries = ReadonlyMap<L.MapName, ReadonlyMap<string, string>>;

/** What the driver reads of the reconciler's memory (the Reconciler provides it). */
export interface EbpfMemory {
  /** What the maps hold for an entry (absent: undefined; unknown: null). */
  applied(kind: L.MapName, key: string): string | null | undefined;
  /** The owners that want an entry, the one whose value it holds last. */
  ownersOf(kind: L.MapName, key: string): readonly string[];
}

// A type, not an interface: it is logged as a record of fields.
export type Skipped = { readonly servicePort: string; readonly reason: string };

export interface EbpfDesired {
  readonly owners: ReadonlyArray<readonly [string, readonly MapEntry[]]>;
  /** Keys of the service ports this sync recomputed (every port on a full one, gone ones included). */
  readonly ports: readonly string[];
  /** Service ports (or frontends of them) left out, with the reason. */
  readonly skipped: readonly Skipped[];
}

/** The owner of the node-level entries. */
export const NODE_OWNER = '\0node';

const NONE: readonly MapEntry[] = Object.freeze([]);

export const EBPF_SPEC: ObjectSpec<L.MapName, string> = {
  order: [
    'names',
    'eps',
    'members',
    'maglev',
    'sets',
    'lbSrc',
    'podCidrs',
    'svcCidrs',
    'ifaces',
    'svc',
    'addrs',
    'cfg',
  ],
  same: (a, b) => a === b,
  merge(kind, values) {
    if (kind !== 'addrs') return values[values.length - 1]!;
    let flags = 0;
    for (const v of values) flags |= L.decodeU32(L.keyBytes(v));
    return L.valueText(L.encodeU32(flags));
  },
};

interface PortId {
  readonly id: number;
  readonly service: string;
}

export class EbpfDriver implements ObjectDriver<L.MapName, string, EbpfDesiredInput> {
  readonly spec = EBPF_SPEC;
  private readonly family: IPFamily;
  private readonly algorithm: L.LbAlgorithm;
  private readonly maglevM: number;
  private readonly trafficCounters: boolean;
  private readonly dsr: boolean;
  private ids = new Map<string, PortId>();
  /** Service key -> its ports that have ids (a partial sync finds the ports a Service lost here). */
  private portsOf = new Map<string, Set<string>>();
  private usedIds = new Set<number>();
  /** After restart(): ids the live svc entries carry, kept for the ports that have them. */
  private liveIds = new Set<number>();
  private freeIds: number[] = [];
  private nextId: number;

  constructor(
    private readonly config: DataplaneConfig,
    private readonly memory: EbpfMemory,
    opts: EbpfDriverOptions = {},
  ) {
    this.family = config.family;
    this.algorithm = opts.algorithm ?? 'random';
    this.maglevM = opts.maglevM ?? 16381;
    this.trafficCounters = opts.trafficCounters ?? false;
    this.dsr = opts.dsr ?? false;
    this.nextId = L.ID_RANGE[this.family][0];
  }

  /** The id of a service port this driver programs (undefined for ports it does not, e.g. SCTP). */
  idOf(servicePortKey: string): number | undefined {
    return this.ids.get(servicePortKey)?.id;
  }

  /**
   * Start over from the live maps (with the reconciler's adopt()): ids are
   * forgotten, and the ones live svc entries carry go back to their ports at
   * the next sync; new ports get ids above them.
   */
  restart(live?: LiveEntries): void {
    this.ids.clear();
    this.portsOf.clear();
    this.usedIds.clear();
    this.liveIds.clear();
    this.freeIds = [];
    this.nextId = L.ID_RANGE[this.family][0];
    for (const v of live?.get('svc')?.values() ?? []) {
      const id = L.decodeSvcValue(L.keyBytes(v)).svcId;
      if (!inRange(id, this.family)) continue;
      this.liveIds.add(id);
      if (id >= this.nextId) this.nextId = id + 1;
    }
  }

  desired(input: EbpfDesiredInput, full: boolean): ReadonlyArray<readonly [string, readonly MapEntry[]]> {
    return this.render(input, full).owners;
  }

  /**
   * What each recomputed owner wants, with the ports recomputed and what was
   * left out. Reads the reconciler's memory, so it runs before plan().
   */
  render(input: EbpfDesiredInput, full: boolean): EbpfDesired {
    return finish(this.renderSteps(input, full));
  }

  /** render() as resumable steps (src/core/steps.ts): one step per STEP_PORTS service ports. */
  *renderSteps(input: EbpfDesiredInput, full: boolean): Steps<EbpfDesired> {
    const state = input.state;
    const redo = new Set<string>();
    if (full) {
      for (const k of state.services.keys()) redo.add(k);
      for (const k of this.ids.keys()) redo.add(k);
    } else {
      for (const k of state.changedServicePorts ?? scanChanged(state)) redo.add(k);
      for (const svc of state.changedServices) for (const k of this.portsOf.get(svc) ?? []) redo.add(k);
    }
    const owners: Array<readonly [string, readonly MapEntry[]]> = [];
    // Gone ports first, so a port added in the same sync may reuse their ids.
    for (const key of redo) {
      if (state.services.has(key)) continue;
      this.releaseId(key);
      owners.push([key, NONE]);
    }
    const skipped: Skipped[] = [];
    const ctx = this.portContext(full ? null : redo, skipped);
    // Key order: on a clash inside one sync the first port wins.
    let n = 0;
    for (const key of [...redo].filter((k) => state.services.has(k)).sort()) {
      if (++n % STEP_PORTS === 0) yield;
      const sp = state.services.get(key)!;
      if (sp.protocol === 'SCTP') {
        skipped.push({ servicePort: key, reason: 'SCTP is not translated by the ebpf programs' });
        owners.push([key, NONE]);
        continue;
      }
      owners.push([key, servicePortEntries(sp, this.idFor(sp), state, ctx)]);
    }
    // Node-level entries: always recomputed (a handful).
    owners.push([
      NODE_OWNER,
      nodeEntries({ ...input, config: this.config, trafficCounters: this.trafficCounters, dsr: this.dsr }),
    ]);
    this.liveIds.clear();
    return { owners, ports: [...redo], skipped };
  }

  /**
   * Two ports on one (address, port, protocol) cannot both be served. The
   * newer definition wins: a port recomputed now takes the entry from one
   * that was not (the reconciler gives an entry the latest owner's value,
   * and gives it back if that owner lets go); within one sync the first in
   * key order wins. The loser is reported.
   */
  private portContext(redo: ReadonlySet<string> | null, skipped: Skipped[]): PortContext {
    const claimed = new Map<string, string>();
    const memory = this.memory;
    return {
      family: this.family,
      algorithm: this.algorithm,
      maglevM: this.maglevM,
      dsr: this.dsr,
      held: (map, key) => memory.applied(map, key),
      claim(port, key, what) {
        const first = claimed.get(key);
        if (first !== undefined) {
          skipped.push({ servicePort: port, reason: `${what} is served by ${first}` });
          return false;
        }
        // A full sync recomputes every port (redo null): nobody is left to take from.
        if (redo !== null) {
          const holders = memory.ownersOf('svc', key);
          const holder = holders[holders.length - 1];
          if (holder !== undefined && holder !== port && !redo.has(holder))
            skipped.push({ servicePort: holder, reason: `${what} is now served by ${port}` });
        }
        claimed.set(key, port);
        return true;
      },
    };
  }

  /** A stable id per service port: kept across syncs, recovered from the live entries after restart(). */
  private idFor(sp: ServicePort): number {
    const have = this.ids.get(sp.key);
    if (have !== undefined) return have.id;
    let id: number | undefined;
    if (sp.clusterIP && this.liveIds.size > 0) {
      const v = this.memory.applied(
        'svc',
        L.keyOf(L.encodeSvcKey({ addr: sp.clusterIP, port: sp.port, proto: sp.protocol })),
      );
      const live = v ? L.decodeSvcValue(L.keyBytes(v)).svcId : undefined;
      if (live !== undefined && this.liveIds.has(live) && !this.usedIds.has(live)) id = live;
    }
    while (id === undefined) {
      const next = this.freeIds.pop() ?? this.nextId++;
      if (!this.usedIds.has(next) && !this.liveIds.has(next)) id = next;
    }
    this.ids.set(sp.key, { id, service: sp.serviceKey });
    let ports = this.portsOf.get(sp.serviceKey);
    if (!ports) this.portsOf.set(sp.serviceKey, (ports = new Set()));
    ports.add(sp.key);
    this.usedIds.add(id);
    return id;
  }

  private releaseId(key: string): void {
    const have = this.ids.get(key);
    if (have === undefined) return;
    this.ids.delete(key);
    const ports = this.portsOf.get(have.service);
    ports?.delete(key);
    if (ports?.size === 0) this.portsOf.delete(have.service);
    this.usedIds.delete(have.id);
    this.freeIds.push(have.id);
  }
}

/** The reconciler's operations as map writes: a put is an update, a delete a delete. */
export function toMapOps(ops: readonly ObjectOp<L.MapName, string>[]): MapOp[] {
  const out: MapOp[] = new Array(ops.length);
  for (let i = 0; i < ops.length; i++) {
    const o = ops[i]!;
    out[i] =
      o.op === 'put'
        ? { map: o.kind, op: 'update', key: L.keyBytes(o.key), value: L.keyBytes(o.value) }
        : { map: o.kind, op: 'delete', key: L.keyBytes(o.key) };
  }
  return out;
}

/**
 * The rendered maps' entries as the planner takes them (keys and values as
 * text), from a dump of each map (the kernel's, or a Fake's); `family`
 * keeps only that family's entries.
 */
export function liveEntries(
  dump: (map: L.MapName) => Iterable<readonly [Uint8Array, Uint8Array]>,
  family?: IPFamily,
): Map<L.MapName, Map<string, string>> {
  const out = new Map<L.MapName, Map<string, string>>();
  for (const m of L.MAP_NAMES) {
    if (!L.MAPS[m].rendered) continue;
    const e = new Map<string, string>();
    for (const [k, v] of dump(m))
      if (family === undefined || L.familyOfEntry(m, k) === family) e.set(L.keyOf(k), L.valueText(v));
    out.set(m, e);
  }
  return out;
}

/** The live entries as the reconciler adopts them. */
export function* liveObjects(live: LiveEntries | undefined): IterableIterator<MapEntry> {
  for (const [kind, entries] of live ?? []) for (const [key, value] of entries) yield { kind, key, value };
}

/** Keys of the ports whose Service changed, by looking at every port (states without changedServicePorts). */
function scanChanged(state: SyncState): string[] {
  const out: string[] = [];
  for (const [k, sp] of state.services) if (state.changedServices.has(sp.serviceKey)) out.push(k);
  return out;
}

function inRange(id: number, family: IPFamily): boolean {
  const [lo, hi] = L.ID_RANGE[family];
  return id >= lo && id < hi;
}
