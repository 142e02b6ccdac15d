// IpvsRenderer: a SyncState -> the IPVS mode's desired kernel state for one
// IP family, in upstream's layout (pkg/proxy/ipvs/proxier.go syncProxyRules):
//   - one virtual server per ClusterIP, externalIP, load-balancer IP and
//     NodePort x node address, per port and protocol, with the scheduler and
//     ClientIP persistence; its real servers are the endpoints that
//     categorizeEndpoints chose (local ones under a Local policy, falling
//     back to the cluster-wide ones as upstream does), weight 1;
//   - the Service addresses to bind on kube-ipvs0 (not the node's own);
//   - the members of upstream's ipsets;
//   - the iptables restore input of rules.ts, driven by which sets are empty.
//
// Memory: the contribution of every service port, so a partial sync
// recomputes only state.changedServices and reports in `touched` exactly the
// virtual servers, set members and addresses that may have changed. The
// memory describes what should be, not what was applied, so a failed apply
// does not invalidate it: the caller reconciles against the kernel on the
// next (full) sync. A full sync, or a change of the node addresses, renders
// every service port again. Never throws on bad data: a service port that
// cannot be rendered is listed in `skipped`.
import { cidrContains, isLoopback, isZeroCIDR, parseCIDR, parseIP } from '../../core/ip.js';
import type { DataplaneConfig, Endpoint, IPFamily, ServicePort, SyncState } from '../../core/types.js';
import { servicePortPolicy } from '../policy.js';
import { entry, IPSET, IPSETS, ipsetName, type IpsetName } from './ipsets.js';
import {
  realServerKey,
  sameVirtualServer,
  SVC_FLAG,
  virtualServerKey,
  type RealServer,
  type VirtualServer,
} from './objects.js';
import { renderIpvsRules, type NoNodeAccess } from './rules.js';

export interface IpvsOptions {
  /** --ipvs-scheduler; '' means rr. */
  readonly scheduler: string;
  /** MASQUERADE --random-fully is available. */
  readonly randomFully: boolean;
}

export const DEFAULT_IPVS_OPTIONS: IpvsOptions = { scheduler: 'rr', randomFully: true };

/** One virtual server as it should be. */
export interface DesiredVirtualServer {
  readonly vs: VirtualServer;
  readonly realServers: readonly RealServer[];
  /**
   * realServerKeys of the port's endpoints that still exist but are not
   * chosen (terminating, not ready): their real servers drain gracefully.
   */
  readonly lingering: ReadonlySet<string>;
  /** The ServicePortName string, for logs. */
  readonly servicePort: string;
}

export interface IpvsRenderInput {
  readonly state: SyncState;
  readonly config: DataplaneConfig;
  /**
   * This family's addresses on every link except kube-ipvs0 (the node's own
   * addresses, for NodePorts and for not binding a node address). Default:
   * config.localIPs.
   */
  readonly nodeAddresses?: readonly string[];
}

export interface SkippedServicePort {
  readonly key: string;
  readonly reason: string;
}

export interface IpvsTouched {
  readonly virtualServers: ReadonlySet<string>;
  /** Kernel set name -> members that were added or removed. */
  readonly entries: ReadonlyMap<string, ReadonlySet<string>>;
  readonly addresses: ReadonlySet<string>;
}

export interface IpvsRender {
  readonly partial: boolean;
  /** Every virtual server, by virtualServerKey. */
  readonly virtualServers: ReadonlyMap<string, DesiredVirtualServer>;
  /** Every set of the family (empty ones too), by kernel name. */
  readonly ipsets: ReadonlyMap<string, ReadonlySet<string>>;
  readonly bindAddresses: ReadonlySet<string>;
  /** `iptables-restore --noflush` input (filter, nat). */
  readonly iptables: string;
  /** Partial renders: what may differ from the previous render. Null on a full render. */
  readonly touched: IpvsTouched | null;
  readonly skipped: readonly SkippedServicePort[];
  readonly noLocalEndpoints: { readonly internal: number; readonly external: number };
  /** The node addresses NodePort virtual servers were made for. */
  readonly nodePortAddresses: readonly string[];
}

type Proto = 'tcp' | 'udp' | 'sctp';

/** What one service port adds to the totals. */
interface Contribution {
  readonly serviceKey: string;
  readonly vss: readonly DesiredVirtualServer[];
  readonly entries: ReadonlyArray<readonly [IpsetName, string]>;
  readonly bind: readonly string[];
  readonly noNodeAccess: readonly NoNodeAccess[];
  readonly noLocalInternal: boolean;
  readonly noLocalExternal: boolean;
}

/** A multiset: counts per key, so shared members stay while any owner needs them. */
class Counted<K> {
  readonly counts = new Map<K, number>();
  add(k: K): boolean {
    const n = this.counts.get(k) ?? 0;
    this.counts.set(k, n + 1);
    return n === 0;
  }
  remove(k: K): boolean {
    const n = this.counts.get(k) ?? 0;
    if (n <= 1) this.counts.delete(k);
    else this.counts.set(k, n - 1);
    return n === 1;
  }
}

export class IpvsRenderer {
  private readonly contributions = new Map<string, Contribution>();
  private readonly portsOfService = new Map<string, Set<string>>();
  private readonly vsOwners = new Map<string, Map<string, DesiredVirtualServer>>();
  private readonly virtualServers = new Map<string, DesiredVirtualServer>();
  private readonly entries = new Map<IpsetName, Counted<string>>();
  private readonly binds = new Counted<string>();
  private lastNodeAddresses = '';
  private family: IPFamily | null = null;
  private before = newBefore();

  constructor(private readonly options: IpvsOptions = DEFAULT_IPVS_OPTIONS) {}

  render(inp: IpvsRenderInput): IpvsRender {
    const { state, config } = inp;
    const family = config.family;
    const nodeAddrs = nodeAddressesOf(inp.nodeAddresses ?? config.localIPs, family);
    const npIPs = nodePortIPs(config, nodeAddrs);
    const nodeKey = `${family} ${nodeAddrs.join(',')} | ${npIPs.join(',')}`;
    const full = state.fullSync || this.family !== family || nodeKey !== this.lastNodeAddresses;
    this.before = newBefore();
    if (full) this.clear();
    this.family = family;
    this.lastNodeAddresses = nodeKey;

    const ctx: Ctx = {
      family,
      config,
      scheduler: this.options.scheduler || 'rr',
      nodeAddrs: new Set(nodeAddrs),
      npIPs,
      nodeIP: state.node.nodeIPs[family] ?? null,
    };
    const skipped: SkippedServicePort[] = [];
    const redo = full ? [...state.services.keys()] : this.portsToRedo(state);
    for (const key of redo) {
      this.drop(key);
      const svc = state.services.get(key);
      if (!svc) continue;
      const why = validate(svc, family);
      if (why !== null) {
        skipped.push({ key, reason: why });
        continue;
      }
      this.keep(key, contribution(svc, state, ctx));
    }

    const noLocalInternal = new Set<string>();
    const noLocalExternal = new Set<string>();
    const noNodeAccess: NoNodeAccess[] = [];
    for (const c of this.contributions.values()) {
      if (c.noLocalInternal) noLocalInternal.add(c.serviceKey);
      if (c.noLocalExternal) noLocalExternal.add(c.serviceKey);
      noNodeAccess.push(...c.noNodeAccess);
    }
    const ipsets = new Map<string, ReadonlySet<string>>();
    const nonEmpty = new Set<IpsetName>();
    for (const s of IPSETS) {
      const members = new Set(this.entries.get(s.name)?.counts.keys() ?? []);
      if (members.size > 0) nonEmpty.add(s.name);
      ipsets.set(ipsetName(s.name, family), members);
    }
    // A partial render re-adds the Services it redoes at the end of `contributions`: without a fixed
    // order the same rules would come out in another order, and the unchanged text would be restored again.
    noNodeAccess.sort((a, b) =>
      a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : a.port - b.port || (a.protocol < b.protocol ? -1 : 1),
    );
    const iptables = renderIpvsRules({ config, nonEmpty, noNodeAccess, randomFully: this.options.randomFully });
    const r: IpvsRender = {
      partial: !full,
      virtualServers: this.virtualServers,
      ipsets,
      bindAddresses: new Set(this.binds.counts.keys()),
      iptables,
      touched: full ? null : this.diffTouched(family),
      skipped,
      noLocalEndpoints: { internal: noLocalInternal.size, external: noLocalExternal.size },
      nodePortAddresses: npIPs,
    };
    return r;
  }

  /** Ports to render again on a partial sync: every port, old or new, of a changed Service. */
  private portsToRedo(state: SyncState): string[] {
    const out = new Set<string>();
    for (const svcKey of state.changedServices) for (const k of this.portsOfService.get(svcKey) ?? []) out.add(k);
    for (const [k, svc] of state.services) if (state.changedServices.has(svc.serviceKey)) out.add(k);
    return [...out];
  }

  private clear(): void {
    for (const k of [...this.contributions.keys()]) this.drop(k);
  }

  private keep(key: string, c: Contribution): void {
    this.contributions.set(key, c);
    let ports = this.portsOfService.get(c.serviceKey);
    if (!ports) this.portsOfService.set(c.serviceKey, (ports = new Set()));
    ports.add(key);
    for (const d of c.vss) {
      const vk = virtualServerKey(d.vs);
      let owners = this.vsOwners.get(vk);
      if (!owners) this.vsOwners.set(vk, (owners = new Map()));
      this.noteVS(vk);
      owners.set(key, d);
      this.refreshVS(vk);
    }
    for (const [set, e] of c.entries) {
      this.noteEntry(set, e);
      this.counted(set).add(e);
    }
    for (const a of c.bind) {
      this.noteAddress(a);
      this.binds.add(a);
    }
  }

  private drop(key: string): void {
    const c = this.contributions.get(key);
    if (!c) return;
    this.contributions.delete(key);
    const ports = this.portsOfService.get(c.serviceKey);
    ports?.delete(key);
    if (ports?.size === 0) this.portsOfService.delete(c.serviceKey);
    for (const d of c.vss) {
      const vk = virtualServerKey(d.vs);
      this.noteVS(vk);
      const owners = this.vsOwners.get(vk);
      owners?.delete(key);
      if (owners?.size === 0) this.vsOwners.delete(vk);
      this.refreshVS(vk);
    }
    for (const [set, e] of c.entries) {
      this.noteEntry(set, e);
      this.counted(set).remove(e);
    }
    for (const a of c.bind) {
      this.noteAddress(a);
      this.binds.remove(a);
    }
  }

  /** Two ports claiming one virtual server (a misconfiguration): the first owner wins, as a map would. */
  private refreshVS(vk: string): void {
    const first = this.vsOwners.get(vk)?.values().next().value;
    if (first) this.virtualServers.set(vk, first);
    else this.virtualServers.delete(vk);
  }

  private counted(set: IpsetName): Counted<string> {
    let c = this.entries.get(set);
    if (!c) this.entries.set(set, (c = new Counted()));
    return c;
  }

  // What each touched key looked like before this render, so `touched` lists
  // only real changes (a re-rendered port that came out the same is no change).
  private noteVS(vk: string): void {
    if (!this.before.vs.has(vk)) this.before.vs.set(vk, this.virtualServers.get(vk));
  }
  private noteEntry(set: IpsetName, e: string): void {
    const k = `${set} ${e}`;
    if (!this.before.entries.has(k)) this.before.entries.set(k, this.entries.get(set)?.counts.has(e) ?? false);
  }
  private noteAddress(a: string): void {
    if (!this.before.addresses.has(a)) this.before.addresses.set(a, this.binds.counts.has(a));
  }

  /** The keys whose state differs from before this render. */
  private diffTouched(family: IPFamily): IpvsTouched {
    const vs = new Set<string>();
    for (const [vk, was] of this.before.vs) if (!sameDesired(was, this.virtualServers.get(vk))) vs.add(vk);
    const entries = new Map<string, Set<string>>();
    for (const [k, was] of this.before.entries) {
      const sp = k.indexOf(' ');
      const set = k.slice(0, sp) as IpsetName;
      const e = k.slice(sp + 1);
      if (was === (this.entries.get(set)?.counts.has(e) ?? false)) continue;
      const name = ipsetName(set, family);
      let m = entries.get(name);
      if (!m) entries.set(name, (m = new Set()));
      m.add(e);
    }
    const addresses = new Set<string>();
    for (const [a, was] of this.before.addresses) if (was !== this.binds.counts.has(a)) addresses.add(a);
    return { virtualServers: vs, entries, addresses };
  }
}

function sameDesired(a: DesiredVirtualServer | undefined, b: DesiredVirtualServer | undefined): boolean {
  if (a === b) return true;
  if (!a || !b) return false;
  if (virtualServerKey(a.vs) !== virtualServerKey(b.vs) || !sameVirtualServer(a.vs, b.vs)) return false;
  if (a.realServers.length !== b.realServers.length || a.lingering.size !== b.lingering.size) return false;
  for (let i = 0; i < a.realServers.length; i++) {
    const x = a.realServers[i]!;
    const y = b.realServers[i]!;
    if (x.address !== y.address || x.port !== y.port || x.weight !== y.weight) return false;
  }
  for (const k of a.lingering) if (!b.lingering.has(k)) return false;
  return true;
}

function newBefore() {
  return {
    vs: new Map<string, DesiredVirtualServer | undefined>(),
    entries: new Map<string, boolean>(),
    addresses: new Map<string, boolean>(),
  };
}

interface Ctx {
  readonly family: IPFamily;
  readonly config: DataplaneConfig;
  readonly scheduler: string;
  readonly nodeAddrs: ReadonlySet<string>;
  readonly npIPs: readonly string[];
  readonly nodeIP: string | null;
}

/** Upstream isValidForSet: this family, no loopback, no IPv6 link-local; normalised and sorted. */
function nodeAddressesOf(addrs: readonly string[], family: IPFamily): string[] {
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
function nodePortIPs(config: DataplaneConfig, nodeAddrs: readonly string[]): string[] {
  const npa = config.nodePortAddresses;
  if (npa === null || npa.some((c) => isZeroCIDR(c))) return [...nodeAddrs];
  const cidrs = npa.map((c) => parseCIDR(c)).filter((c) => c !== null && c.family === config.family);
  return nodeAddrs.filter((ip) => cidrs.some((c) => cidrContains(c!, ip)));
}

function validate(svc: ServicePort, family: IPFamily): string | null {
  if (svc.family !== family) return `family ${svc.family} in a ${family} render`;
  if (parseIP(svc.clusterIP)?.family !== family) return `bad clusterIP ${svc.clusterIP}`;
  if (!Number.isInteger(svc.port) || svc.port < 1 || svc.port > 65535) return `bad port ${svc.port}`;
  if (svc.nodePort !== 0 && !(Number.isInteger(svc.nodePort) && svc.nodePort > 0 && svc.nodePort <= 65535))
    return `bad nodePort ${svc.nodePort}`;
  return null;
}

const rs = (e: Endpoint): RealServer => ({ address: e.ip, port: e.port, weight: 1 });

/** The contribution of one service port (upstream's loop body of syncProxyRules). */
function contribution(svc: ServicePort, state: SyncState, ctx: Ctx): Contribution {
  const proto = svc.protocol.toLowerCase() as Proto;
  const cat = state.categorized.get(svc.key);
  const pol = servicePortPolicy(svc, cat);
  const all = state.endpoints.get(svc.key) ?? [];
  const entries: Array<[IpsetName, string]> = [];
  const vss: DesiredVirtualServer[] = [];
  const bind: string[] = [];
  const noNodeAccess: NoNodeAccess[] = [];
  let noLocalInternal = false;
  let noLocalExternal = false;

  /** Upstream syncEndpoint: local endpoints under a Local policy, else (and as fallback) the cluster ones. */
  const endpointsFor = (onlyLocal: boolean): readonly Endpoint[] => {
    if (!onlyLocal) return pol.clusterEndpoints;
    if (pol.localEndpoints.length > 0) return pol.localEndpoints;
    if (pol.hasEndpoints && svc.internalPolicyLocal) noLocalInternal = true;
    if (pol.hasEndpoints && svc.externalPolicyLocal) noLocalExternal = true;
    return pol.clusterEndpoints;
  };
  const flags =
    (svc.stickyMaxAgeSeconds > 0 ? SVC_FLAG.PERSISTENT : 0) | (ctx.scheduler === 'mh' ? SVC_FLAG.SCHED2 : 0);
  const addVS = (address: string, port: number, onlyLocal: boolean) => {
    const chosen = endpointsFor(onlyLocal);
    const chosenKeys = new Set(chosen.map((e) => realServerKey(rs(e))));
    const lingering = new Set(all.map((e) => realServerKey(rs(e))).filter((k) => !chosenKeys.has(k)));
    vss.push({
      vs: {
        family: ctx.family,
        protocol: svc.protocol,
        address,
        port,
        scheduler: ctx.scheduler,
        flags,
        timeout: svc.stickyMaxAgeSeconds > 0 ? svc.stickyMaxAgeSeconds : 0,
      },
      realServers: dedupe(chosen.map(rs)),
      lingering,
      servicePort: svc.key,
    });
  };

  // Hairpin: a local endpoint reaching itself through the Service is masqueraded.
  for (const e of all) if (e.isLocal) entries.push([IPSET.LOOP_BACK, entry.ipPortIp(e.ip, proto, e.port, e.ip)]);

  entries.push([IPSET.CLUSTER_IP, entry.ipPort(svc.clusterIP, proto, svc.port)]);
  addVS(svc.clusterIP, svc.port, svc.internalPolicyLocal);
  bind.push(svc.clusterIP);

  for (const ip of svc.externalIPs) {
    const e = entry.ipPort(ip, proto, svc.port);
    entries.push([svc.externalPolicyLocal ? IPSET.EXTERNAL_IP_LOCAL : IPSET.EXTERNAL_IP, e]);
    addVS(ip, svc.port, svc.externalPolicyLocal);
    if (!ctx.nodeAddrs.has(ip)) bind.push(ip); // never take over an address another link holds
  }

  for (const ip of svc.loadBalancerVIPs) {
    const e = entry.ipPort(ip, proto, svc.port);
    entries.push([IPSET.LOAD_BALANCER, e]);
    if (svc.externalPolicyLocal) entries.push([IPSET.LOAD_BALANCER_LOCAL, e]);
    if (svc.loadBalancerSourceRanges.length > 0) {
      entries.push([IPSET.LOAD_BALANCER_FW, e]);
      let allowFromNode = false;
      for (const cidr of svc.loadBalancerSourceRanges) {
        entries.push([IPSET.LOAD_BALANCER_SOURCE_CIDR, entry.ipPortNet(ip, proto, svc.port, cidr)]);
        const c = parseCIDR(cidr);
        if (c && ctx.nodeIP !== null && c.family === ctx.family && cidrContains(c, ctx.nodeIP)) allowFromNode = true;
      }
      // The node inside a range may use the LB address from itself (source = LB IP after routing).
      if (allowFromNode) entries.push([IPSET.LOAD_BALANCER_SOURCE_IP, entry.ipPortIp(ip, proto, svc.port, ip)]);
      else noNodeAccess.push({ ip, protocol: proto, port: svc.port });
    }
    addVS(ip, svc.port, svc.externalPolicyLocal);
    if (!ctx.nodeAddrs.has(ip)) bind.push(ip);
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
      entries.push([cluster, m]);
      if (svc.externalPolicyLocal) entries.push([local, m]);
    }
    for (const ip of ctx.npIPs) addVS(ip, svc.nodePort, svc.externalPolicyLocal);
  }

  if (svc.healthCheckNodePort !== 0) entries.push([IPSET.HEALTH_CHECK_NODE_PORT, entry.port(svc.healthCheckNodePort)]);

  // KUBE-IPVS-IPS holds exactly the addresses bound to kube-ipvs0.
  for (const a of bind) entries.push([IPSET.IPVS_IPS, entry.ip(a)]);
  return {
    serviceKey: svc.serviceKey,
    vss,
    entries,
    bind,
    noNodeAccess,
    noLocalInternal,
    noLocalExternal,
  };
}

function dedupe(list: RealServer[]): RealServer[] {
  const seen = new Set<string>();
  return list.filter((r) => {
    const k = realServerKey(r);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
