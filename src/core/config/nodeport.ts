// nodePortAddresses keyword expansion and the per-family view a datapath needs
// (upstream server.go expandNodePortAddressKeywords + proxy/util
// NewNodePortAddresses), and resolveDataplaneConfig which bundles it with the
// masquerade mark and the local-traffic detector.
//
// Per family, upstream semantics:
// * "primary"   -> the node IP of the family as /32 or /128. Nothing when the
//                  family has no node IP or it is loopback (upstream's NodeIPs
//                  map holds loopback for a missing family, and skips it), so a
//                  family without node IP ends up MatchAll unless other entries
//                  of that family exist - exactly as upstream.
// * "localhost" -> 127.0.0.0/8 or ::1/128.
// * "all"       -> 0.0.0.0/0 or ::/0.
// * a CIDR      -> kept if it is of the family.
// * no entry of the family at all, or any zero CIDR -> MatchAll (null).

import { cidrContains, isLoopback, parseCIDR, parseIP } from '../ip.js';
import type { DataplaneConfig, IPFamily, LocalDetector } from '../types.js';
import { masqueradeBitOf } from './convert.js';
import { featureGateEnabled } from './features.js';
import {
  NODE_PORT_ADDRESSES_ALL,
  NODE_PORT_ADDRESSES_LOCALHOST,
  NODE_PORT_ADDRESSES_PRIMARY,
  type ResolvedConfig,
} from './types.js';

const ZERO: Record<IPFamily, string> = { IPv4: '0.0.0.0/0', IPv6: '::/0' };
const LOCALHOST: Record<IPFamily, string> = { IPv4: '127.0.0.0/8', IPv6: '::1/128' };

/**
 * Expand keywords for one family. `nodeIP` is the node's IP of that family
 * (null, loopback or unspecified = none). Returns normalised CIDRs of the family, in
 * order, without duplicates; entries of the other family are dropped.
 */
export function expandNodePortAddresses(addrs: readonly string[], family: IPFamily, nodeIP: string | null): string[] {
  const out: string[] = [];
  const add = (cidr: string) => {
    if (!out.includes(cidr)) out.push(cidr);
  };
  for (const a of addrs) {
    if (a === NODE_PORT_ADDRESSES_ALL) add(ZERO[family]);
    else if (a === NODE_PORT_ADDRESSES_LOCALHOST) add(LOCALHOST[family]);
    else if (a === NODE_PORT_ADDRESSES_PRIMARY) {
      const ip = parseIP(nodeIP);
      if (ip && ip.family === family && !isLoopback(ip) && !ip.bytes.every((x) => x === 0)) {
        add(`${ip.text}/${family === 'IPv4' ? 32 : 128}`);
      }
    } else {
      const c = parseCIDR(a);
      if (c && c.family === family) add(c.text);
    }
  }
  return out;
}

/** Upstream NodePortAddresses for one family: null = MatchAll, else the CIDRs. */
export function nodePortAddressesForFamily(
  addrs: readonly string[],
  family: IPFamily,
  nodeIP: string | null,
): string[] | null {
  const cidrs = expandNodePortAddresses(addrs, family, nodeIP);
  if (cidrs.length === 0) return null;
  if (cidrs.some((c) => parseCIDR(c)!.prefix === 0)) return null;
  return cidrs;
}

/** NodePortAddresses.ContainsIPv4Loopback: MatchAll or a CIDR holding 127.0.0.0 or a loopback network. */
function containsIPv4Loopback(cidrs: readonly string[] | null): boolean {
  if (cidrs === null) return true;
  return cidrs.some((s) => {
    const c = parseCIDR(s)!;
    return c.family === 'IPv4' && (c.network[0] === 127 || cidrContains(c, '127.0.0.0'));
  });
}

/**
 * Whether a CIDR list names loopback of its family explicitly: a CIDR (not a
 * zero one) that overlaps 127.0.0.0/8, or one that holds ::1. `all` and a
 * zero CIDR do not count: upstream's localhost relay needs an explicit opt-in.
 */
function namesLoopback(cidrs: readonly string[], family: IPFamily): boolean {
  return cidrs.some((s) => {
    const c = parseCIDR(s);
    if (!c || c.family !== family || c.prefix === 0) return false;
    return family === 'IPv4' ? c.network[0] === 127 || cidrContains(c, '127.0.0.0') : cidrContains(c, '::1');
  });
}

/**
 * What nftables mode does with TCP to loopback:<NodePort> for one family (KEP-6032):
 * * 'off'    - the gate KubeProxyNFTablesLocalhostNodePorts is off, or another mode: nothing (the kernel
 *              refuses, as before the gate existed);
 * * 'serve'  - the gate is on and nodePortAddresses names loopback of the family (`localhost`, or a CIDR
 *              such as 127.0.0.1/32): a userspace relay listens on 127.0.0.1 / ::1 for each TCP NodePort;
 * * 'reject' - the gate is on without that opt-in: such packets are rejected and counted.
 * UDP and SCTP to loopback NodePorts are rejected and counted in both 'serve' and 'reject'.
 */
export type LocalhostNodePortsMode = 'off' | 'serve' | 'reject';

export function nftablesLocalhostNodePorts(
  config: ResolvedConfig,
  family: IPFamily,
  nodeIP: string | null,
): LocalhostNodePortsMode {
  if (config.mode !== 'nftables' || !featureGateEnabled(config.featureGates, 'KubeProxyNFTablesLocalhostNodePorts'))
    return 'off';
  return namesLoopback(expandNodePortAddresses(config.nodePortAddresses, family, nodeIP), family) ? 'serve' : 'reject';
}

function localDetectorOf(config: ResolvedConfig, family: IPFamily, podCIDRs: readonly string[]): LocalDetector {
  const ofFamily = (list: readonly string[]) =>
    list
      .map((s) => parseCIDR(s))
      .filter((c) => c !== null && c.family === family)
      .map((c) => c!.text);
  switch (config.detectLocalMode) {
    case 'BridgeInterface':
      return { kind: 'bridge', interfaceName: config.detectLocal.bridgeInterface };
    case 'InterfaceNamePrefix':
      return { kind: 'prefix', interfacePrefix: config.detectLocal.interfaceNamePrefix };
    case 'NodeCIDR': {
      const cidrs = ofFamily(podCIDRs);
      return cidrs.length > 0 ? { kind: 'cidr', cidrs: cidrs.slice(0, 1) } : { kind: 'none' };
    }
    default: {
      // ClusterCIDR (the default): no CIDR of this family = no-op detector.
      const cidrs = ofFamily(config.detectLocal.clusterCIDRs);
      return cidrs.length > 0 ? { kind: 'cidr', cidrs: cidrs.slice(0, 1) } : { kind: 'none' };
    }
  }
}

/**
 * What a datapath of `family` needs from the configuration.
 * `localIPs` are the host's interface addresses (any family; filtered here),
 * `nodeIP` the node's IP of this family (detectNodeIPs().nodeIPs[family]; null
 * or loopback = none), `podCIDRs` the Node's
 * spec.podCIDRs (used only by detectLocalMode NodeCIDR).
 */
export function resolveDataplaneConfig(
  config: ResolvedConfig,
  family: IPFamily,
  localIPs: readonly string[],
  nodeIP: string | null,
  podCIDRs: readonly string[] = [],
): DataplaneConfig {
  const nodePortAddresses = nodePortAddressesForFamily(config.nodePortAddresses, family, nodeIP);
  const localhostNodePorts =
    config.mode === 'iptables' &&
    family === 'IPv4' &&
    (config.iptables.localhostNodePorts ?? true) &&
    containsIPv4Loopback(nodePortAddresses);
  const ips: string[] = [];
  for (const s of localIPs) {
    const ip = parseIP(s);
    if (ip && ip.family === family && !ips.includes(ip.text)) ips.push(ip.text);
  }
  return {
    family,
    // 2 ** bit rather than 1 << bit: bit 31 must stay positive.
    masqueradeMark: 2 ** masqueradeBitOf(config),
    masqueradeAll: config.linux.masqueradeAll,
    localDetector: localDetectorOf(config, family, podCIDRs),
    nodePortAddresses,
    localhostNodePorts,
    localIPs: ips,
  };
}
