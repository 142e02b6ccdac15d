// What changes for this node's Services when the proxy moves from one mode to
// another (`kube-proxy-ts migrate --to MODE`, src/cmd/migrate.ts). Pure: the
// Services come as the SyncStates the proxy would sync (one per family), the
// node as facts read beforehand (addresses, kube-ipvs0, the IPVS table's
// schedulers, listening sockets, ARP sysctls), the configuration as the few
// values that decide behaviour. Each finding names a Service (or the node),
// says what behaves differently after the move and what to do about it.
//
// The differences are the ones docs/migration.md and docs/compatibility.md
// describe in prose; a mode pair with none of them yields no findings. A
// finding with `changes: false` is a note: worth knowing, nothing breaks.
// Modes are compared through their traits (migratetraits.ts), never by name.
import { nftablesLocalhostNodePorts, nodePortAddressesForFamily } from '../core/config/nodeport.js';
import type { ResolvedConfig } from '../core/config/types.js';
import { cidrContains, isLoopback, normalizeIP, parseCIDR, parseIP } from '../core/ip.js';
import { LB_ALGORITHM_ANNOTATION } from '../core/serviceport.js';
import type { IPFamily, Protocol, ProxyMode, ServicePort, SyncState } from '../core/types.js';
import { MODE_TRAITS } from './migratetraits.js';

export { MODE_TRAITS, type ModeTraits } from './migratetraits.js';

/** The modes a node can move to with this check. */
export const MIGRATE_TARGETS = ['iptables', 'nftables', 'ebpf'] as const;
export type MigrateTarget = (typeof MIGRATE_TARGETS)[number];

export type FindingKind =
  | 'scheduler'
  | 'kube-ipvs0'
  | 'listener'
  | 'strict-arp'
  | 'nodeport-addresses'
  | 'external-traffic-policy'
  | 'internal-traffic-policy'
  | 'sctp'
  | 'health-check-node-port';

export interface Finding {
  readonly kind: FindingKind;
  /** "namespace/name", or null for the node as a whole. */
  readonly service: string | null;
  /** What behaves differently after the move. */
  readonly change: string;
  /** What to do before (or instead of) the move. */
  readonly action: string;
  /** True when behaviour changes; false for a note. */
  readonly changes: boolean;
}

/** A socket waiting for connections (TCP) or datagrams (UDP); the address may be a wildcard. */
export interface Listener {
  readonly protocol: 'TCP' | 'UDP';
  readonly address: string;
  readonly port: number;
}

/** An IPVS virtual server as the kernel lists it (/proc/net/ip_vs). */
export interface VirtualServerFact {
  readonly protocol: Protocol;
  readonly address: string;
  readonly port: number;
  readonly scheduler: string;
}

/** What was read from the node before the analysis. */
export interface NodeFacts {
  /** The node's addresses, both families, without kube-ipvs0's. */
  readonly addresses: readonly string[];
  /** kube-ipvs0's addresses; null when the node has no kube-ipvs0. */
  readonly ipvsAddresses: readonly string[] | null;
  /** The IPVS table's virtual servers; null when IPVS is not loaded (nothing to read). */
  readonly virtualServers: readonly VirtualServerFact[] | null;
  readonly listeners: readonly Listener[];
  /** net.ipv4.conf.all.arp_ignore and arp_announce; null when unreadable. */
  readonly arpIgnore: number | null;
  readonly arpAnnounce: number | null;
}

export interface MigrateInput {
  readonly from: ProxyMode;
  readonly to: MigrateTarget;
  /** One state per family the proxy serves, primary first. */
  readonly states: readonly SyncState[];
  /** Service key -> the raw value of its LB_ALGORITHM_ANNOTATION, for the Services that carry it. */
  readonly annotations: ReadonlyMap<string, string>;
  readonly config: ResolvedConfig;
  /** --ebpf-lb-algorithm: the ebpf mode's choice for Services without the annotation. */
  readonly ebpfAlgorithm: string;
  readonly node: NodeFacts;
}

/** IPVS schedulers and the annotation value that keeps them in the modes that take it. */
const SCHEDULER_EQUIVALENT: Readonly<Record<string, string>> = {
  rr: 'round-robin',
  sh: 'source-hash',
  mh: 'maglev',
};

const WILDCARD = new Set(['0.0.0.0', '::']);

export function migrationFindings(input: MigrateInput): Finding[] {
  if (input.from === input.to) return [];
  const [from, to] = [MODE_TRAITS[input.from], MODE_TRAITS[input.to]];
  const out: Finding[] = [];
  const ports = servicePortsByService(input.states);
  if (from.setsStrictARP && !to.setsStrictARP) out.push(...strictArp(input));
  const dummy = input.node.ipvsAddresses;
  if (from.bindsServiceAddresses && !to.bindsServiceAddresses && dummy !== null)
    out.push({
      kind: 'kube-ipvs0',
      service: null,
      changes: false,
      change: `kube-ipvs0 holds ${dummy.length} address(es); ${input.to} mode removes the interface when it takes over`,
      action: 'nothing; tools that read Service addresses from ip addr stop seeing them',
    });
  for (const [svc, sps] of ports) {
    out.push(...endpointChoice(input, svc, sps));
    if (from.bindsServiceAddresses && !to.bindsServiceAddresses) out.push(...kubeIpvs0(input, svc, sps));
    if (from.localPolicy === 'ipvs' && to.localPolicy !== 'ipvs') out.push(...trafficPolicies(input, svc, sps));
    out.push(...nodePortAddresses(input, svc, sps));
    out.push(...lostServing(input, svc, sps));
  }
  return out;
}

/** Service key -> its ports of every family, in the states' order. */
function servicePortsByService(states: readonly SyncState[]): Map<string, ServicePort[]> {
  const m = new Map<string, ServicePort[]>();
  for (const s of states)
    for (const sp of s.services.values()) {
      const l = m.get(sp.serviceKey);
      if (l) l.push(sp);
      else m.set(sp.serviceKey, [sp]);
    }
  return new Map([...m].sort(([a], [b]) => a.localeCompare(b)));
}

function strictArp(input: MigrateInput): Finding[] {
  const { arpIgnore, arpAnnounce } = input.node;
  const sysctls = `arp_ignore=${arpIgnore ?? '?'}, arp_announce=${arpAnnounce ?? '?'}`;
  if (input.config.ipvs.strictARP)
    return [
      {
        kind: 'strict-arp',
        service: null,
        changes: true,
        change:
          `ipvs.strictARP is set: IPVS mode sets net.ipv4.conf.all.arp_ignore=1 and arp_announce=2 at each start (now ${sysctls}); ` +
          `${input.to} mode sets neither, so after a reboot the node has the kernel's defaults`,
        action:
          `nothing for ${input.to} mode, which binds no Service address; a load balancer that asked for strict ARP ` +
          'because of kube-ipvs0 (MetalLB in L2 mode) no longer needs it. Set the sysctls yourself if something else does',
      },
    ];
  if (arpIgnore === 1 && arpAnnounce === 2)
    return [
      {
        kind: 'strict-arp',
        service: null,
        changes: false,
        change: `strict ARP is on (${sysctls}) without ipvs.strictARP: something else set it, and it stays`,
        action: 'nothing; the proxy never resets these sysctls',
      },
    ];
  return [];
}

/** The IPVS scheduler of each port's virtual servers: the live table where it has them, else the configuration. */
function schedulersOf(input: MigrateInput, sps: readonly ServicePort[]): string[] {
  const configured = input.config.ipvs.scheduler || 'rr';
  const live = input.node.virtualServers;
  const seen = new Set<string>();
  for (const sp of sps) {
    const vs = live?.find((v) => v.address === sp.clusterIP && v.port === sp.port && v.protocol === sp.protocol);
    seen.add(vs?.scheduler ?? configured);
  }
  return [...seen].sort();
}

/** A mode's choice for a Service without the annotation, as the IPVS scheduler that does the same (null: at random). */
function choiceOf(
  input: MigrateInput,
  mode: ProxyMode,
  sps: readonly ServicePort[],
): { sched: string; what: string }[] {
  switch (MODE_TRAITS[mode].endpointChoice) {
    case 'ipvs-scheduler':
      return schedulersOf(input, sps).map((sched) => ({ sched, what: `IPVS scheduler ${sched}` }));
    case 'round-robin':
      return [{ sched: 'rr', what: `${mode} mode's round-robin` }];
    case 'ebpf-flag':
      return input.ebpfAlgorithm === 'maglev'
        ? [{ sched: 'mh', what: `${mode} mode's maglev (--ebpf-lb-algorithm)` }]
        : [];
    default:
      return [];
  }
}

function endpointChoice(input: MigrateInput, svc: string, sps: readonly ServicePort[]): Finding[] {
  if (input.annotations.has(svc)) return [];
  const to = MODE_TRAITS[input.to];
  const kept = new Set(choiceOf(input, input.to, sps).map((c) => c.sched));
  const toChoice =
    to.endpointChoice === 'ebpf-flag'
      ? `${input.ebpfAlgorithm === 'maglev' ? 'maglev' : 'at random'} (--ebpf-lb-algorithm)`
      : 'at random, each endpoint equally likely';
  const out: Finding[] = [];
  for (const { sched, what } of choiceOf(input, input.from, sps)) {
    if (kept.has(sched)) continue;
    const value = SCHEDULER_EQUIVALENT[sched];
    const change = `${what} picks its endpoints; ${input.to} mode's choice is ${toChoice}`;
    let action: string;
    if (value !== undefined && to.lbAnnotation)
      action = `annotate the Service ${LB_ALGORITHM_ANNOTATION}=${value} to keep ${sched}`;
    else if (value !== undefined)
      action =
        `${input.to} mode has no equivalent of ${sched}` +
        (sched === 'sh' ? '; sessionAffinity: ClientIP keeps a client on one endpoint' : '; accept the random choice');
    else
      action =
        `no equivalent of ${sched} in ${input.to} mode` +
        (['lc', 'wlc', 'lblc', 'lblcr', 'sed', 'nq'].includes(sched)
          ? ' (nothing balances by connection count): accept the random choice'
          : sched === 'dh'
            ? '; sessionAffinity: ClientIP keeps a client on one endpoint'
            : ': accept the random choice');
    out.push({ kind: 'scheduler', service: svc, changes: true, change, action });
  }
  return out;
}

/** The addresses IPVS mode puts on kube-ipvs0 for a Service. */
function boundAddresses(sps: readonly ServicePort[]): string[] {
  const set = new Set<string>();
  for (const sp of sps) for (const a of [sp.clusterIP, ...sp.externalIPs, ...sp.loadBalancerVIPs]) set.add(a);
  return [...set];
}

function kubeIpvs0(input: MigrateInput, svc: string, sps: readonly ServicePort[]): Finding[] {
  const addrs = boundAddresses(sps);
  const out: Finding[] = [
    {
      kind: 'kube-ipvs0',
      service: svc,
      changes: true,
      change:
        `${addrs.join(', ')} ${addrs.length === 1 ? 'stops' : 'stop'} being an address of this node (kube-ipvs0): ` +
        `no ping reply, not listed by ip addr; ${input.to} mode reaches the Service by rules alone`,
      action: 'clients that ping the Service or look for its address on the node must check the Service another way',
    },
  ];
  const bound = new Set(addrs);
  for (const l of input.node.listeners) {
    if (bound.has(l.address)) {
      out.push({
        kind: 'listener',
        service: svc,
        changes: true,
        change:
          `a node process listens on ${hostPort(l.address, l.port)}/${l.protocol}, a Service address: ` +
          `after the move the address is not the node's, so the process cannot bind it again and ${input.to} mode ` +
          'takes or refuses what is sent there',
        action: 'move the process to a node address (or expose it through a Service of its own)',
      });
      continue;
    }
    if (!WILDCARD.has(l.address)) continue;
    const family: IPFamily = l.address === '::' ? 'IPv6' : 'IPv4';
    // An IPv6 wildcard socket also takes IPv4 unless it is v6-only, which /proc does not say: match both.
    const sp = sps.find(
      (p) => p.port === l.port && p.protocol === l.protocol && (family === 'IPv6' || p.family === 'IPv4'),
    );
    if (!sp) continue;
    // IPVS takes the Service's port on its addresses before any socket, and KUBE-IPVS-FILTER refuses
    // the other ports there, so the process is not reached through them today either: a note.
    out.push({
      kind: 'listener',
      service: svc,
      changes: false,
      change:
        `a node process listens on ${hostPort(l.address, l.port)}/${l.protocol}, the port of ${sp.key}; the Service's ` +
        'addresses are local in IPVS mode, but IPVS takes this port on them before the process does, ' +
        `as ${input.to} mode will`,
      action: 'nothing, unless clients expect this process behind the Service address',
    });
  }
  return out;
}

function trafficPolicies(input: MigrateInput, svc: string, sps: readonly ServicePort[]): Finding[] {
  const out: Finding[] = [];
  const etp = sps.filter((sp) => sp.externalPolicyLocal && sp.externallyAccessible);
  if (etp.length > 0) {
    out.push({
      kind: 'external-traffic-policy',
      service: svc,
      changes: true,
      change:
        "externalTrafficPolicy: Local: traffic from this node's pods to its NodePorts, external IPs and " +
        `load-balancer IPs goes to endpoints on this node only in IPVS mode; in ${input.to} mode to any endpoint of the cluster`,
      action: 'nothing, unless clients inside the cluster rely on reaching an endpoint on their own node',
    });
    const noLocal = etp.filter((sp) => hasNoLocalEndpoint(input, sp));
    if (noLocal.length > 0)
      out.push({
        kind: 'external-traffic-policy',
        service: svc,
        changes: true,
        change:
          `${keys(noLocal)}: this node has no local endpoint. IPVS mode forwards external traffic that reaches it ` +
          `to remote endpoints without masquerading (kubernetes#97081); ${input.to} mode drops it`,
        action:
          'make sure the load balancer sends only to nodes with endpoints (health check on healthCheckNodePort), ' +
          'or use externalTrafficPolicy: Cluster',
      });
  }
  const itp = sps.filter((sp) => sp.internalPolicyLocal && hasNoLocalEndpoint(input, sp));
  if (itp.length > 0)
    out.push({
      kind: 'internal-traffic-policy',
      service: svc,
      changes: true,
      change:
        `${keys(itp)}: internalTrafficPolicy: Local with no endpoint on this node: a connection from this node's ` +
        `pods is refused in IPVS mode and dropped (the client waits for its timeout) in ${input.to} mode`,
      action: 'run an endpoint on every node that has clients, or use internalTrafficPolicy: Cluster',
    });
  return out;
}

function hasNoLocalEndpoint(input: MigrateInput, sp: ServicePort): boolean {
  const state = input.states.find((s) => s.family === sp.family);
  const c = state?.categorized.get(sp.key);
  return c !== undefined && c.hasAnyEndpoints && (c.localEndpoints ?? []).length === 0;
}

const keys = (sps: readonly ServicePort[]): string => sps.map((sp) => sp.key).join(', ');

/** The node addresses a mode serves NodePorts on, for one family and protocol. */
function nodePortServed(
  input: MigrateInput,
  mode: ProxyMode,
  family: IPFamily,
  protocol: Protocol,
  nodeIP: string | null,
): Set<string> {
  const config = input.config;
  const traits = MODE_TRAITS[mode];
  const list =
    config.nodePortAddresses.length === 0 && traits.nodePortDefault === 'primary'
      ? ['primary']
      : config.nodePortAddresses;
  const cidrs = nodePortAddressesForFamily(list, family, nodeIP);
  const out = new Set<string>();
  for (const a of input.node.addresses) {
    const ip = parseIP(a);
    if (!ip || ip.family !== family || isLoopback(ip) || (family === 'IPv6' && a.startsWith('fe80:'))) continue;
    if (cidrs === null || cidrs.some((c) => cidrContains(parseCIDR(c)!, ip))) out.add(ip.text);
  }
  if (
    traits.loopbackNodePorts === 'route-localnet' &&
    family === 'IPv4' &&
    (config.iptables.localhostNodePorts ?? true)
  ) {
    if (cidrs === null || cidrs.some((c) => cidrContains(parseCIDR(c)!, '127.0.0.1'))) out.add('127.0.0.1');
  }
  if (traits.loopbackNodePorts === 'relay' && protocol === 'TCP') {
    // The relay's rule (the gate, the opt-in) as nftables mode decides it.
    const lo = nftablesLocalhostNodePorts({ ...config, mode: 'nftables', nodePortAddresses: list }, family, nodeIP);
    if (lo === 'serve') out.add(family === 'IPv4' ? '127.0.0.1' : '::1');
  }
  return out;
}

function nodePortAddresses(input: MigrateInput, svc: string, sps: readonly ServicePort[]): Finding[] {
  const lost = new Map<string, Set<string>>();
  const gained = new Map<string, Set<string>>();
  for (const sp of sps) {
    if (sp.nodePort === 0) continue;
    // SCTP NodePorts in a mode without SCTP are a finding of their own.
    if (!MODE_TRAITS[input.to].servesSCTP && sp.protocol === 'SCTP') continue;
    const state = input.states.find((s) => s.family === sp.family);
    const nodeIP = normalizeIP(state?.node.nodeIPs[sp.family]) ?? null;
    const before = nodePortServed(input, input.from, sp.family, sp.protocol, nodeIP);
    const after = nodePortServed(input, input.to, sp.family, sp.protocol, nodeIP);
    const port = `${sp.nodePort}/${sp.protocol}`;
    for (const a of before) if (!after.has(a)) add(lost, port, a);
    for (const a of after) if (!before.has(a)) add(gained, port, a);
  }
  const out: Finding[] = [];
  if (lost.size > 0)
    out.push({
      kind: 'nodeport-addresses',
      service: svc,
      changes: true,
      change: `NodePorts no longer served on some node addresses: ${describe(lost)}`,
      action:
        `if clients use those addresses, list them in nodePortAddresses (${input.to} mode serves ` +
        `${input.config.nodePortAddresses.length > 0 ? input.config.nodePortAddresses.join(', ') : MODE_TRAITS[input.to].nodePortDefault === 'all' ? 'every node address' : 'the primary addresses'}); ` +
        'else point the clients at the primary address',
    });
  if (gained.size > 0)
    out.push({
      kind: 'nodeport-addresses',
      service: svc,
      changes: true,
      change: `NodePorts newly served on more node addresses: ${describe(gained)}`,
      action: 'set nodePortAddresses to keep them to the addresses served today',
    });
  return out;
}

function add(m: Map<string, Set<string>>, k: string, v: string): void {
  const s = m.get(k);
  if (s) s.add(v);
  else m.set(k, new Set([v]));
}

const describe = (m: Map<string, Set<string>>): string =>
  [...m].map(([port, addrs]) => `${port} on ${[...addrs].sort().join(', ')}`).join('; ');

/** What the new mode does not serve or accept that the old one did (ebpf: SCTP, the health-check accept rule). */
function lostServing(input: MigrateInput, svc: string, sps: readonly ServicePort[]): Finding[] {
  const [from, to] = [MODE_TRAITS[input.from], MODE_TRAITS[input.to]];
  const out: Finding[] = [];
  const sctp = sps.filter((sp) => sp.protocol === 'SCTP');
  if (sctp.length > 0 && from.servesSCTP && !to.servesSCTP)
    out.push({
      kind: 'sctp',
      service: svc,
      changes: true,
      change: `${keys(sctp)}: SCTP service ports are not served in ${input.to} mode (skipped and reported)`,
      action: 'keep this node in a mode that serves SCTP while it has SCTP Services',
    });
  const hc = [...new Set(sps.filter((sp) => sp.healthCheckNodePort > 0).map((sp) => sp.healthCheckNodePort))];
  if (hc.length > 0 && from.acceptsHealthCheckNodePort && !to.acceptsHealthCheckNodePort)
    out.push({
      kind: 'health-check-node-port',
      service: svc,
      changes: true,
      change:
        `health-check node port ${hc.join(', ')}/TCP: ${input.from} mode writes a rule accepting it, ${input.to} mode ` +
        'none, so a node firewall that drops unknown ports hides the health check from the load balancer',
      action: 'open the port in the node firewall, if it has one',
    });
  return out;
}

function hostPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}
