// One service port as IPVS mode's keyed objects, in upstream's layout
// (pkg/proxy/ipvs/proxier.go, the loop body of syncProxyRules):
//   - one virtual server per ClusterIP, externalIP, load-balancer IP and
//     NodePort x node address, with the scheduler and ClientIP persistence;
//     its real servers are the endpoints categorizeEndpoints chose (local
//     ones under a Local policy, falling back to the cluster-wide ones as
//     upstream does), weight 1;
//   - the Service addresses to bind on kube-ipvs0 (not the node's own);
//   - the members of upstream's ipsets;
//   - the rules for LB addresses the node itself may not reach.
// Memoryless: the driver (driver.ts) calls it for the ports a sync
// re-renders, and the reconciler remembers what each Service wants. Never
// throws on bad data: validate() names what cannot be rendered.
import { cidrContains, isLoopback, isZeroCIDR, parseCIDR, parseIP } from '../../core/ip.js';
import type { DataplaneConfig, Endpoint, IPFamily, ServicePort, SyncState } from '../../core/types.js';
import { servicePortPolicy } from '../policy.js';
import { entry, IPSET, type IpsetName } from './ipsets.js';
import {
  PRESENT,
  realServerKey,
  SVC_FLAG,
  virtualServerKey,
  type IpvsObject,
  type RealServer,
  type VirtualServer,
} from './objects.js';
import type { NoNodeAccess } from './rules.js';

export interface IpvsOptions {
  /** --ipvs-scheduler; '' means rr. */
  readonly scheduler: string;
  /** MASQUERADE --random-fully is available. */
  readonly randomFully: boolean;
}

export const DEFAULT_IPVS_OPTIONS: IpvsOptions = { scheduler: 'rr', randomFully: true };

export interface SkippedServicePort {
  readonly key: string;
  readonly reason: string;
}

/** What every service port of one render shares. */
export interface RenderContext {
  readonly family: IPFamily;
  readonly config: DataplaneConfig;
  readonly scheduler: string;
  /** The node's own addresses (never bound on kube-ipvs0). */
  readonly nodeAddrs: ReadonlySet<string>;
  /** The node addresses NodePort virtual servers are made for. */
  readonly npIPs: readonly string[];
  readonly nodeIP: string | null;
}

/** Where one service port's objects go. */
export interface PortSink {
  readonly objects: IpvsObject[];
  /**
   * Per virtual server with any: the realServerKeys of the port's endpoints
   * that still exist but were not chosen (terminating, not ready). Their real
   * servers drain gracefully; the others are gone.
   */
  readonly lingering: Map<string, ReadonlySet<string>>;
}

type Proto = 'tcp' | 'udp' | 'sctp';

/** Upstream isValidForSet: this family, no loopback, no IPv6 link-local; normalised and sorted. */
export function nodeAddressesOf(addrs: readonly string[], family: IPFamily): string[] {
  const out = new Set<string>();
  for (const a of addrs) {
    const p = parseIP(a);
    if (!p || p.family !== family || isLoopback(p)) continue;
    if (family === 'IPv6' && p.bytes[0] === 0xfe && (p.bytes[1]! & 0xc0) === 0x80) continue;
    out.add(p.text);
  }
  return [...out].sort();
}

/** NodePort addresses: every node address (nodePortAddresses unset or 0/0), else those in the CIDRs; never loopback. */
export function nodePortIPs(config: DataplaneConfig, nodeAddrs: readonly string[]): string[] {
  const npa = config.nodePortAddresses;
  if (npa === null || npa.some((c) => isZeroCIDR(c))) return [...nodeAddrs];
  const cidrs = npa.map((c) => parseCIDR(c)).filter((c) => c !== null && c.family === config.family);
  return nodeAddrs.filter((ip) => cidrs.some((c) => cidrContains(c!, ip)));
}

/** Why a service port cannot be rendered, or null. */
export function validate(svc: ServicePort, family: IPFamily): string | null {
  if (svc.family !== family) return `family ${svc.family} in a ${family} render`;
  if (parseIP(svc.clusterIP)?.family !== family) return `bad clusterIP ${svc.clusterIP}`;
  if (!Number.isInteger(svc.port) || svc.port < 1 || svc.port > 65535) return `bad port ${svc.port}`;
  if (svc.nodePort !== 0 && !(Number.isInteger(svc.nodePort) && svc.nodePort > 0 && svc.nodePort <= 65535))
    return `bad nodePort ${svc.nodePort}`;
  return null;
}

const rs = (e: Endpoint): RealServer => ({ address: e.ip, port: e.port, weight: 1 });
/** A set of a few strings as a list: cheaper than a Set to make and to ask for under a dozen. */
class SmallSet {
  private readonly items: string[] = [];
  has(k: string): boolean {
    return this.items.includes(k);
  }
  add(k: string): void {
    this.items.push(k);
  }
}
/** The objects of one service port (upstream's loop body of syncProxyRules). */
export function renderServicePort(svc: ServicePort, state: SyncState, ctx: RenderContext, out: PortSink): void {
  const proto = svc.protocol.toLowerCase() as Proto;
  const pol = servicePortPolicy(svc, state.categorized.get(svc.key));
  const all = state.endpoints.get(svc.key) ?? [];
  const objects = out.objects;
  const member = (set: IpsetName, m: string) => objects.push({ kind: set, key: m, value: PRESENT });
  const bind = (address: string) => {
    objects.push({ kind: 'bind', key: address, value: PRESENT });
    // KUBE-IPVS-IPS holds exactly the addresses bound to kube-ipvs0.
    member(IPSET.IPVS_IPS, entry.ip(address));
  };

  /** Upstream syncEndpoint: local endpoints under a Local policy, else (and as fallback) the cluster ones. */
  const endpointsFor = (onlyLocal: boolean): readonly Endpoint[] =>
    onlyLocal && pol.localEndpoints.length > 0 ? pol.localEndpoints : pol.clusterEndpoints;
  const flags =
    (svc.stickyMaxAgeSeconds > 0 ? SVC_FLAG.PERSISTENT : 0) | (ctx.scheduler === 'mh' ? SVC_FLAG.SCHED2 : 0);
  const addVS = (address: string, port: number, onlyLocal: boolean) => {
    const vs: VirtualServer = {
      family: ctx.family,
      protocol: svc.protocol,
      address,
      port,
      scheduler: ctx.scheduler,
      flags,
      timeout: svc.stickyMaxAgeSeconds > 0 ? svc.stickyMaxAgeSeconds : 0,
    };
    const vsKey = virtualServerKey(vs);
    objects.push({ kind: 'vs', key: vsKey, value: { t: 'vs', vs } });
    const eps = endpointsFor(onlyLocal);
    // Few endpoints (the common case) are told apart in a list; many in a set.
    const chosen = eps.length > 16 ? new Set<string>() : new SmallSet();
    let n = 0;
    for (const e of eps) {
      const r = rs(e);
      const rk = realServerKey(r);
      if (chosen.has(rk)) continue;
      chosen.add(rk);
      n++;
      objects.push({ kind: 'rs', key: `${vsKey}/${rk}`, value: { t: 'rs', vs, rs: r } });
    }
    // Every endpoint chosen (the common case) leaves none lingering.
    let lingering: Set<string> | null = null;
    if (all.length !== n)
      for (const e of all) {
        const rk = realServerKey(rs(e));
        if (!chosen.has(rk)) (lingering ??= new Set()).add(rk);
      }
    if (lingering) out.lingering.set(vsKey, lingering);
  };
  const drop = (n: NoNodeAccess) =>
    objects.push({ kind: 'rule', key: `${n.ip},${n.protocol}:${n.port}`, value: { t: 'drop', rule: n } });

  // Hairpin: a local endpoint reaching itself through the Service is masqueraded.
  for (const e of all) if (e.isLocal) member(IPSET.LOOP_BACK, entry.ipPortIp(e.ip, proto, e.port, e.ip));

  member(IPSET.CLUSTER_IP, entry.ipPort(svc.clusterIP, proto, svc.port));
  addVS(svc.clusterIP, svc.port, svc.internalPolicyLocal);
  bind(svc.clusterIP);

  for (const ip of svc.externalIPs) {
    member(svc.externalPolicyLocal ? IPSET.EXTERNAL_IP_LOCAL : IPSET.EXTERNAL_IP, entry.ipPort(ip, proto, svc.port));
    addVS(ip, svc.port, svc.externalPolicyLocal);
    if (!ctx.nodeAddrs.has(ip)) bind(ip); // never take over an address another link holds
  }

  for (const ip of svc.loadBalancerVIPs) {
    const e = entry.ipPort(ip, proto, svc.port);
    member(IPSET.LOAD_BALANCER, e);
    if (svc.externalPolicyLocal) member(IPSET.LOAD_BALANCER_LOCAL, e);
    if (svc.loadBalancerSourceRanges.length > 0) {
      member(IPSET.LOAD_BALANCER_FW, e);
      let allowFromNode = false;
      for (const cidr of svc.loadBalancerSourceRanges) {
        member(IPSET.LOAD_BALANCER_SOURCE_CIDR, entry.ipPortNet(ip, proto, svc.port, cidr));
        const c = parseCIDR(cidr);
        if (c && ctx.nodeIP !== null && c.family === ctx.family && cidrContains(c, ctx.nodeIP)) allowFromNode = true;
      }
      // The node inside a range may use the LB address from itself (source = LB IP after routing).
      if (allowFromNode) member(IPSET.LOAD_BALANCER_SOURCE_IP, entry.ipPortIp(ip, proto, svc.port, ip));
      else drop({ ip, protocol: proto, port: svc.port });
    }
    addVS(ip, svc.port, svc.externalPolicyLocal);
    if (!ctx.nodeAddrs.has(ip)) bind(ip);
  }

  if (svc.nodePort !== 0 && ctx.npIPs.length > 0) {
    const sets: Record<Proto, [IpsetName, IpsetName]> = {
      tcp: [IPSET.NODE_PORT_TCP, IPSET.NODE_PORT_LOCAL_TCP],
      udp: [IPSET.NODE_PORT_UDP, IPSET.NODE_PORT_LOCAL_UDP],
      sctp: [IPSET.NODE_PORT_SCTP, IPSET.NODE_PORT_LOCAL_SCTP],
    };
    // SCTP uses hash:ip,port (a bitmap cannot say which protocol), so one member per node address.
    const members =
      proto === 'sctp' ? ctx.npIPs.map((ip) => entry.ipPort(ip, proto, svc.nodePort)) : [entry.port(svc.nodePort)];
    const [cluster, local] = sets[proto];
    for (const m of members) {
      member(cluster, m);
      if (svc.externalPolicyLocal) member(local, m);
    }
    for (const ip of ctx.npIPs) addVS(ip, svc.nodePort, svc.externalPolicyLocal);
  }

  if (svc.healthCheckNodePort !== 0) member(IPSET.HEALTH_CHECK_NODE_PORT, entry.port(svc.healthCheckNodePort));
}
