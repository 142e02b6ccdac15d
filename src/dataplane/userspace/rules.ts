// The userspace mode's kernel rules: one nftables table of its own per
// family (`ip kube-proxy-userspace` / `ip6 kube-proxy-userspace`), rewritten
// whole and atomically by every sync (`nft -f -`: add, delete, add). Owning a
// table means no jump rules in foreign chains, and cleanup is one
// `delete table`.
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
import type { PortalTarget, UserspacePlan } from './plan.js';

export const TABLE_NAME = 'kube-proxy-userspace';

export function nftFamilyOf(family: IPFamily): 'ip' | 'ip6' {
  return family === 'IPv4' ? 'ip' : 'ip6';
}

/** The script that removes our table (no error when it does not exist). */
export function renderCleanup(family: IPFamily): string {
  const t = `${nftFamilyOf(family)} ${TABLE_NAME}`;
  return `add table ${t}\ndelete table ${t}\n`;
}

interface Elements {
  servicePortals: string[];
  nodePortPortals: string[];
  noEndpointServices: string[];
  noEndpointNodePorts: string[];
}

/**
 * The full table for this plan. `ports` maps listener keys to the port the
 * listener is bound to; a portal whose listener has no port (it failed to
 * open) is rejected rather than redirected to nothing.
 */
export function renderRules(plan: UserspacePlan, ports: ReadonlyMap<string, number>, config: DataplaneConfig): string {
  const fam = nftFamilyOf(config.family);
  const t = `${fam} ${TABLE_NAME}`;
  const addrType = config.family === 'IPv4' ? 'ipv4_addr' : 'ipv6_addr';
  const loopback = config.family === 'IPv4' ? '127.0.0.0/8' : '::1';
  const el = collectElements(plan, ports);
  const out: string[] = [
    `add table ${t}`,
    `delete table ${t}`,
    `add table ${t} { comment "rules for kube-proxy-ts userspace mode" ; }`,
    `add chain ${t} portals-container { type nat hook prerouting priority -100 ; }`,
    `add chain ${t} portals-host { type nat hook output priority -100 ; }`,
    `add chain ${t} nodeports-container`,
    `add chain ${t} nodeports-host`,
    `add chain ${t} filter-input { type filter hook input priority -110 ; }`,
    `add chain ${t} filter-forward { type filter hook forward priority -110 ; }`,
    `add chain ${t} filter-output { type filter hook output priority -110 ; }`,
    `add chain ${t} reject-chain`,
    `add rule ${t} reject-chain reject`,
    `add map ${t} service-portals { type ${addrType} . inet_proto . inet_service : inet_service ; }`,
    `add map ${t} nodeport-portals { type inet_proto . inet_service : inet_service ; }`,
    `add map ${t} no-endpoint-services { type ${addrType} . inet_proto . inet_service : verdict ; }`,
    `add map ${t} no-endpoint-nodeports { type inet_proto . inet_service : verdict ; }`,
  ];
  const svcPort = `${fam} daddr . meta l4proto . th dport map @service-portals`;
  const npPort = 'meta l4proto . th dport map @nodeport-portals';
  out.push(`add rule ${t} portals-container meta l4proto { tcp, udp } redirect to : ${svcPort}`);
  out.push(`add rule ${t} portals-host meta l4proto { tcp, udp } dnat to ${fam} saddr : ${svcPort}`);
  out.push(`add rule ${t} nodeports-container meta l4proto { tcp, udp } redirect to : ${npPort}`);
  out.push(`add rule ${t} nodeports-host meta l4proto { tcp, udp } dnat to ${fam} saddr : ${npPort}`);
  for (const chain of ['filter-input', 'filter-forward', 'filter-output']) {
    out.push(`add rule ${t} ${chain} ${fam} daddr . meta l4proto . th dport vmap @no-endpoint-services`);
  }
  // Which local destinations count as NodePort addresses (upstream nodePortAddresses).
  const npMatch = nodePortMatch(config, fam, loopback);
  if (npMatch !== null) {
    if (npMatch.set.length > 0) {
      out.push(`add set ${t} nodeport-ips { type ${addrType} ; flags interval ; }`);
      out.push(`add element ${t} nodeport-ips { ${npMatch.set.join(', ')} }`);
    }
    out.push(`add rule ${t} portals-container fib daddr type local ${npMatch.cond}jump nodeports-container`);
    out.push(`add rule ${t} portals-host fib daddr type local ${npMatch.cond}jump nodeports-host`);
    out.push(`add rule ${t} filter-input ${npMatch.cond}meta l4proto . th dport vmap @no-endpoint-nodeports`);
  }
  addElements(out, t, 'service-portals', el.servicePortals);
  addElements(out, t, 'nodeport-portals', el.nodePortPortals);
  addElements(out, t, 'no-endpoint-services', el.noEndpointServices);
  addElements(out, t, 'no-endpoint-nodeports', el.noEndpointNodePorts);
  return out.join('\n') + '\n';
}

/**
 * The condition (with trailing space) that selects NodePort destinations
 * among local ones, plus the set it uses; null when no address of this
 * family may serve NodePorts.
 */
function nodePortMatch(config: DataplaneConfig, fam: string, loopback: string): { cond: string; set: string[] } | null {
  if (config.nodePortAddresses === null) {
    return { cond: config.localhostNodePorts ? '' : `${fam} daddr != ${loopback} `, set: [] };
  }
  const cidrs = config.nodePortAddresses
    .map((c) => parseCIDR(c))
    .filter((c) => c !== null && c.family === config.family)
    .map((c) => c!.text);
  if (cidrs.length === 0) return null;
  return { cond: `${fam} daddr @nodeport-ips `, set: [...new Set(cidrs)].sort() };
}

function collectElements(plan: UserspacePlan, ports: ReadonlyMap<string, number>): Elements {
  const el: Elements = { servicePortals: [], nodePortPortals: [], noEndpointServices: [], noEndpointNodePorts: [] };
  // A map rejects duplicate keys in one transaction, and a key both
  // redirected and refused would be refused (filter runs first): when a
  // Service address is claimed twice, the first portal wins.
  const seen = new Set<string>();
  const add = (redirects: string[], refusals: string[], key: string, target: PortalTarget) => {
    if (seen.has(key)) return;
    seen.add(key);
    const port = target.kind === 'listener' ? ports.get(target.listener) : undefined;
    if (port !== undefined) redirects.push(`${key} : ${port}`);
    else refusals.push(`${key} : ${target.kind === 'drop' ? 'drop' : 'goto reject-chain'}`);
  };
  for (const p of plan.portals) {
    const proto = p.protocol.toLowerCase();
    add(el.servicePortals, el.noEndpointServices, `${p.clusterIP} . ${proto} . ${p.port}`, p.internal);
    if (!p.external) continue;
    for (const ip of p.externalIPs)
      add(el.servicePortals, el.noEndpointServices, `${ip} . ${proto} . ${p.port}`, p.external);
    if (p.nodePort > 0) add(el.nodePortPortals, el.noEndpointNodePorts, `${proto} . ${p.nodePort}`, p.external);
  }
  return el;
}

function addElements(out: string[], t: string, map: string, elements: readonly string[]): void {
  for (let i = 0; i < elements.length; i += 1000)
    out.push(`add element ${t} ${map} { ${elements.slice(i, i + 1000).join(', ')} }`);
}
