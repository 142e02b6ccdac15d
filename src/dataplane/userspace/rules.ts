// The userspace mode's kernel rules: one nftables table of its own per
// family (`ip kube-proxy-userspace` / `ip6 kube-proxy-userspace`), built of
// the nftables mode's objects. The first sync (and the first after a
// failure or drift) replaces it whole and atomically (one Transaction:
// renderStatic's add, delete, add and static part, then every portal's
// element); later syncs change only the elements of the portals that
// changed (driver.ts). Owning a table means no jump rules in foreign chains,
// and cleanup is one `delete table`.
//
// The chains play the roles of old upstream's KUBE-PORTALS-CONTAINER /
// KUBE-PORTALS-HOST / KUBE-NODEPORT-CONTAINER / KUBE-NODEPORT-HOST:
//   portals-container  nat prerouting: flows arriving from pods and other hosts
//   portals-host       nat output:     flows the node itself opens
//   nodeports-container / nodeports-host   NodePorts, jumped from the two
//                      above for local destinations
// Listeners bind the wildcard address. Arriving flows are REDIRECTed to the
// listener's port ("redirect to :P": the destination becomes the incoming
// interface's primary address). The node's own flows are DNATed to their
// own source address ("dnat to ip saddr : P") rather than REDIRECTed (which
// would make them 127.0.0.1): a UDP reply from a wildcard socket leaves from
// the address the routing picks, and only for the flow's own source address
// is that the address the flow was sent to, so only then can conntrack undo
// the NAT on the reply.
// Ports come from maps (`... redirect to : ip daddr . meta l4proto . th dport
// map @service-portals`), so a sync with 1,000 services is still one rule.
//
// Portals without endpoints are refused in filter chains at priority -110
// (before nat, so nothing redirects them): REJECT (TCP reset / ICMP port
// unreachable) when the service has no endpoints at all, DROP when it has
// endpoints but none under its Local policy (upstream 2.11).
import { parseCIDR } from '../../core/ip.js';
import type { DataplaneConfig, IPFamily } from '../../core/types.js';
import { nftFamily, type NftFamily } from '../nftables/names.js';
import type { Element } from '../nftables/objects.js';
import * as R from '../nftables/rule.js';
import { Transaction } from '../nftables/transaction.js';
import type { PortalSpec, PortalTarget, UserspacePlan } from './plan.js';

export const TABLE_NAME = 'kube-proxy-userspace';
export const TABLE_COMMENT = 'rules for kube-proxy-ts userspace mode';

/** The table's chains, by role (trace.ts walks them in hook order). */
export const CHAINS = {
  portalsContainer: 'portals-container',
  portalsHost: 'portals-host',
  nodePortsContainer: 'nodeports-container',
  nodePortsHost: 'nodeports-host',
  filterInput: 'filter-input',
  filterForward: 'filter-forward',
  filterOutput: 'filter-output',
  reject: 'reject-chain',
} as const;

const C = CHAINS;
/** The maps from a Service address (address . protocol . port, or protocol . NodePort) to a listener's port. */
export const SERVICE_PORTALS = 'service-portals';
export const NODEPORT_PORTALS = 'nodeport-portals';
const NO_ENDPOINT_SERVICES = 'no-endpoint-services';
const NO_ENDPOINT_NODEPORTS = 'no-endpoint-nodeports';
const NODEPORT_IPS = 'nodeport-ips';

/** A transaction of our table (for this family). */
export function userspaceTransaction(family: IPFamily): Transaction {
  return new Transaction(nftFamily(family), TABLE_NAME);
}

/** What removes our table (no error when it does not exist). */
export function renderCleanup(family: IPFamily): Transaction {
  return userspaceTransaction(family).add({ kind: 'table' }).delete({ kind: 'table' });
}

/**
 * The full table for this plan. `ports` maps listener keys to the port the
 * listener is bound to; a portal whose listener has no port (it failed to
 * open) is rejected rather than redirected to nothing.
 */
export function renderRules(
  plan: UserspacePlan,
  ports: ReadonlyMap<string, number>,
  config: DataplaneConfig,
): Transaction {
  const tx = renderStatic(config);
  // A map rejects duplicate keys in one transaction, and a key both
  // redirected and refused would be refused (filter runs first): when a
  // Service address is claimed twice, the first portal wins.
  const seen = new Set<string>();
  const elements: Element[] = [];
  for (const p of plan.portals)
    portalKeys(p).forEach((key, i) => {
      if (seen.has(key)) return;
      seen.add(key);
      const target = i === 0 ? p.internal : p.external!;
      elements.push(portalElement(key, target, portOf(target, ports)));
    });
  for (const e of byMap(elements)) tx.add(e);
  return tx;
}

/**
 * Everything of the table but the portals' elements: the table itself
 * (replaced: add, delete, add), its chains and rules, its maps (empty) and
 * the NodePort address set. It depends on the config only.
 */
export function renderStatic(config: DataplaneConfig): Transaction {
  const fam = nftFamily(config.family);
  const addrType = config.family === 'IPv4' ? 'ipv4_addr' : 'ipv6_addr';
  const loopback = config.family === 'IPv4' ? '127.0.0.0/8' : '::1';
  const tx = userspaceTransaction(config.family);
  const rule = (chain: string, body: R.RuleBody) => tx.add(R.rule(chain, body));
  tx.add({ kind: 'table' })
    .delete({ kind: 'table' })
    .add({ kind: 'table', comment: TABLE_COMMENT })
    .add({ kind: 'chain', name: C.portalsContainer, type: 'nat', hook: 'prerouting', priority: -100 })
    .add({ kind: 'chain', name: C.portalsHost, type: 'nat', hook: 'output', priority: -100 })
    .add({ kind: 'chain', name: C.nodePortsContainer })
    .add({ kind: 'chain', name: C.nodePortsHost })
    .add({ kind: 'chain', name: C.filterInput, type: 'filter', hook: 'input', priority: -110 })
    .add({ kind: 'chain', name: C.filterForward, type: 'filter', hook: 'forward', priority: -110 })
    .add({ kind: 'chain', name: C.filterOutput, type: 'filter', hook: 'output', priority: -110 })
    .add({ kind: 'chain', name: C.reject });
  rule(C.reject, [R.reject]);
  tx.add({ kind: 'map', name: SERVICE_PORTALS, type: `${addrType} . inet_proto . inet_service : inet_service` })
    .add({ kind: 'map', name: NODEPORT_PORTALS, type: 'inet_proto . inet_service : inet_service' })
    .add({ kind: 'map', name: NO_ENDPOINT_SERVICES, type: `${addrType} . inet_proto . inet_service : verdict` })
    .add({ kind: 'map', name: NO_ENDPOINT_NODEPORTS, type: 'inet_proto . inet_service : verdict' });
  const tcpUdp = R.l4protos(['tcp', 'udp']);
  const svcKey = R.daddrProtoPort(fam);
  rule(C.portalsContainer, [tcpUdp, R.redirectMap(svcKey, SERVICE_PORTALS)]);
  rule(C.portalsHost, [tcpUdp, R.dnatSaddrMap(fam, svcKey, SERVICE_PORTALS)]);
  rule(C.nodePortsContainer, [tcpUdp, R.redirectMap(R.PROTO_PORT, NODEPORT_PORTALS)]);
  rule(C.nodePortsHost, [tcpUdp, R.dnatSaddrMap(fam, R.PROTO_PORT, NODEPORT_PORTALS)]);
  for (const chain of [C.filterInput, C.filterForward, C.filterOutput])
    rule(chain, [R.vmap(svcKey, NO_ENDPOINT_SERVICES)]);
  // Which local destinations count as NodePort addresses (upstream nodePortAddresses).
  const npMatch = nodePortMatch(config, fam, loopback);
  if (npMatch !== null) {
    if (npMatch.set.length > 0) {
      tx.add({ kind: 'set', name: NODEPORT_IPS, type: addrType, flags: ['interval'] });
      for (const cidr of npMatch.set) tx.add({ kind: 'element', set: NODEPORT_IPS, key: [cidr] });
    }
    const local = R.fibLocal('daddr');
    rule(C.portalsContainer, [local, ...npMatch.cond, R.jump(C.nodePortsContainer)]);
    rule(C.portalsHost, [local, ...npMatch.cond, R.jump(C.nodePortsHost)]);
    rule(C.filterInput, [...npMatch.cond, R.vmap(R.PROTO_PORT, NO_ENDPOINT_NODEPORTS)]);
  }
  return tx;
}

/**
 * The condition that selects NodePort destinations among local ones, plus
 * the set it uses; null when no address of this family may serve NodePorts.
 */
function nodePortMatch(
  config: DataplaneConfig,
  fam: NftFamily,
  loopback: string,
): { cond: R.RuleBody; set: string[] } | null {
  if (config.nodePortAddresses === null) {
    return { cond: config.localhostNodePorts ? [] : [R.addr(fam, 'daddr', loopback, true)], set: [] };
  }
  const cidrs = config.nodePortAddresses
    .map((c) => parseCIDR(c))
    .filter((c) => c !== null && c.family === config.family)
    .map((c) => c!.text);
  if (cidrs.length === 0) return null;
  return { cond: [R.addrIn(fam, 'daddr', NODEPORT_IPS)], set: [...new Set(cidrs)].sort() };
}

/**
 * The portals of one service port as their elements' key text: the ClusterIP
 * first (it uses the internal target), then the externalIPs and LB VIPs,
 * then the NodePort (these use the external target; none when the port is
 * not externally accessible). A Service address is `ip . proto . port`, a
 * NodePort `proto . nodePort` (two fields: that is how portalSlot tells the
 * maps apart).
 */
export function portalKeys(p: PortalSpec): string[] {
  const proto = p.protocol === 'TCP' ? 'tcp' : 'udp';
  const out = [`${p.clusterIP} . ${proto} . ${p.port}`];
  if (!p.external) return out;
  for (const ip of p.externalIPs) out.push(`${ip} . ${proto} . ${p.port}`);
  if (p.nodePort > 0) out.push(`${proto} . ${p.nodePort}`);
  return out;
}

/** The port a portal redirects to: its listener's, when the listener has one. */
export function portOf(target: PortalTarget, ports: ReadonlyMap<string, number>): number | undefined {
  return target.kind === 'listener' ? ports.get(target.listener) : undefined;
}

/**
 * Where a portal's element sits and its key: a redirect map when it is
 * redirected (its listener has a port), else a refusal map; NodePort or
 * Service address by the key's two or three fields. A delete names only this.
 */
export function portalSlot(key: string, redirected: boolean): Element {
  const fields = key.split(' . ');
  const nodePort = fields.length === 2;
  const set = redirected
    ? nodePort
      ? NODEPORT_PORTALS
      : SERVICE_PORTALS
    : nodePort
      ? NO_ENDPOINT_NODEPORTS
      : NO_ENDPOINT_SERVICES;
  return { kind: 'element', set, key: fields };
}

/**
 * A portal's element: redirected to its listener's port, or, with no port
 * (no endpoints, none under a Local policy, or a listener that did not
 * open), refused: REJECT, or DROP under a Local policy.
 */
export function portalElement(key: string, target: PortalTarget, port: number | undefined): Element {
  const value = port !== undefined ? String(port) : target.kind === 'drop' ? 'drop' : `goto ${C.reject}`;
  const { set, key: fields } = portalSlot(key, port !== undefined);
  // Built as a literal, not spread: the netlink encoder reads every element, and one shape keeps that fast.
  return { kind: 'element', set, key: fields, value: [value] };
}

const MAP_ORDER = [SERVICE_PORTALS, NODEPORT_PORTALS, NO_ENDPOINT_SERVICES, NO_ENDPOINT_NODEPORTS];

/** Portal elements map by map (redirects, NodePort redirects, refusals, NodePort refusals), each in its given order. */
export function byMap(elements: readonly Element[]): Element[] {
  const buckets = MAP_ORDER.map(() => [] as Element[]);
  for (const e of elements) buckets[MAP_ORDER.indexOf(e.set)]!.push(e);
  return buckets.flat();
}
