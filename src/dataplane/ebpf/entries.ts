// The entries a service port and the node want in the BPF maps, as keyed
// objects for the reconciler: the kind is the map, the key the map key's
// hex (L.keyOf) and the value its bytes. Pure functions of the SyncState,
// the port's id and what the maps hold now (endpoints keep their slots).
// Who owns which entry, and what to write, is the reconciler's business
// (driver.ts says how the ebpf mode uses it).
import { cidrContains, isLoopback, joinHostPort, parseCIDR, parseIP } from '../../core/ip.js';
import type { Keyed } from '../../core/objects.js';
import type { DataplaneConfig, Endpoint, IPFamily, ServicePort, SyncState } from '../../core/types.js';
import { servicePortPolicy } from '../policy.js';
import { usesMaglevTable } from '../../core/lbalgorithm.js';
import { maglevTable } from './hash.js';
import * as L from './layout.js';

/** A map entry as the reconciler keeps it: key and value one character per byte (L.keyOf, L.valueText). */
export type MapEntry = Keyed<L.MapName, string>;

export interface IfaceInfo {
  readonly index: number;
  readonly name: string;
  readonly master: number;
}

/** What rendering a service port needs besides the port itself. */
export interface PortContext {
  readonly family: IPFamily;
  /** Endpoint choice for ports without the annotation (--ebpf-lb-algorithm). */
  readonly algorithm: L.LbAlgorithm;
  readonly maglevM: number;
  /** --ebpf-lb-mode=dsr: external ports with eTP Cluster get a local set too (src/bpf/dsr.h). */
  readonly dsr?: boolean;
  /** What the maps hold under a key now (absent: undefined; unknown: null). */
  held(map: L.MapName, key: string): string | null | undefined;
  /**
   * Whether port may serve this svc entry (key: hex; what: for the report).
   * One (address, port, protocol) can be served by one port only; the
   * driver decides which and reports the loser.
   */
  claim(port: string, key: string, what: string): boolean;
}

const entry = (kind: L.MapName, key: Uint8Array, value: Uint8Array): MapEntry => ({
  kind,
  key: L.keyOf(key),
  value: L.valueText(value),
});

/** The entries of one service port with id `id` (not SCTP: the programs do not translate it). */
export function servicePortEntries(sp: ServicePort, id: number, state: SyncState, ctx: PortContext): MapEntry[] {
  const out: MapEntry[] = [entry('names', L.encodeU32(id), L.encodeName(sp.key))];
  const policy = servicePortPolicy(sp, state.categorized.get(sp.key));
  const algo: L.LbAlgorithm = sp.lbAlgorithm ?? ctx.algorithm;
  const cluster = sp.usesClusterEndpoints ? policy.clusterEndpoints : [];
  // DSR asks whether an endpoint is on this node: its membership of the local set, which an external
  // port then has even with no Local policy (the programs choose from it only under one).
  const dsrLocal = !!ctx.dsr && sp.externallyAccessible;
  const local = sp.usesLocalEndpoints ? policy.localEndpoints : dsrLocal ? cluster.filter((ep) => ep.isLocal) : [];
  const clusterSet = cluster.length ? L.clusterSetOf(id) : 0;
  const localSet = local.length ? L.localSetOf(id) : 0;
  // Membership is what ClientIP affinity checks a remembered endpoint against, and DSR an endpoint's place.
  const members = sp.stickyMaxAgeSeconds > 0;
  if (clusterSet) setEntries(clusterSet, cluster, algo, members, ctx, out);
  if (localSet) setEntries(localSet, local, algo, members || dsrLocal, ctx, out);

  const base = policy.hasEndpoints ? 0 : L.SVC_NO_ENDPOINTS;
  const frontend = (addr: string, port: number, kind: L.SvcKind, flags: number) => {
    const k = L.encodeSvcKey({ addr, port, proto: sp.protocol });
    const hex = L.keyOf(k);
    if (!ctx.claim(sp.key, hex, `${joinHostPort(addr, port)}/${sp.protocol}`)) return;
    const value = L.encodeSvcValue({
      svcId: id,
      clusterSet,
      localSet,
      affinitySecs: sp.stickyMaxAgeSeconds,
      flags: base | flags,
      kind,
      algo,
    });
    out.push({ kind: 'svc', key: hex, value: L.valueText(value) });
  };
  // One port may name an address twice (an external IP that is also a
  // load-balancer VIP): the map holds one entry per address, its flags ORed.
  const addrs = new Map<string, number>();
  const extLocal = sp.externalPolicyLocal ? L.SVC_LOCAL_POLICY : 0;
  if (sp.clusterIP) {
    frontend(sp.clusterIP, sp.port, 'clusterIP', sp.internalPolicyLocal ? L.SVC_LOCAL_POLICY : 0);
    addrs.set(sp.clusterIP, L.ADDR_SERVICE | L.ADDR_CLUSTER_IP);
  }
  if (sp.nodePort) frontend(L.anyAddr(ctx.family), sp.nodePort, 'nodePort', extLocal);
  for (const ip of sp.externalIPs) {
    frontend(ip, sp.port, 'externalIP', extLocal);
    addrs.set(ip, (addrs.get(ip) ?? 0) | L.ADDR_SERVICE);
  }
  const ranges = sp.loadBalancerSourceRanges;
  for (const ip of sp.loadBalancerVIPs) {
    frontend(ip, sp.port, 'loadBalancer', extLocal | (ranges.length ? L.SVC_SOURCE_RANGES : 0));
    addrs.set(ip, (addrs.get(ip) ?? 0) | L.ADDR_SERVICE);
  }
  if (ranges.length && sp.loadBalancerVIPs.length) sourceRangeEntries(sp, id, state, ctx.family, out);
  for (const [a, f] of addrs) out.push(entry('addrs', L.encodeAddrKey(a), L.encodeU32(f)));
  return out;
}

/** loadBalancerSourceRanges, plus the LB IPs themselves when a range holds the node IP (VIP hairpin). */
function sourceRangeEntries(sp: ServicePort, id: number, state: SyncState, family: IPFamily, out: MapEntry[]): void {
  const one = L.encodeU8(1);
  const nodeIP = state.node.nodeIPs[family];
  let nodeInRange = false;
  for (const r of sp.loadBalancerSourceRanges) {
    const c = parseCIDR(r);
    if (!c || c.family !== family) continue;
    const addr = parseIP(c.text.split('/')[0])!.text;
    out.push(entry('lbSrc', L.encodeLpmSvcKey({ svcId: id, addr, prefix: c.prefix }), one));
    if (nodeIP && cidrContains(c, nodeIP)) nodeInRange = true;
  }
  if (!nodeInRange) return;
  const host = family === 'IPv4' ? 32 : 128;
  for (const ip of sp.loadBalancerVIPs)
    out.push(entry('lbSrc', L.encodeLpmSvcKey({ svcId: id, addr: ip, prefix: host }), one));
}

/** One endpoint set: slots kept where they were, count, membership, Maglev table. */
function setEntries(
  setId: number,
  eps: readonly Endpoint[],
  algo: L.LbAlgorithm,
  members: boolean,
  ctx: PortContext,
  out: MapEntry[],
): void {
  const slots = assignSlots(previousSlots(ctx, setId), eps);
  const byKey = new Map(eps.map((e) => [joinHostPort(e.ip, e.port), e]));
  slots.forEach((key, slot) => {
    const e = byKey.get(key)!;
    out.push(entry('eps', L.encodeEpKey({ setId, slot }), L.encodeEpValue({ addr: e.ip, port: e.port })));
    if (members) out.push(entry('members', L.encodeMemberKey({ setId, addr: e.ip, port: e.port }), L.encodeU32(slot)));
  });
  out.push(entry('sets', L.encodeU32(setId), L.encodeSetValue(slots.length)));
  if (usesMaglevTable(algo)) {
    // The table is computed over the endpoints in a fixed order, not slot order (which
    // depends on each node's history), so every node maps a flow to the same endpoint.
    const canonical = [...slots].sort();
    const slotOf = new Map(slots.map((k, i) => [k, i]));
    const table = maglevTable(canonical, ctx.maglevM).map((i) => slotOf.get(canonical[i]!)!);
    out.push(entry('maglev', L.encodeU32(setId), L.encodeMaglev(table)));
  }
}

/** The set's endpoints by slot, as the maps hold them ("ip:port"). */
function previousSlots(ctx: PortContext, setId: number): string[] {
  const set = ctx.held('sets', L.keyOf(L.encodeU32(setId)));
  if (!set) return [];
  const n = L.decodeSetValue(L.keyBytes(set)).count;
  const out: string[] = [];
  for (let slot = 0; slot < n; slot++) {
    const v = ctx.held('eps', L.keyOf(L.encodeEpKey({ setId, slot })));
    if (!v) break;
    const d = L.decodeEpValue(L.keyBytes(v));
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
  if (prev.length === 0) return [...want]; // a new set (every set of a cold start): in order
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

/** What the node itself wants in the maps, beside the service ports. */
export interface NodeInput {
  readonly config: DataplaneConfig;
  readonly trafficCounters: boolean;
  /** --ebpf-lb-mode=dsr: CFG_DSR. */
  readonly dsr?: boolean;
  readonly state: SyncState;
  /** The node's addresses of this family now; default config.localIPs. */
  readonly localIPs?: readonly string[];
  /** Interfaces, for the bridge and interface-prefix local detectors. */
  readonly ifaces?: readonly IfaceInfo[];
  /** The node's network namespace cookie (socket-level load balancing). */
  readonly netnsCookie?: bigint;
}

/** The node-level entries: local-pod detectors, service CIDRs, node addresses, the family's settings. */
export function nodeEntries(input: NodeInput): MapEntry[] {
  const { config } = input;
  const family = config.family;
  const out: MapEntry[] = [];
  const cfgFlags =
    (config.masqueradeAll ? L.CFG_MASQ_ALL : 0) |
    (input.trafficCounters ? L.CFG_TRAFFIC : 0) |
    (input.dsr ? L.CFG_DSR : 0);
  const det = config.localDetector;
  let detect = 0;
  const one = L.encodeU8(1);
  if (det.kind === 'cidr') {
    for (const r of det.cidrs) {
      const c = parseCIDR(r);
      if (!c || c.family !== family) continue;
      detect = L.CFG_DETECT_CIDR;
      out.push(entry('podCidrs', L.encodeLpmKey({ addr: c.text.split('/')[0]!, prefix: c.prefix }), one));
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
      if (pod) out.push(entry('ifaces', L.encodeIfaceKey({ ifindex: i.index, family }), L.encodeU32(L.IFACE_POD)));
    }
  }
  for (const r of input.state.serviceCIDRs) {
    const c = parseCIDR(r);
    if (c && c.family === family)
      out.push(entry('svcCidrs', L.encodeLpmKey({ addr: c.text.split('/')[0]!, prefix: c.prefix }), one));
  }
  const npa = config.nodePortAddresses;
  const addrs = new Map<string, number>();
  for (const ip of input.localIPs ?? config.localIPs) {
    const p = parseIP(ip);
    if (!p || p.family !== family) continue;
    const nodePort = !isLoopback(p) && (npa === null || npa.some((r) => cidrContains(parseCIDR(r)!, p)));
    addrs.set(p.text, L.ADDR_LOCAL | (nodePort ? L.ADDR_NODEPORT : 0));
  }
  for (const [a, f] of addrs) out.push(entry('addrs', L.encodeAddrKey(a), L.encodeU32(f)));
  out.push(
    entry(
      'cfg',
      L.encodeU32(L.familyIndex(family)),
      L.encodeCfgValue({
        mark: config.masqueradeMark,
        flags: L.CFG_ENABLED | detect | cfgFlags,
        netnsCookie: input.netnsCookie ?? 0n,
      }),
    ),
  );
  return out;
}
