// The ipsets of IPVS mode, with upstream's names, types and comments
// (pkg/proxy/ipvs/ipset.go). IPv6 sets are named KUBE-6-*. Entries are
// ipset's own text form, so `ipset save` output compares directly.
import { parseCIDR, parseIP } from '../../core/ip.js';
import type { IPFamily } from '../../core/types.js';

export type IpsetType = 'hash:ip' | 'hash:ip,port' | 'hash:ip,port,ip' | 'hash:ip,port,net' | 'bitmap:port';

export const IPSET = {
  LOOP_BACK: 'KUBE-LOOP-BACK',
  CLUSTER_IP: 'KUBE-CLUSTER-IP',
  EXTERNAL_IP: 'KUBE-EXTERNAL-IP',
  EXTERNAL_IP_LOCAL: 'KUBE-EXTERNAL-IP-LOCAL',
  LOAD_BALANCER: 'KUBE-LOAD-BALANCER',
  LOAD_BALANCER_FW: 'KUBE-LOAD-BALANCER-FW',
  LOAD_BALANCER_LOCAL: 'KUBE-LOAD-BALANCER-LOCAL',
  LOAD_BALANCER_SOURCE_IP: 'KUBE-LOAD-BALANCER-SOURCE-IP',
  LOAD_BALANCER_SOURCE_CIDR: 'KUBE-LOAD-BALANCER-SOURCE-CIDR',
  NODE_PORT_TCP: 'KUBE-NODE-PORT-TCP',
  NODE_PORT_LOCAL_TCP: 'KUBE-NODE-PORT-LOCAL-TCP',
  NODE_PORT_UDP: 'KUBE-NODE-PORT-UDP',
  NODE_PORT_LOCAL_UDP: 'KUBE-NODE-PORT-LOCAL-UDP',
  NODE_PORT_SCTP: 'KUBE-NODE-PORT-SCTP-HASH',
  NODE_PORT_LOCAL_SCTP: 'KUBE-NODE-PORT-LOCAL-SCTP-HASH',
  HEALTH_CHECK_NODE_PORT: 'KUBE-HEALTH-CHECK-NODE-PORT',
  IPVS_IPS: 'KUBE-IPVS-IPS',
} as const;
export type IpsetName = (typeof IPSET)[keyof typeof IPSET];

export interface IpsetInfo {
  readonly name: IpsetName;
  readonly type: IpsetType;
  /** Upstream's comment, used in the iptables rules that match the set. */
  readonly comment: string;
}

/** Every set, in upstream's order (ipsetInfo). */
export const IPSETS: readonly IpsetInfo[] = [
  {
    name: IPSET.LOOP_BACK,
    type: 'hash:ip,port,ip',
    comment: 'Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose',
  },
  {
    name: IPSET.CLUSTER_IP,
    type: 'hash:ip,port',
    comment: 'Kubernetes service cluster ip + port for masquerade purpose',
  },
  {
    name: IPSET.EXTERNAL_IP,
    type: 'hash:ip,port',
    comment: 'Kubernetes service external ip + port for masquerade and filter purpose',
  },
  {
    name: IPSET.EXTERNAL_IP_LOCAL,
    type: 'hash:ip,port',
    comment: 'Kubernetes service external ip + port with externalTrafficPolicy=local',
  },
  { name: IPSET.LOAD_BALANCER, type: 'hash:ip,port', comment: 'Kubernetes service lb portal' },
  {
    name: IPSET.LOAD_BALANCER_FW,
    type: 'hash:ip,port',
    comment: 'Kubernetes service load balancer ip + port for load balancer with sourceRange',
  },
  {
    name: IPSET.LOAD_BALANCER_LOCAL,
    type: 'hash:ip,port',
    comment: 'Kubernetes service load balancer ip + port with externalTrafficPolicy=local',
  },
  {
    name: IPSET.LOAD_BALANCER_SOURCE_IP,
    type: 'hash:ip,port,ip',
    comment: 'Kubernetes service load balancer ip + port + source IP for packet filter purpose',
  },
  {
    name: IPSET.LOAD_BALANCER_SOURCE_CIDR,
    type: 'hash:ip,port,net',
    comment: 'Kubernetes service load balancer ip + port + source cidr for packet filter purpose',
  },
  { name: IPSET.NODE_PORT_TCP, type: 'bitmap:port', comment: 'Kubernetes nodeport TCP port for masquerade purpose' },
  {
    name: IPSET.NODE_PORT_LOCAL_TCP,
    type: 'bitmap:port',
    comment: 'Kubernetes nodeport TCP port with externalTrafficPolicy=local',
  },
  { name: IPSET.NODE_PORT_UDP, type: 'bitmap:port', comment: 'Kubernetes nodeport UDP port for masquerade purpose' },
  {
    name: IPSET.NODE_PORT_LOCAL_UDP,
    type: 'bitmap:port',
    comment: 'Kubernetes nodeport UDP port with externalTrafficPolicy=local',
  },
  {
    name: IPSET.NODE_PORT_SCTP,
    type: 'hash:ip,port',
    comment: "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'",
  },
  {
    name: IPSET.NODE_PORT_LOCAL_SCTP,
    type: 'hash:ip,port',
    comment: "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'",
  },
  { name: IPSET.HEALTH_CHECK_NODE_PORT, type: 'bitmap:port', comment: 'Kubernetes health check node port' },
  { name: IPSET.IPVS_IPS, type: 'hash:ip', comment: 'Addresses on the ipvs interface' },
];

const INFO = new Map(IPSETS.map((s) => [s.name, s]));

export function ipsetInfo(name: IpsetName): IpsetInfo {
  return INFO.get(name)!;
}

/**
 * The kernel name of a set for a family: every IPv6 set is KUBE-6-* (cut to
 * ipset's 31 characters, as upstream), so both families can coexist.
 */
export function ipsetName(name: IpsetName, family: IPFamily): string {
  if (family === 'IPv4') return name;
  return name.replace(/^KUBE-/, 'KUBE-6-').slice(0, 31);
}

/** Every kernel set name either family may have created (for cleanup). */
export function allIpsetNames(): string[] {
  return [...new Set(IPSETS.flatMap((s) => [ipsetName(s.name, 'IPv4'), ipsetName(s.name, 'IPv6')]))];
}

/** `ipset create` arguments after the name (upstream's sizes). */
export function ipsetCreateArgs(type: IpsetType, family: IPFamily): string {
  if (type === 'bitmap:port') return `${type} range 0-65535`;
  return `${type} family ${family === 'IPv4' ? 'inet' : 'inet6'} hashsize 1024 maxelem 65536`;
}

type Proto = 'tcp' | 'udp' | 'sctp';

/**
 * A member in ipset's own text form (what `ipset save` prints), so rendered
 * members compare directly with read-back ones: a net with the host prefix
 * is printed as a plain address (10.0.0.1/32 -> 10.0.0.1).
 */
function netText(cidr: string): string {
  const c = parseCIDR(cidr);
  if (!c) return cidr;
  return c.prefix === (c.family === 'IPv4' ? 32 : 128) ? c.text.slice(0, c.text.indexOf('/')) : c.text;
}

/** Entry texts in ipset's own form. */
export const entry = {
  ip: (ip: string) => ip,
  ipPort: (ip: string, proto: Proto, port: number) => `${ip},${proto}:${port}`,
  ipPortIp: (ip: string, proto: Proto, port: number, ip2: string) => `${ip},${proto}:${port},${ip2}`,
  ipPortNet: (ip: string, proto: Proto, port: number, net: string) => `${ip},${proto}:${port},${netText(net)}`,
  port: (port: number) => String(port),
};

const PROTO_NUM: Record<string, string> = { '6': 'tcp', '17': 'udp', '132': 'sctp' };

function ipOf(s: string | undefined, family: IPFamily): string | null {
  const p = parseIP(s);
  return p && p.family === family ? p.text : null;
}

function protoPort(s: string | undefined): string | null {
  if (s === undefined) return null;
  const m = /^(?:([a-z]+|\d+):)?(\d+)$/.exec(s.toLowerCase());
  if (!m || Number(m[2]) > 65535) return null;
  const proto = m[1] === undefined ? 'tcp' : (PROTO_NUM[m[1]] ?? m[1]);
  return `${proto}:${Number(m[2])}`;
}

/** A member of a set of `type` in ipset's text form, or null when ipset would refuse it. */
export function canonicalEntry(type: IpsetType, text: string, family: IPFamily): string | null {
  const parts = text.split(',');
  switch (type) {
    case 'hash:ip':
      return parts.length === 1 ? ipOf(parts[0], family) : null;
    case 'bitmap:port':
      return /^\d+$/.test(text) && Number(text) <= 65535 ? String(Number(text)) : null;
    case 'hash:ip,port': {
      const ip = ipOf(parts[0], family);
      const pp = protoPort(parts[1]);
      return parts.length === 2 && ip && pp ? `${ip},${pp}` : null;
    }
    case 'hash:ip,port,ip': {
      const [ip, pp, ip2] = [ipOf(parts[0], family), protoPort(parts[1]), ipOf(parts[2], family)];
      return parts.length === 3 && ip && pp && ip2 ? `${ip},${pp},${ip2}` : null;
    }
    case 'hash:ip,port,net': {
      const ip = ipOf(parts[0], family);
      const pp = protoPort(parts[1]);
      const net = parts[2]?.includes('/') ? parseCIDR(parts[2]) : null;
      const host = net ? null : ipOf(parts[2], family);
      if (parts.length !== 3 || !ip || !pp) return null;
      if (host) return `${ip},${pp},${host}`;
      if (!net || net.family !== family || net.prefix === 0) return null; // ipset refuses a zero prefix
      return `${ip},${pp},${netText(net.text)}`;
    }
  }
}
