// The fixed part of the kube-proxy table (upstream setupNFTables and
// nftablesJumpChains): base chains with their priorities, helper chains,
// sets and maps, and their static rules. Written on full syncs only.
import type { DataplaneConfig, IPFamily } from '../../core/types.js';
import { cidrContains, isLoopback, isZeroCIDR, parseCIDR } from '../../core/ip.js';
import * as N from './names.js';
import type { Chain, ChainHook, ChainType, NftMap, NftSet } from './objects.js';
import * as R from './rule.js';
import { rule } from './rule.js';
import type { Transaction } from './transaction.js';

export interface RenderContext {
  readonly family: IPFamily;
  /** "ip" or "ip6": the table family and the address-match keyword. */
  readonly ipX: N.NftFamily;
  readonly addrType: 'ipv4_addr' | 'ipv6_addr';
  /** The masquerade mark (written as 0x00004000, rule.ts markText). */
  readonly masqMark: number;
  /** Match for "from a local pod", or null without a local detector. */
  readonly ifLocal: R.Item | null;
  readonly ifNotLocal: R.Item | null;
  readonly nodeIP: string | undefined;
  readonly layout: EndpointLayout;
}

/**
 * How a policy chain picks an endpoint.
 * - 'upstream': one `dnat ... to numgen random mod N map { ... }` rule (or a
 *   numgen vmap with affinity), byte-for-byte upstream. Each such rule makes
 *   an anonymous map, and loading thousands of them is superlinear in the
 *   kernel/nft.
 * - 'lean': the same uniform choice as a cascade of `numgen random mod K 0`
 *   rules (K = N, N-1, ..., like iptables' statistic rules), no anonymous
 *   sets. Chain, set and map names and all elements are
 *   unchanged; only the rules inside service/local chains differ.
 * - 'maps': without affinity, one rule that never changes,
 *   `dnat ip addr . port to numgen random mod 720720 map @endpoints-<chain>`,
 *   and a named interval map per policy chain that partitions 0..720719
 *   among the endpoints (720720 = lcm(1..16): exact equal shares up to 16
 *   endpoints, within 1/720720 beyond). An endpoint change then replaces the
 *   map's elements only: no rule or chain is written, so the kernel does not
 *   re-validate the table (a cost that grows with the whole table).
 *   With affinity the policy chain is as in 'lean'.
 */
export type EndpointLayout = 'upstream' | 'lean' | 'maps';

/**
 * The layout production uses, and the one place that says so: the renderer,
 * the dataplane, `diff` and the tests all default to it. 'lean' because
 * 'upstream' loads far slower in a large cluster (its anonymous maps), and
 * 'maps', although it makes a one-endpoint change element-only (so faster),
 * has a cold sync superlinear in its per-chain named maps; the figures are
 * under nftables-sync in bench/README.md. Only src/cmd may override it (the
 * KPT_NFTABLES_LAYOUT experiment switch).
 */
export const DEFAULT_ENDPOINT_LAYOUT: EndpointLayout = 'lean';

/** Every layout, the production one first. */
export const ENDPOINT_LAYOUTS: readonly EndpointLayout[] = [
  DEFAULT_ENDPOINT_LAYOUT,
  ...(['upstream', 'lean', 'maps'] as const).filter((l) => l !== DEFAULT_ENDPOINT_LAYOUT),
];

export function makeContext(
  config: DataplaneConfig,
  nodeIP: string | undefined,
  layout: EndpointLayout,
): RenderContext {
  const ipX = N.nftFamily(config.family);
  const det = config.localDetector;
  let ifLocal: R.Item | null = null;
  let ifNotLocal: R.Item | null = null;
  if (det.kind === 'cidr') {
    const cidrs = det.cidrs
      .map((c) => parseCIDR(c))
      .filter((c) => c !== null && c.family === config.family)
      .map((c) => c!.text);
    if (cidrs.length > 0) {
      const match = (neq: boolean) =>
        cidrs.length === 1 ? R.addr(ipX, 'saddr', cidrs[0]!, neq) : R.addrList(ipX, 'saddr', cidrs, neq);
      ifLocal = match(false);
      ifNotLocal = match(true);
    }
  } else if (det.kind === 'bridge') {
    ifLocal = R.iifname(det.interfaceName, false);
    ifNotLocal = R.iifname(det.interfaceName, false, true);
  } else if (det.kind === 'prefix') {
    ifLocal = R.iifname(det.interfacePrefix, true);
    ifNotLocal = R.iifname(det.interfacePrefix, true, true);
  }
  return {
    family: config.family,
    ipX,
    addrType: config.family === 'IPv4' ? 'ipv4_addr' : 'ipv6_addr',
    masqMark: config.masqueradeMark >>> 0,
    ifLocal,
    ifNotLocal,
    nodeIP,
    layout,
  };
}

interface BaseChainSpec {
  readonly name: string;
  readonly type: ChainType;
  readonly hook: ChainHook;
  readonly priority: number;
}

/** Upstream nftablesBaseChains, priorities as numbers (dstnat-10 = -110, ...). */
export const BASE_CHAINS: readonly BaseChainSpec[] = [
  { name: 'filter-prerouting-pre-dnat', type: 'filter', hook: 'prerouting', priority: -110 },
  { name: 'filter-output-pre-dnat', type: 'filter', hook: 'output', priority: -110 },
  { name: 'filter-input', type: 'filter', hook: 'input', priority: 0 },
  { name: 'filter-forward', type: 'filter', hook: 'forward', priority: 0 },
  { name: 'filter-output', type: 'filter', hook: 'output', priority: 0 },
  { name: 'nat-prerouting', type: 'nat', hook: 'prerouting', priority: -100 },
  { name: 'nat-output', type: 'nat', hook: 'output', priority: -100 },
  { name: 'nat-postrouting', type: 'nat', hook: 'postrouting', priority: 100 },
];

/** Upstream nftablesJumpChains: [from, to] with the "ct state new" filter where upstream has it. */
const JUMPS: ReadonlyArray<readonly [string, string, boolean]> = [
  ['filter-input', N.NODEPORT_ENDPOINTS_CHECK_CHAIN, true],
  ['filter-input', N.SERVICE_ENDPOINTS_CHECK_CHAIN, true],
  ['filter-forward', N.SERVICE_ENDPOINTS_CHECK_CHAIN, true],
  ['filter-forward', N.CLUSTER_IPS_CHECK_CHAIN, true],
  ['filter-output', N.SERVICE_ENDPOINTS_CHECK_CHAIN, true],
  ['filter-output', N.CLUSTER_IPS_CHECK_CHAIN, true],
  ['filter-prerouting-pre-dnat', N.FIREWALL_CHECK_CHAIN, true],
  ['filter-output-pre-dnat', N.FIREWALL_CHECK_CHAIN, true],
  ['nat-output', N.SERVICES_CHAIN, false],
  ['nat-prerouting', N.SERVICES_CHAIN, false],
  ['nat-postrouting', N.MASQUERADING_CHAIN, false],
];

// Every comment string written into the table (table, helper chain, sets,
// maps, rules) is upstream's, byte for byte: the kernel shows them in `nft
// list ruleset`, and operators and their tools match on them. Keep them
// identical; they are facts of compatibility, not our prose.
const HELPER_CHAINS: readonly Chain[] = [
  { kind: 'chain', name: N.SERVICES_CHAIN },
  { kind: 'chain', name: N.MASQUERADING_CHAIN },
  { kind: 'chain', name: N.CLUSTER_IPS_CHECK_CHAIN },
  { kind: 'chain', name: N.SERVICE_ENDPOINTS_CHECK_CHAIN },
  { kind: 'chain', name: N.NODEPORT_ENDPOINTS_CHECK_CHAIN },
  { kind: 'chain', name: N.FIREWALL_CHECK_CHAIN },
  { kind: 'chain', name: N.REJECT_CHAIN, comment: 'helper for @no-endpoint-services / @no-endpoint-nodeports' },
];

export function staticSets(ctx: RenderContext): ReadonlyArray<NftSet | NftMap> {
  const a = ctx.addrType;
  return [
    { kind: 'set', name: N.CLUSTER_IPS_SET, type: a, comment: 'Active ClusterIPs' },
    { kind: 'set', name: N.NODEPORT_IPS_SET, type: a, comment: 'IPs that accept NodePort traffic' },
    {
      kind: 'set',
      name: N.HAIRPIN_CONNECTIONS_SET,
      type: `${a} . ${a} . inet_proto . inet_service`,
      comment: 'service hairpin connections',
    },
    {
      kind: 'map',
      name: N.SERVICE_IPS_MAP,
      type: `${a} . inet_proto . inet_service : verdict`,
      comment: 'ClusterIP, ExternalIP and LoadBalancer IP traffic',
    },
    {
      kind: 'map',
      name: N.SERVICE_NODEPORTS_MAP,
      type: 'inet_proto . inet_service : verdict',
      comment: 'NodePort traffic',
    },
    {
      kind: 'map',
      name: N.NO_ENDPOINT_SERVICES_MAP,
      type: `${a} . inet_proto . inet_service : verdict`,
      comment: 'vmap to drop or reject packets to services with no endpoints',
    },
    {
      kind: 'map',
      name: N.NO_ENDPOINT_NODEPORTS_MAP,
      type: 'inet_proto . inet_service : verdict',
      comment: 'vmap to drop or reject packets to service nodeports with no endpoints',
    },
    {
      kind: 'map',
      name: N.FIREWALL_IPS_MAP,
      type: `${a} . inet_proto . inet_service : verdict`,
      comment: 'destinations that are subject to LoadBalancerSourceRanges',
    },
  ];
}

/** Sets and maps whose elements the renderer owns (affinity sets are filled by the kernel). */
export const MANAGED_SETS: ReadonlySet<string> = new Set([
  N.CLUSTER_IPS_SET,
  N.NODEPORT_IPS_SET,
  N.HAIRPIN_CONNECTIONS_SET,
  N.SERVICE_IPS_MAP,
  N.SERVICE_NODEPORTS_MAP,
  N.NO_ENDPOINT_SERVICES_MAP,
  N.NO_ENDPOINT_NODEPORTS_MAP,
  N.FIREWALL_IPS_MAP,
]);

/**
 * nodePortAddresses resolved for this family: null means MatchAll (unset, or
 * a zero CIDR among them); otherwise the matching local IPs minus loopback.
 */
export function nodePortIPs(config: DataplaneConfig): string[] | null {
  const npa = config.nodePortAddresses;
  if (npa === null || npa.some((c) => isZeroCIDR(c))) return null;
  const cidrs = npa.map((c) => parseCIDR(c)).filter((c) => c !== null && c.family === config.family);
  return config.localIPs.filter((ip) => !isLoopback(ip) && cidrs.some((c) => cidrContains(c!, ip))).sort();
}

export interface StaticOptions {
  readonly config: DataplaneConfig;
  readonly serviceCIDRs: readonly string[];
  /** First sync of this process: add+delete every base chain so priority changes apply. */
  readonly recreateBaseChains: boolean;
}

/** Write table, chains, sets and static rules; returns the nodeport-ips elements wanted (null = set deleted). */
export function writeStatic(tx: Transaction, ctx: RenderContext, opts: StaticOptions): string[] | null {
  const { ipX } = ctx;
  tx.add({ kind: 'table', comment: N.TABLE_COMMENT });
  if (opts.recreateBaseChains) {
    for (const b of BASE_CHAINS) {
      tx.add({ kind: 'chain', name: b.name });
      tx.delete({ kind: 'chain', name: b.name });
    }
  }
  for (const b of BASE_CHAINS) {
    const c: Chain = { kind: 'chain', name: b.name, type: b.type, hook: b.hook, priority: b.priority };
    tx.add(c).flush(c);
  }
  for (const c of HELPER_CHAINS) tx.add(c).flush(c);
  for (const s of staticSets(ctx)) tx.add(s);
  const npIPs = nodePortIPs(opts.config);
  if (npIPs === null) tx.delete(staticSets(ctx)[1]!);

  for (const [from, to, ctNew] of JUMPS) tx.add(rule(from, ctNew ? [R.ctStateNew, R.jump(to)] : [R.jump(to)]));

  const M = ctx.masqMark;
  const fields = R.daddrProtoPort(ipX);
  const clusterIP = R.addrIn(ipX, 'daddr', N.CLUSTER_IPS_SET);
  if (opts.config.masqueradeAll) {
    tx.add(rule(N.SERVICES_CHAIN, [clusterIP, R.markSet('or', M)], 'masquerade all clusterIP traffic'));
  } else if (ctx.ifNotLocal !== null) {
    tx.add(
      rule(
        N.SERVICES_CHAIN,
        [clusterIP, ctx.ifNotLocal, R.markSet('or', M)],
        'masquerade clusterIP traffic from outside cluster',
      ),
    );
  }
  tx.add(rule(N.SERVICES_CHAIN, [R.vmap(fields, N.SERVICE_IPS_MAP)]));
  const noLocalhost = ipX === 'ip' ? R.addr('ip', 'daddr', '127.0.0.0/8', true) : R.addr('ip6', 'daddr', '::1', true);
  if (npIPs === null) {
    tx.add(rule(N.SERVICES_CHAIN, [R.fibLocal('daddr'), noLocalhost, R.vmap(R.PROTO_PORT, N.SERVICE_NODEPORTS_MAP)]));
    tx.add(rule(N.NODEPORT_ENDPOINTS_CHECK_CHAIN, [noLocalhost, R.vmap(R.PROTO_PORT, N.NO_ENDPOINT_NODEPORTS_MAP)]));
  } else {
    const nodePortIP = R.addrIn(ipX, 'daddr', N.NODEPORT_IPS_SET);
    tx.add(rule(N.SERVICES_CHAIN, [nodePortIP, R.vmap(R.PROTO_PORT, N.SERVICE_NODEPORTS_MAP)]));
    tx.add(rule(N.NODEPORT_ENDPOINTS_CHECK_CHAIN, [nodePortIP, R.vmap(R.PROTO_PORT, N.NO_ENDPOINT_NODEPORTS_MAP)]));
  }
  tx.add(rule(N.MASQUERADING_CHAIN, R.masqueradeMarked(M)));
  const hairpin: readonly R.Field[] = [`${ipX} saddr`, `${ipX} daddr`, 'meta l4proto', 'th dport'];
  tx.add(
    rule(N.MASQUERADING_CHAIN, [R.ctStatusDnat, R.lookup(hairpin, N.HAIRPIN_CONNECTIONS_SET), R.masquerade(true)]),
  );
  tx.add(rule(N.CLUSTER_IPS_CHECK_CHAIN, [clusterIP, R.reject], 'Reject traffic to invalid ports of ClusterIPs'));
  const cidrs = opts.serviceCIDRs
    .map((c) => parseCIDR(c))
    .filter((c) => c !== null && c.family === ctx.family)
    .map((c) => c!.text);
  if (cidrs.length > 0) {
    tx.add(
      rule(
        N.CLUSTER_IPS_CHECK_CHAIN,
        [R.addrList(ipX, 'daddr', cidrs, false, ','), R.drop],
        'Drop traffic to unallocated ClusterIPs',
      ),
    );
  }
  tx.add(rule(N.SERVICE_ENDPOINTS_CHECK_CHAIN, [R.vmap(fields, N.NO_ENDPOINT_SERVICES_MAP)]));
  tx.add(rule(N.FIREWALL_CHECK_CHAIN, [R.vmap(fields, N.FIREWALL_IPS_MAP)]));
  tx.add(rule(N.REJECT_CHAIN, [R.reject]));
  return npIPs;
}
