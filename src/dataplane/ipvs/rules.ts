// The iptables rules IPVS mode writes beside its virtual servers, in
// upstream's layout (pkg/proxy/ipvs/proxier.go writeIptablesRules): a few
// chains whose rules match the ipsets, so their size does not grow with the
// number of Services. One `iptables-restore --noflush` input per sync, filter
// then nat; the jump rules from the built-in chains are ensured separately.
import type { DataplaneConfig, IPFamily } from '../../core/types.js';
import type { JumpChain } from '../iptables/jumps.js';
import { detectorArgs } from '../iptables/renderer.js';
import { IPSET, ipsetInfo, ipsetName, type IpsetName } from './ipsets.js';

export const CHAIN = {
  SERVICES: 'KUBE-SERVICES',
  POSTROUTING: 'KUBE-POSTROUTING',
  NODE_PORT: 'KUBE-NODE-PORT',
  LOAD_BALANCER: 'KUBE-LOAD-BALANCER',
  MARK_MASQ: 'KUBE-MARK-MASQ',
  FORWARD: 'KUBE-FORWARD',
  PROXY_FIREWALL: 'KUBE-PROXY-FIREWALL',
  SOURCE_RANGES_FIREWALL: 'KUBE-SOURCE-RANGES-FIREWALL',
  IPVS_FILTER: 'KUBE-IPVS-FILTER',
  IPVS_OUT_FILTER: 'KUBE-IPVS-OUT-FILTER',
} as const;

/** Our chains per table (upstream iptablesChains), also what cleanup flushes and deletes. */
export const IPVS_CHAINS: { readonly nat: readonly string[]; readonly filter: readonly string[] } = {
  nat: [CHAIN.SERVICES, CHAIN.POSTROUTING, CHAIN.NODE_PORT, CHAIN.LOAD_BALANCER, CHAIN.MARK_MASQ],
  filter: [
    CHAIN.FORWARD,
    CHAIN.NODE_PORT,
    CHAIN.PROXY_FIREWALL,
    CHAIN.SOURCE_RANGES_FIREWALL,
    CHAIN.IPVS_FILTER,
    CHAIN.IPVS_OUT_FILTER,
  ],
};

const jc = (table: 'nat' | 'filter', from: string, to: string, comment: string): JumpChain => ({
  table,
  from,
  to,
  comment,
  extraArgs: [],
  onlyIfChainRendered: false,
});

/** The jump rules from the built-in chains (upstream iptablesJumpChain), each prepended. */
export const IPVS_JUMP_CHAINS: readonly JumpChain[] = [
  jc('nat', 'OUTPUT', CHAIN.SERVICES, 'kubernetes service portals'),
  jc('nat', 'PREROUTING', CHAIN.SERVICES, 'kubernetes service portals'),
  jc('nat', 'POSTROUTING', CHAIN.POSTROUTING, 'kubernetes postrouting rules'),
  jc('filter', 'FORWARD', CHAIN.FORWARD, 'kubernetes forwarding rules'),
  jc('filter', 'INPUT', CHAIN.NODE_PORT, 'kubernetes health check rules'),
  jc('filter', 'INPUT', CHAIN.PROXY_FIREWALL, 'kube-proxy firewall rules'),
  jc('filter', 'FORWARD', CHAIN.PROXY_FIREWALL, 'kube-proxy firewall rules'),
  jc('filter', 'INPUT', CHAIN.IPVS_FILTER, 'kubernetes ipvs access filter'),
  jc('filter', 'OUTPUT', CHAIN.IPVS_OUT_FILTER, 'kubernetes ipvs access filter'),
];

/**
 * Set-driven rules (upstream ipsetWithIptablesChain), written only while the
 * set has members. The LOCAL sets must come before their cluster-wide ones.
 */
const SET_RULES: ReadonlyArray<{
  set: IpsetName;
  table: 'nat' | 'filter';
  from: string;
  to: string;
  match: string;
  proto?: string;
}> = [
  { set: IPSET.LOOP_BACK, table: 'nat', from: CHAIN.POSTROUTING, to: 'MASQUERADE', match: 'dst,dst,src' },
  { set: IPSET.LOAD_BALANCER, table: 'nat', from: CHAIN.SERVICES, to: CHAIN.LOAD_BALANCER, match: 'dst,dst' },
  { set: IPSET.LOAD_BALANCER_LOCAL, table: 'nat', from: CHAIN.LOAD_BALANCER, to: 'RETURN', match: 'dst,dst' },
  { set: IPSET.NODE_PORT_LOCAL_TCP, table: 'nat', from: CHAIN.NODE_PORT, to: 'RETURN', match: 'dst', proto: 'tcp' },
  { set: IPSET.NODE_PORT_TCP, table: 'nat', from: CHAIN.NODE_PORT, to: CHAIN.MARK_MASQ, match: 'dst', proto: 'tcp' },
  { set: IPSET.NODE_PORT_LOCAL_UDP, table: 'nat', from: CHAIN.NODE_PORT, to: 'RETURN', match: 'dst', proto: 'udp' },
  { set: IPSET.NODE_PORT_UDP, table: 'nat', from: CHAIN.NODE_PORT, to: CHAIN.MARK_MASQ, match: 'dst', proto: 'udp' },
  {
    set: IPSET.NODE_PORT_LOCAL_SCTP,
    table: 'nat',
    from: CHAIN.NODE_PORT,
    to: 'RETURN',
    match: 'dst,dst',
    proto: 'sctp',
  },
  {
    set: IPSET.NODE_PORT_SCTP,
    table: 'nat',
    from: CHAIN.NODE_PORT,
    to: CHAIN.MARK_MASQ,
    match: 'dst,dst',
    proto: 'sctp',
  },
  {
    set: IPSET.LOAD_BALANCER_FW,
    table: 'filter',
    from: CHAIN.PROXY_FIREWALL,
    to: CHAIN.SOURCE_RANGES_FIREWALL,
    match: 'dst,dst',
  },
  {
    set: IPSET.LOAD_BALANCER_SOURCE_CIDR,
    table: 'filter',
    from: CHAIN.SOURCE_RANGES_FIREWALL,
    to: 'RETURN',
    match: 'dst,dst,src',
  },
  {
    set: IPSET.LOAD_BALANCER_SOURCE_IP,
    table: 'filter',
    from: CHAIN.SOURCE_RANGES_FIREWALL,
    to: 'RETURN',
    match: 'dst,dst,src',
  },
];

/** An LB address the node itself may not reach (source ranges that exclude the node). */
export interface NoNodeAccess {
  readonly ip: string;
  readonly protocol: 'tcp' | 'udp' | 'sctp';
  readonly port: number;
}

export interface IpvsRulesInput {
  readonly config: DataplaneConfig;
  /** Sets that hold at least one member after this sync. */
  readonly nonEmpty: ReadonlySet<IpsetName>;
  readonly noNodeAccess: readonly NoNodeAccess[];
  /** MASQUERADE --random-fully is available. */
  readonly randomFully: boolean;
}

const q = (s: string) => `"${s}"`;
const hex = (n: number) => `0x${n.toString(16)}`;

/** The restore input: `*filter ... COMMIT` then `*nat ... COMMIT`. */
export function renderIpvsRules(inp: IpvsRulesInput): string {
  const { config, nonEmpty } = inp;
  const fam: IPFamily = config.family;
  const set = (n: IpsetName) => ipsetName(n, fam);
  const comment = (n: IpsetName) => `-m comment --comment ${q(ipsetInfo(n).comment)}`;
  const mark = hex(config.masqueradeMark);
  const nat: string[] = [];
  const filter: string[] = [];
  const add = (table: 'nat' | 'filter', line: string) => (table === 'nat' ? nat : filter).push(line);

  nat.push(`-A ${CHAIN.SERVICES} -s ${fam === 'IPv4' ? '127.0.0.0/8' : '::1/128'} -j RETURN`);
  for (const r of SET_RULES) {
    if (!nonEmpty.has(r.set)) continue;
    const proto = r.proto ? `-p ${r.proto} ` : '';
    add(r.table, `-A ${r.from} ${proto}${comment(r.set)} -m set --match-set ${set(r.set)} ${r.match} -j ${r.to}`);
  }
  if (nonEmpty.has(IPSET.CLUSTER_IP)) {
    const base = `-A ${CHAIN.SERVICES} ${comment(IPSET.CLUSTER_IP)} -m set --match-set ${set(IPSET.CLUSTER_IP)}`;
    const det = detectorArgs(config.localDetector, fam);
    if (config.masqueradeAll) nat.push(`${base} dst,dst -j ${CHAIN.MARK_MASQ}`);
    else if (det.ifNotLocal) nat.push(`${base} dst,dst ${det.ifNotLocal.join(' ')} -j ${CHAIN.MARK_MASQ}`);
    // Without a detector, masquerade node-originated traffic whose source is a
    // Service address (kube-ipvs0 makes the VIP the preferred source).
    else nat.push(`${base} src,dst -j ${CHAIN.MARK_MASQ}`);
  }
  const externalAccepts = (n: IpsetName) => {
    const base = `-A ${CHAIN.SERVICES} ${comment(n)} -m set --match-set ${set(n)} dst,dst`;
    // Traffic from off the machine (not bridged from a pod, not local), and
    // traffic to external IPs that happen to be local addresses.
    nat.push(`${base} -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT`);
    nat.push(`${base} -m addrtype --dst-type LOCAL -j ACCEPT`);
  };
  if (nonEmpty.has(IPSET.EXTERNAL_IP)) {
    nat.push(
      `-A ${CHAIN.SERVICES} ${comment(IPSET.EXTERNAL_IP)} -m set --match-set ${set(IPSET.EXTERNAL_IP)} dst,dst -j ${CHAIN.MARK_MASQ}`,
    );
    externalAccepts(IPSET.EXTERNAL_IP);
  }
  if (nonEmpty.has(IPSET.EXTERNAL_IP_LOCAL)) externalAccepts(IPSET.EXTERNAL_IP_LOCAL);
  nat.push(`-A ${CHAIN.SERVICES} -m addrtype --dst-type LOCAL -j ${CHAIN.NODE_PORT}`);
  nat.push(`-A ${CHAIN.LOAD_BALANCER} -j ${CHAIN.MARK_MASQ}`);
  filter.push(`-A ${CHAIN.SOURCE_RANGES_FIREWALL} -j DROP`);
  for (const e of inp.noNodeAccess) {
    filter.push(
      `-A ${CHAIN.IPVS_OUT_FILTER} -s ${e.ip} -m ipvs --vaddr ${e.ip} --vproto ${e.protocol} --vport ${e.port} -j DROP`,
    );
  }
  // Accept what IPVS serves before other rules of the table can block it.
  for (const n of [IPSET.CLUSTER_IP, IPSET.LOAD_BALANCER] as const)
    if (nonEmpty.has(n)) nat.push(`-A ${CHAIN.SERVICES} -m set --match-set ${set(n)} dst,dst -j ACCEPT`);
  filter.push(
    `-A ${CHAIN.FORWARD} -m comment --comment "kubernetes forwarding rules" -m mark --mark ${mark}/${mark} -j ACCEPT`,
    `-A ${CHAIN.FORWARD} -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
    `-A ${CHAIN.NODE_PORT} ${comment(IPSET.HEALTH_CHECK_NODE_PORT)} -m set --match-set ${set(IPSET.HEALTH_CHECK_NODE_PORT)} dst -j ACCEPT`,
  );
  // Only Service ports of kube-ipvs0 addresses are open to new connections (upstream issue #72236).
  for (const n of [IPSET.LOAD_BALANCER, IPSET.CLUSTER_IP, IPSET.EXTERNAL_IP, IPSET.EXTERNAL_IP_LOCAL] as const)
    filter.push(`-A ${CHAIN.IPVS_FILTER} -m set --match-set ${set(n)} dst,dst -j RETURN`);
  filter.push(
    `-A ${CHAIN.IPVS_FILTER} -m set --match-set ${set(IPSET.HEALTH_CHECK_NODE_PORT)} dst -j RETURN`,
    `-A ${CHAIN.IPVS_FILTER} -m conntrack --ctstate NEW -m set --match-set ${set(IPSET.IPVS_IPS)} dst -j REJECT`,
  );
  nat.push(
    `-A ${CHAIN.POSTROUTING} -m mark ! --mark ${mark}/${mark} -j RETURN`,
    `-A ${CHAIN.POSTROUTING} -j MARK --xor-mark ${mark}`,
    `-A ${CHAIN.POSTROUTING} -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE${inp.randomFully ? ' --random-fully' : ''}`,
    `-A ${CHAIN.MARK_MASQ} -j MARK --or-mark ${mark}`,
  );
  const decl = (chains: readonly string[]) => chains.map((c) => `:${c} - [0:0]`);
  return [
    '*filter',
    ...decl(IPVS_CHAINS.filter),
    ...filter,
    'COMMIT',
    '*nat',
    ...decl(IPVS_CHAINS.nat),
    ...nat,
    'COMMIT',
    '',
  ].join('\n');
}
