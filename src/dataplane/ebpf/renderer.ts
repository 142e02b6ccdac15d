// EbpfRenderer: a SyncState -> the operations that make one family's
// entries in the BPF maps what they should be. One renderer per family.
//
// Memory: the entries this family holds in the maps (as the renderer last
// wrote them), which service port owns which entry, and the service-port
// ids. A render diffs the desired entries against that memory, so only
// changed entries are written: adding one endpoint is a slot, a membership
// and a count (three writes), plus the same for the local set when the
// endpoint is local. Memory advances as the operations are built; when
// applying them fails the caller must call reset(), after which the next
// render is full and starts from what the kernel holds (`live`).
//
// Order of operations, so a packet never finds a half-built service:
// endpoint slots and Maglev tables first, then set counts, then services,
// then addresses; removals in the opposite order. Within a set, a removed
// endpoint's slot is refilled (by a new endpoint, or the last slot moved
// down) before the count shrinks, and the freed tail slot goes last.
import { cidrContains, isLoopback, joinHostPort, parseCIDR, parseIP } from '../../core/ip.js';
import type { DataplaneConfig, Endpoint, IPFamily, ServicePort, SyncState } from '../../core/types.js';
import { servicePortPolicy } from '../policy.js';
import { maglevTable } from './hash.js';
import * as L from './layout.js';
import type { MapOp } from './store.js';

export interface EbpfRendererOptions {
  /** Endpoint choice for services without the annotation (--ebpf-lb-algorithm). */
  readonly algorithm?: L.LbAlgorithm;
  /** Maglev table size, a prime (--ebpf-maglev-table-size). */
  readonly maglevM?: number;
  /** Set CFG_TRAFFIC: the programs count per-Service traffic (--service-traffic-metrics; see traffic.ts). */
  readonly trafficCounters?: boolean;
}

export interface IfaceInfo {
  readonly index: number;
  readonly name: string;
  readonly master: number;
}

export interface EbpfRenderInput {
  readonly state: SyncState;
  /** The node's addresses of this family now; default config.localIPs. */
  readonly localIPs?: readonly string[];
  /** Interfaces, for the bridge and interface-prefix local detectors. */
  readonly ifaces?: readonly IfaceInfo[];
  /** The node's network namespace cookie (socket-level load balancing). */
  readonly netnsCookie?: bigint;
  /**
   * This family's entries in the kernel now (L.keyOf(key) -> value per map),
   * read when needsLive() says so. Absent: the maps are taken as empty.
   */
  readonly live?: LiveEntries;
}

export type LiveEntries = ReadonlyMap<L.MapName, ReadonlyMap<string, Uint8Array>>;

export interface EbpfRenderResult {
  readonly ops: MapOp[];
  readonly full: boolean;
  /** Keys of the service ports this render recomputed (every port on a full render). */
  readonly ports: readonly string[];
  /** Service ports left out, with the reason (e.g. an address another port already serves). */
  readonly skipped: ReadonlyArray<{ readonly servicePort: string; readonly reason: string }>;
  readonly counters: { readonly servicePorts: number; readonly writes: number };
}

type Entries = Map<L.MapName, Map<string, Uint8Array>>;
const NODE_OWNER = '\0node';
const LIVE_OWNER = '\0live';

/** What one owner (a service port, the node, the adopted live state) puts in the maps. */
interface Contribution {
  readonly entries: Array<[L.MapName, string, Uint8Array]>;
  readonly addrs: Map<string, number>;
  serviceKey: string;
}

function emptyEntries(): Entries {
  return new Map(L.MAP_NAMES.map((m) => [m, new Map<string, Uint8Array>()]));
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Render order of updates (removals run in reverse). */
const ORDER: readonly L.MapName[] = [
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
];

export class EbpfRenderer {
  private readonly family: IPFamily;
  private readonly algorithm: L.LbAlgorithm;
  private readonly maglevM: number;
  private readonly trafficCounters: boolean;
  private entries: Entries = emptyEntries();
  /** Owner (service-port key, NODE_OWNER, LIVE_OWNER) -> what it put in the maps. */
  private owners = new Map<string, Contribution>();
  /** Service key -> its port keys that own entries (partial renders find withdrawn ports here). */
  private portsOfService = new Map<string, Set<string>>();
  /** svc entry (hex key) -> the port that owns it. */
  private svcOwner = new Map<string, string>();
  /** Address -> owner -> the flags it asks for; the addrs entry is their union. */
  private addrRefs = new Map<string, Map<string, number>>();
  private ids = new Map<string, number>();
  private usedIds = new Set<number>();
  /** After adopting live entries: ids found there, kept for the ports that had them. */
  private liveIds = new Set<number>();
  private freeIds: number[] = [];
  private nextId: number;
  private known = false;

  constructor(
    private readonly config: DataplaneConfig,
    opts: EbpfRendererOptions = {},
  ) {
    this.family = config.family;
    this.algorithm = opts.algorithm ?? 'random';
    this.maglevM = opts.maglevM ?? 16381;
    this.trafficCounters = opts.trafficCounters ?? false;
    this.nextId = L.ID_RANGE[this.family][0];
  }

  /** True when the next render must be given what the kernel holds (`live`). */
  needsLive(): boolean {
    return !this.known;
  }

  /** The id of a service port this renderer programs (undefined for ports it does not, e.g. SCTP). */
  idOf(servicePortKey: string): number | undefined {
    return this.ids.get(servicePortKey);
  }

  /** Forget everything; the next render is full and diffs against `live`. */
  reset(): void {
    this.known = false;
    this.entries = emptyEntries();
    this.owners.clear();
    this.portsOfService.clear();
    this.svcOwner.clear();
    this.addrRefs.clear();
    this.ids.clear();
    this.usedIds.clear();
    this.freeIds = [];
    this.nextId = L.ID_RANGE[this.family][0];
  }

  /**
   * The operations for this state. A partial render touches only the ports
   * of changed Services (state.changedServicePorts, or a scan when the
   * state does not carry it) and the node-level entries: its cost follows
   * the change, not the number of Services.
   */
  render(input: EbpfRenderInput): EbpfRenderResult {
    const full = input.state.fullSync || !this.known;
    if (!this.known) this.adopt(input.live);
    const state = input.state;
    const skipped: Array<{ servicePort: string; reason: string }> = [];
    const overlay = new Map<L.MapName, Map<string, Uint8Array | null>>(L.MAP_NAMES.map((m) => [m, new Map()]));
    const put = (m: L.MapName, k: string, v: Uint8Array | null) => overlay.get(m)!.set(k, v);

    // Which service ports to (re)compute: all, or those of changed Services (before and after).
    const redo = new Set<string>();
    if (full) {
      for (const k of state.services.keys()) redo.add(k);
      for (const k of this.owners.keys()) if (k !== NODE_OWNER) redo.add(k);
    } else {
      for (const k of state.changedServicePorts ?? scanChanged(state)) redo.add(k);
      for (const svc of state.changedServices) for (const k of this.portsOfService.get(svc) ?? []) redo.add(k);
    }

    // Withdraw their old contributions, then add the new ones (in key order: on a
    // clash inside one render the first port wins).
    const addrTouched = new Set<string>();
    for (const key of redo) this.withdraw(key, put, addrTouched, !state.services.has(key));
    const claimedNow = new Set<string>();
    for (const key of [...redo].filter((k) => state.services.has(k)).sort()) {
      const sp = state.services.get(key)!;
      const c = this.contribution(sp, state, claimedNow, skipped);
      this.own(key, sp.serviceKey, c, put, addrTouched);
    }

    // Node-level entries: always recomputed (a handful).
    this.withdraw(NODE_OWNER, put, addrTouched, false);
    this.own(NODE_OWNER, NODE_OWNER, this.nodeContribution(input), put, addrTouched);

    // Addresses: the union of every owner's flags.
    for (const a of addrTouched) {
      let flags = 0;
      for (const f of this.addrRefs.get(a)?.values() ?? []) flags |= f;
      put('addrs', L.keyOf(L.encodeAddrKey(a)), flags === 0 ? null : L.encodeU32(flags));
    }

    const ops = this.diff(overlay);
    for (const [m, o] of overlay) {
      const e = this.entries.get(m)!;
      for (const [k, v] of o) {
        if (v === null) e.delete(k);
        else e.set(k, v);
      }
    }
    this.known = true;
    this.liveIds.clear();
    return {
      ops,
      full,
      ports: [...redo],
      skipped,
      counters: { servicePorts: state.services.size, writes: ops.length },
    };
  }

  /** Take back what owner put in the maps (its svc entries, its address flags). */
  private withdraw(
    owner: string,
    put: (m: L.MapName, k: string, v: null) => void,
    addrTouched: Set<string>,
    gone: boolean,
  ): void {
    const old = this.owners.get(owner);
    if (!old) return;
    for (const [m, k] of old.entries) {
      put(m, k, null);
      if (m === 'svc' && this.svcOwner.get(k) === owner) this.svcOwner.delete(k);
    }
    for (const a of old.addrs.keys()) {
      this.addrRefs.get(a)?.delete(owner);
      if (this.addrRefs.get(a)?.size === 0) this.addrRefs.delete(a);
      addrTouched.add(a);
    }
    this.owners.delete(owner);
    this.portsOfService.get(old.serviceKey)?.delete(owner);
    if (gone) this.releaseId(owner);
  }

  private own(
    owner: string,
    serviceKey: string,
    c: Contribution,
    put: (m: L.MapName, k: string, v: Uint8Array) => void,
    addrTouched: Set<string>,
  ): void {
    c.serviceKey = serviceKey;
    for (const [m, k, v] of c.entries) {
      put(m, k, v);
      if (m === 'svc') this.svcOwner.set(k, owner);
    }
    for (const [a, f] of c.addrs) {
      let refs = this.addrRefs.get(a);
      if (!refs) this.addrRefs.set(a, (refs = new Map()));
      refs.set(owner, f);
      addrTouched.add(a);
    }
    this.owners.set(owner, c);
    let ports = this.portsOfService.get(serviceKey);
    if (!ports) this.portsOfService.set(serviceKey, (ports = new Set()));
    ports.add(owner);
  }

  /** The ops that make the maps hold the overlay, in the safe order. */
  private diff(overlay: Map<L.MapName, Map<string, Uint8Array | null>>): MapOp[] {
    const updates: MapOp[] = [];
    const deletes: MapOp[] = [];
    for (const m of ORDER) {
      const before = this.entries.get(m)!;
      for (const [k, a] of overlay.get(m) ?? []) {
        const b = before.get(k);
        if (a !== null && (b === undefined || !sameBytes(a, b)))
          updates.push({ map: m, op: 'update', key: L.keyBytes(k), value: a });
        else if (a === null && b !== undefined) deletes.push({ map: m, op: 'delete', key: L.keyBytes(k) });
      }
    }
    // Removals run in the reverse order: services before their sets, a freed tail
    // slot after the count that stops pointing at it.
    const byOrder = (o: MapOp) => ORDER.indexOf(o.map);
    deletes.sort((x, y) => byOrder(y) - byOrder(x));
    return [...updates, ...deletes];
  }

  // ---- service ports ----------------------------------------------------

  private contribution(
    sp: ServicePort,
    state: SyncState,
    claimedNow: Set<string>,
    skipped: Array<{ servicePort: string; reason: string }>,
  ): Contribution {
    const entries: Array<[L.MapName, string, Uint8Array]> = [];
    const addrs = new Map<string, number>();
    const c: Contribution = { entries, addrs, serviceKey: sp.serviceKey };
    const before = this.entries;
    if (sp.protocol === 'SCTP') {
      skipped.push({ servicePort: sp.key, reason: 'SCTP is not translated by the ebpf programs' });
      return c;
    }
    const id = this.idFor(sp, before);
    entries.push(['names', L.keyOf(L.encodeU32(id)), L.encodeName(sp.key)]);
    const policy = servicePortPolicy(sp, state.categorized.get(sp.key));
    const algo: L.LbAlgorithm =
      sp.lbAlgorithm === 'maglev' || sp.lbAlgorithm === 'random' ? sp.lbAlgorithm : this.algorithm;
    const cluster = sp.usesClusterEndpoints ? policy.clusterEndpoints : [];
    const local = sp.usesLocalEndpoints ? policy.localEndpoints : [];
    const clusterSet = cluster.length ? L.clusterSetOf(id) : 0;
    const localSet = local.length ? L.localSetOf(id) : 0;
    // Membership is what ClientIP affinity checks a remembered endpoint against; nothing else reads it.
    const members = sp.stickyMaxAgeSeconds > 0;
    if (clusterSet) this.setEntries(clusterSet, cluster, algo, members, before, entries);
    if (localSet) this.setEntries(localSet, local, algo, members, before, entries);

    const base = policy.hasEndpoints ? 0 : L.SVC_NO_ENDPOINTS;
    const value = (kind: L.SvcKind, flags: number) =>
      L.encodeSvcValue({
        svcId: id,
        clusterSet,
        localSet,
        affinitySecs: sp.stickyMaxAgeSeconds,
        flags: base | flags,
        kind,
        algo,
      });
    // Two ports on one (address, port, protocol) cannot both be served. The
    // newer definition wins (a port changed in this render takes the entry
    // from one that did not change); within one render the first in key
    // order wins. The loser is reported.
    const frontend = (addr: string, port: number, kind: L.SvcKind, flags: number) => {
      const k = L.keyOf(L.encodeSvcKey({ addr, port, proto: sp.protocol }));
      const what = `${joinHostPort(addr, port)}/${sp.protocol}`;
      const holder = this.svcOwner.get(k);
      if (claimedNow.has(k) && holder !== sp.key) {
        skipped.push({ servicePort: sp.key, reason: `${what} is served by ${holder}` });
        return;
      }
      if (holder !== undefined && holder !== sp.key) {
        const old = this.owners.get(holder);
        const i = old ? old.entries.findIndex(([m, ek]) => m === 'svc' && ek === k) : -1;
        if (i >= 0) old!.entries.splice(i, 1);
        skipped.push({ servicePort: holder, reason: `${what} is now served by ${sp.key}` });
      }
      claimedNow.add(k);
      entries.push(['svc', k, value(kind, flags)]);
    };
    const extLocal = sp.externalPolicyLocal ? L.SVC_LOCAL_POLICY : 0;
    if (sp.clusterIP) {
      frontend(sp.clusterIP, sp.port, 'clusterIP', sp.internalPolicyLocal ? L.SVC_LOCAL_POLICY : 0);
      addrs.set(sp.clusterIP, L.ADDR_SERVICE | L.ADDR_CLUSTER_IP);
    }
    if (sp.nodePort) frontend(L.anyAddr(this.family), sp.nodePort, 'nodePort', extLocal);
    for (const ip of sp.externalIPs) {
      frontend(ip, sp.port, 'externalIP', extLocal);
      addrs.set(ip, (addrs.get(ip) ?? 0) | L.ADDR_SERVICE);
    }
    const ranges = sp.loadBalancerSourceRanges;
    for (const ip of sp.loadBalancerVIPs) {
      frontend(ip, sp.port, 'loadBalancer', extLocal | (ranges.length ? L.SVC_SOURCE_RANGES : 0));
      addrs.set(ip, (addrs.get(ip) ?? 0) | L.ADDR_SERVICE);
    }
    if (ranges.length && sp.loadBalancerVIPs.length) this.sourceRangeEntries(sp, id, state, entries);
    return c;
  }

  /** loadBalancerSourceRanges, plus the LB IPs themselves when a range holds the node IP (VIP hairpin). */
  private sourceRangeEntries(
    sp: ServicePort,
    id: number,
    state: SyncState,
    entries: Array<[L.MapName, string, Uint8Array]>,
  ): void {
    const one = L.encodeU8(1);
    const nodeIP = state.node.nodeIPs[this.family];
    let nodeInRange = false;
    for (const r of sp.loadBalancerSourceRanges) {
      const c = parseCIDR(r);
      if (!c || c.family !== this.family) continue;
      entries.push([
        'lbSrc',
        L.keyOf(L.encodeLpmSvcKey({ svcId: id, addr: parseIP(c.text.split('/')[0])!.text, prefix: c.prefix })),
        one,
      ]);
      if (nodeIP && cidrContains(c, nodeIP)) nodeInRange = true;
    }
    if (!nodeInRange) return;
    const host = this.family === 'IPv4' ? 32 : 128;
    for (const ip of sp.loadBalancerVIPs)
      entries.push(['lbSrc', L.keyOf(L.encodeLpmSvcKey({ svcId: id, addr: ip, prefix: host })), one]);
  }

  /** One endpoint set: slots kept where they were, count, membership, Maglev table. */
  private setEntries(
    setId: number,
    eps: readonly Endpoint[],
    algo: L.LbAlgorithm,
    members: boolean,
    before: Entries,
    entries: Array<[L.MapName, string, Uint8Array]>,
  ): void {
    const slots = assignSlots(previousSlots(before, setId), eps);
    const byKey = new Map(eps.map((e) => [joinHostPort(e.ip, e.port), e]));
    slots.forEach((key, slot) => {
      const e = byKey.get(key)!;
      entries.push(['eps', L.keyOf(L.encodeEpKey({ setId, slot })), L.encodeEpValue({ addr: e.ip, port: e.port })]);
      if (members)
        entries.push(['members', L.keyOf(L.encodeMemberKey({ setId, addr: e.ip, port: e.port })), L.encodeU32(slot)]);
    });
    entries.push(['sets', L.keyOf(L.encodeU32(setId)), L.encodeSetValue(slots.length)]);
    if (algo === 'maglev') {
      // The table is computed over the endpoints in a fixed order, not slot order (which
      // depends on each node's history), so every node maps a flow to the same endpoint.
      const canonical = [...slots].sort();
      const slotOf = new Map(slots.map((k, i) => [k, i]));
      const table = maglevTable(canonical, this.maglevM).map((i) => slotOf.get(canonical[i]!)!);
      entries.push(['maglev', L.keyOf(L.encodeU32(setId)), L.encodeMaglev(table)]);
    }
  }

  // ---- ids --------------------------------------------------------------

  /** A stable id per service port: kept across renders, recovered from `live` after a restart. */
  private idFor(sp: ServicePort, before: Entries): number {
    const have = this.ids.get(sp.key);
    if (have !== undefined) return have;
    let id: number | undefined;
    if (sp.clusterIP) {
      const v = before
        .get('svc')!
        .get(L.keyOf(L.encodeSvcKey({ addr: sp.clusterIP, port: sp.port, proto: sp.protocol })));
      const live = v ? L.decodeSvcValue(v).svcId : undefined;
      if (live !== undefined && this.liveIds.has(live) && !this.usedIds.has(live)) id = live;
    }
    while (id === undefined) {
      const next = this.freeIds.pop() ?? this.nextId++;
      if (!this.usedIds.has(next) && !this.liveIds.has(next)) id = next;
    }
    this.ids.set(sp.key, id);
    this.usedIds.add(id);
    return id;
  }

  private releaseId(key: string): void {
    const id = this.ids.get(key);
    if (id === undefined) return;
    this.ids.delete(key);
    this.usedIds.delete(id);
    this.freeIds.push(id);
  }

  // ---- node-level entries -------------------------------------------------

  private nodeContribution(input: EbpfRenderInput): Contribution {
    const entries: Array<[L.MapName, string, Uint8Array]> = [];
    const addrs = new Map<string, number>();
    const cfgFlags = (this.config.masqueradeAll ? L.CFG_MASQ_ALL : 0) | (this.trafficCounters ? L.CFG_TRAFFIC : 0);
    const det = this.config.localDetector;
    let detect = 0;
    const one = L.encodeU8(1);
    if (det.kind === 'cidr') {
      for (const r of det.cidrs) {
        const c = parseCIDR(r);
        if (!c || c.family !== this.family) continue;
        detect = L.CFG_DETECT_CIDR;
        entries.push(['podCidrs', L.keyOf(L.encodeLpmKey({ addr: c.text.split('/')[0]!, prefix: c.prefix })), one]);
      }
    } else if (det.kind === 'bridge' || det.kind === 'prefix') {
      detect = L.CFG_DETECT_IFACE;
      const ifaces = input.ifaces ?? [];
      const bridge = det.kind === 'bridge' ? ifaces.find((i) => i.name === det.interfaceName) : undefined;
      for (const i of ifaces) {
        const pod =
          det.kind === 'prefix'
            ? i.name.startsWith(det.interfacePrefix)
            : bridge !== undefined && (i.index === bridge.index || i.master === bridge.index);
        if (pod)
          entries.push([
            'ifaces',
            L.keyOf(L.encodeIfaceKey({ ifindex: i.index, family: this.family })),
            L.encodeU32(L.IFACE_POD),
          ]);
      }
    }
    for (const r of input.state.serviceCIDRs) {
      const c = parseCIDR(r);
      if (c && c.family === this.family)
        entries.push(['svcCidrs', L.keyOf(L.encodeLpmKey({ addr: c.text.split('/')[0]!, prefix: c.prefix })), one]);
    }
    const npa = this.config.nodePortAddresses;
    for (const ip of input.localIPs ?? this.config.localIPs) {
      const p = parseIP(ip);
      if (!p || p.family !== this.family) continue;
      const nodePort = !isLoopback(p) && (npa === null || npa.some((r) => cidrContains(parseCIDR(r)!, p)));
      addrs.set(p.text, L.ADDR_LOCAL | (nodePort ? L.ADDR_NODEPORT : 0));
    }
    entries.push([
      'cfg',
      L.keyOf(L.encodeU32(L.familyIndex(this.family))),
      L.encodeCfgValue({
        mark: this.config.masqueradeMark,
        flags: L.CFG_ENABLED | detect | cfgFlags,
        netnsCookie: input.netnsCookie ?? 0n,
      }),
    ]);
    return { entries, addrs, serviceKey: NODE_OWNER };
  }

  // ---- after a restart or a failure ---------------------------------------

  /** Start from what the kernel holds for this family (or nothing). */
  private adopt(live: LiveEntries | undefined): void {
    this.reset();
    for (const [m, e] of live ?? []) for (const [k, v] of e) this.entries.get(m)!.set(k, v);
    // Everything live belongs to a pseudo-owner that the full render withdraws
    // (deleting what is not wanted) before the ports re-add what they want.
    const stale: Array<[L.MapName, string, Uint8Array]> = [];
    const addrs = new Map<string, number>();
    for (const [m, e] of this.entries) {
      if (m === 'addrs') for (const [k] of e) addrs.set(L.decodeAddrKey(L.keyBytes(k)), 0);
      else for (const [k, v] of e) stale.push([m, k, v]);
    }
    this.own(LIVE_OWNER, LIVE_OWNER, { entries: stale, addrs, serviceKey: LIVE_OWNER }, () => {}, new Set());
    // Ids in use by the live service entries stay with the ports that have them;
    // new ports get ids above them.
    for (const v of this.entries.get('svc')!.values()) {
      const id = L.decodeSvcValue(v).svcId;
      if (!inRange(id, this.family)) continue;
      this.liveIds.add(id);
      if (id >= this.nextId) this.nextId = id + 1;
    }
  }
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

/** The set's endpoints by slot, as the entries hold them ("ip:port"). */
function previousSlots(e: Entries, setId: number): string[] {
  const set = e.get('sets')!.get(L.keyOf(L.encodeU32(setId)));
  if (!set) return [];
  const n = L.decodeSetValue(set).count;
  const out: string[] = [];
  for (let slot = 0; slot < n; slot++) {
    const v = e.get('eps')!.get(L.keyOf(L.encodeEpKey({ setId, slot })));
    if (!v) break;
    const d = L.decodeEpValue(v);
    out.push(joinHostPort(d.addr, d.port));
  }
  return out;
}

/**
 * The new slot order: endpoints that stay keep their slot, new ones fill the
 * slots of removed ones, and what is still missing is appended or closed up
 * by moving the last slots down. A one-endpoint change touches one slot.
 */
export function assignSlots(prev: readonly string[], eps: readonly Endpoint[]): string[] {
  const want = new Set(eps.map((e) => joinHostPort(e.ip, e.port)));
  const slots: Array<string | null> = prev.map((k) => (want.has(k) ? k : null));
  const placed = new Set(slots.filter((k): k is string => k !== null));
  const fresh = [...want].filter((k) => !placed.has(k));
  for (let i = 0; i < slots.length && fresh.length; i++) if (slots[i] === null) slots[i] = fresh.shift()!;
  slots.push(...fresh);
  for (let i = 0; i < slots.length; i++) {
    if (slots[i] !== null) continue;
    while (slots.length > i && slots[slots.length - 1] === null) slots.pop();
    if (slots.length > i) slots[i] = slots.pop()!;
  }
  return slots.filter((k): k is string => k !== null);
}
