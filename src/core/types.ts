// The proxy's internal model: what the change trackers produce and what every
// datapath renders. Upstream nouns are kept (ServicePortName, BaseServicePortInfo,
// Endpoint) so a reader can hold the Go beside ours.
//
// Everything here is readonly data. A datapath receives a SyncState snapshot and
// must not mutate it.

import type { LbAlgorithm } from './lbalgorithm.js';
export type Protocol = 'TCP' | 'UDP' | 'SCTP';
export type IPFamily = 'IPv4' | 'IPv6';
export type ProxyMode = 'iptables' | 'nftables' | 'ipvs' | 'userspace' | 'ebpf';

/** Upstream ServicePortName: namespace/name:port plus the protocol. */
export interface ServicePortName {
  readonly namespace: string;
  readonly name: string;
  /** The port's name; "" for a single unnamed port. */
  readonly port: string;
  readonly protocol: Protocol;
}

/** "ns/svc:port", or "ns/svc" when the port name is empty (upstream String()). */
export function servicePortNameString(spn: ServicePortName): string {
  const base = `${spn.namespace}/${spn.name}`;
  return spn.port === '' ? base : `${base}:${spn.port}`;
}

/** "ns/svc": the key of a Service (upstream types.NamespacedName). */
export function namespacedName(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/**
 * One port of one Service for one IP family (upstream BaseServicePortInfo).
 * All addresses are normalised (leading zeros removed, IPv6 lower-case compressed)
 * and belong to `family`.
 */
export interface ServicePort {
  readonly name: ServicePortName;
  /** servicePortNameString(name): the key of maps keyed by service port. */
  readonly key: string;
  /** namespacedName of the owning Service. */
  readonly serviceKey: string;
  readonly family: IPFamily;
  readonly clusterIP: string;
  readonly port: number;
  readonly protocol: Protocol;
  /** 0 when the port has no NodePort. */
  readonly nodePort: number;
  readonly externalIPs: readonly string[];
  /** LB ingress IPs in VIP mode (ipMode unset or VIP) of this family. */
  readonly loadBalancerVIPs: readonly string[];
  /** Trimmed CIDRs of this family; empty means allow all (a 0.0.0.0/0 entry also empties it). */
  readonly loadBalancerSourceRanges: readonly string[];
  /** ClientIP affinity timeout in seconds; 0 means no affinity. */
  readonly stickyMaxAgeSeconds: number;
  readonly externalPolicyLocal: boolean;
  readonly internalPolicyLocal: boolean;
  /** 0 unless type LoadBalancer with externalTrafficPolicy Local. */
  readonly healthCheckNodePort: number;
  readonly trafficDistribution: string;
  /**
   * Our annotation kube-proxy-ts/lb-algorithm (src/core/lbalgorithm.ts), set
   * only when the Service carries a valid one; honoured by the nftables and
   * ebpf modes.
   */
  readonly lbAlgorithm?: LbAlgorithm;
  /** nodePort != 0 || any LB VIP || any externalIP. */
  readonly externallyAccessible: boolean;
  /** !internalPolicyLocal || externallyAccessible. */
  readonly usesClusterEndpoints: boolean;
  /** internalPolicyLocal || (externalPolicyLocal && externallyAccessible). */
  readonly usesLocalEndpoints: boolean;
}

/** One endpoint of one service port (upstream BaseEndpointInfo). */
export interface Endpoint {
  readonly ip: string;
  readonly port: number;
  /** "ip:port", or "[ip]:port" for IPv6 (upstream net.JoinHostPort). */
  readonly key: string;
  readonly isLocal: boolean;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  /** Zones from hints.forZones; null when the endpoint carries no zone hints. */
  readonly zoneHints: ReadonlySet<string> | null;
  /** Nodes from hints.forNodes; null when the endpoint carries no node hints. */
  readonly nodeHints: ReadonlySet<string> | null;
  readonly nodeName: string;
  readonly zone: string;
}

/** Upstream CategorizeEndpoints output. */
export interface CategorizedEndpoints {
  /** Endpoints for cluster-policy traffic; null when the service does not use them. */
  readonly clusterEndpoints: readonly Endpoint[] | null;
  /** Endpoints for local-policy traffic; null when the service does not use them. */
  readonly localEndpoints: readonly Endpoint[] | null;
  /** Union of the two, for things (conntrack, affinity) that need every endpoint in use. */
  readonly allReachableEndpoints: readonly Endpoint[];
  /** Any endpoint anywhere is ready, or serving-and-terminating. */
  readonly hasAnyEndpoints: boolean;
}

/** What the proxy knows about its own node. */
export interface NodeInfo {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  /** Primary node IPs per family (bindAddress override, else Node addresses). */
  readonly nodeIPs: Readonly<Partial<Record<IPFamily, string>>>;
  readonly podCIDRs: readonly string[];
}

/** How "traffic from a local pod" is recognised (--detect-local-mode). */
export type LocalDetector =
  | { readonly kind: 'none' }
  | { readonly kind: 'cidr'; readonly cidrs: readonly string[] }
  | { readonly kind: 'bridge'; readonly interfaceName: string }
  | { readonly kind: 'prefix'; readonly interfacePrefix: string };

/**
 * The part of the configuration a datapath needs to render rules, already
 * resolved for one IP family.
 */
export interface DataplaneConfig {
  readonly family: IPFamily;
  /** 1 << masqueradeBit */
  readonly masqueradeMark: number;
  readonly masqueradeAll: boolean;
  readonly localDetector: LocalDetector;
  /**
   * Expanded nodePortAddresses CIDRs of this family; null means "all local IPs"
   * (upstream MatchAll).
   */
  readonly nodePortAddresses: readonly string[] | null;
  /** iptables IPv4 only: serve NodePorts on 127.0.0.0/8. */
  readonly localhostNodePorts: boolean;
  /** Local IPs of the node for this family (from the host's interfaces). */
  readonly localIPs: readonly string[];
}

/**
 * A snapshot handed to a datapath's sync. Maps are keyed by ServicePort.key.
 * Endpoint lists are sorted by their `key` string (upstream order).
 */
export interface SyncState {
  readonly family: IPFamily;
  readonly services: ReadonlyMap<string, ServicePort>;
  readonly endpoints: ReadonlyMap<string, readonly Endpoint[]>;
  /** Endpoint categories per service port, computed once by the engine. */
  readonly categorized: ReadonlyMap<string, CategorizedEndpoints>;
  /**
   * Service keys (namespacedName) whose ports or endpoints changed since the
   * last successful sync. Meaningless when fullSync is true.
   */
  readonly changedServices: ReadonlySet<string>;
  /**
   * Keys of this state's service ports whose Service is in changedServices
   * (so a renderer need not scan every port to find them). Optional: when
   * absent, renderers that want it scan `services`.
   */
  readonly changedServicePorts?: ReadonlySet<string>;
  /** Rewrite everything: first sync, after a failure, topology change, or hourly. */
  readonly fullSync: boolean;
  readonly node: NodeInfo;
  /** ServiceCIDRs of this family. */
  readonly serviceCIDRs: readonly string[];
}

export interface SyncOutcome {
  /** True when the datapath wrote only the changed services. */
  readonly partial: boolean;
  /** Free-form per-mode counters for metrics (e.g. rules per table). */
  readonly counters?: Readonly<Record<string, number>>;
}

/**
 * One datapath for one IP family. The engine calls sync() from one place only
 * (the bounded-frequency runner), never concurrently. A rejected promise makes
 * the next sync full.
 */
export interface Dataplane {
  readonly mode: ProxyMode;
  readonly family: IPFamily;
  sync(state: SyncState): Promise<SyncOutcome>;
  /** Remove everything this datapath created, and nothing else. */
  cleanup(): Promise<void>;
  /** Release process resources (sockets, listeners) at shutdown; rules stay. */
  close?(): void | Promise<void>;
  /**
   * True when the periodic (hourly) full sync should be left out, for now:
   * iptables mode in large-cluster mode (its last sync saw more than 1000
   * endpoints), upstream kubernetes PR #138571 (1.37, also in 1.35.x and
   * 1.36.x). Syncs that must be full (first, after a failure, after a
   * topology change, after tampering) stay full.
   */
  skipsPeriodicFullSync?(): boolean;
  /**
   * True when the kernel holds nothing of this mode from an earlier run (a
   * node's first start, not a restart): the engine may then program the
   * Services it has seen while its first lists are still coming in
   * (src/engine/earlystart.ts), each such sync only adding to the last.
   * Asked once, before the first sync. Modes that leave it out program
   * nothing before the lists are in.
   */
  startsEmpty?(): Promise<boolean>;
  /**
   * Ask to be told when another actor changes or removes what this datapath
   * wrote (`nft delete table ip kube-proxy`, `iptables -F KUBE-SERVICES`, a
   * detached tc program, a closed listener); the engine then syncs fully at
   * once, which repairs it, and counts, logs and posts the repair. Each mode
   * documents how it notices; modes that cannot leave it out and rely on
   * their periodic syncs. The watch starts with the first sync and ends with
   * close().
   */
  watchDrift?(onDrift: (drift: Drift) => void): void;
}

/**
 * Why a datapath thinks its kernel state is no longer what it wrote. The
 * reason is a stable code (a metric label: keep the set small); the detail
 * says what was seen, for the log, the Event and /statusz.
 */
export interface Drift {
  readonly reason: DriftReason;
  readonly detail: string;
}

export type DriftReason =
  /** Rules, chains, tables or IPVS virtual servers of ours changed by another actor. */
  | 'rules_changed'
  /** Changes may have been missed (events lost, a commit by others during ours): checked by a full sync. */
  | 'changes_unaccounted'
  /** A BPF program is no longer attached where we attached it. */
  | 'program_detached'
  /** A pinned BPF map is gone from, or replaced at, its pin path. */
  | 'map_unpinned'
  /** A listening socket of ours closed or failed. */
  | 'listener_closed'
  /** A Service address of ours is gone from the link we bound it to (kube-ipvs0). */
  | 'address_removed';
