// Why a service port uses or leaves out each of its endpoints on this node:
// the explanation that goes with categorizeEndpoints (topology.ts), shown by
// /statusz, `kube-proxy-ts status` and `explain --service`.
//
// Contract: this module explains, it never decides. It reads the categories
// categorizeEndpoints produced (the same ones every datapath renders), so an
// endpoint is "used" for a kind of traffic exactly when it is in the list that
// traffic takes; every other endpoint gets the first reason below that applies:
//
//   not-ready        not ready (and not terminating): never used
//   terminating      terminating and no longer serving (never used)
//   local-policy     the traffic policy is Local and the endpoint runs on
//                    another node
//   other-zone-hint  topology hints are in force and the endpoint is hinted
//                    for other zones only
//   other-node-hint  node hints are in force (PreferSameNode) and the
//                    endpoint is hinted for other nodes only
//   terminating      serving but terminating while ready endpoints exist
//                    (those stand in only when no ready one is left)
//   unexplained      none of the above: a bug in this module (tests check it
//                    never happens), reported rather than hidden
//
// Per kind of traffic the verdict follows upstream's filter targets: no
// endpoint serving anywhere -> REJECT ("no serving endpoints"); a Local policy
// with no local endpoint -> DROP; otherwise forward to the listed endpoints.

import { LABEL_TOPOLOGY_ZONE } from './api.js';
import { joinHostPort } from './ip.js';
import { topologyModeFromHints, type TopologyMode } from './topology.js';
import type { CategorizedEndpoints, Endpoint, ServicePort } from './types.js';

/** internal: to the ClusterIP; external: to NodePorts, external IPs and load-balancer IPs. */
export type TrafficKind = 'internal' | 'external';

export type SkipReason =
  'not-ready' | 'terminating' | 'local-policy' | 'other-zone-hint' | 'other-node-hint' | 'unexplained';

export interface EndpointSkip {
  readonly traffic: TrafficKind;
  readonly reason: SkipReason;
  /** One sentence for people, naming the facts behind the reason. */
  readonly detail: string;
}

export interface EndpointUse {
  readonly endpoint: Endpoint;
  readonly usedFor: readonly TrafficKind[];
  /** One entry per kind of traffic the port has and this endpoint does not serve. */
  readonly skipped: readonly EndpointSkip[];
}

/** forward: to `endpoints`; reject: no serving endpoint anywhere; drop: Local policy without a local endpoint. */
export type TrafficVerdict = 'forward' | 'reject' | 'drop';

export interface TrafficUse {
  readonly traffic: TrafficKind;
  readonly policy: 'Cluster' | 'Local';
  readonly verdict: TrafficVerdict;
  readonly endpoints: readonly Endpoint[];
  readonly detail: string;
}

export interface ServicePortUse {
  /** internal always; external only for ports reachable from outside (NodePort, external IP, LB IP). */
  readonly traffic: readonly TrafficUse[];
  readonly endpoints: readonly EndpointUse[];
  /** The topology mode cluster-policy traffic uses ('' = no hints in force). */
  readonly topology: TopologyMode;
}

export type EndpointUsePort = Pick<
  ServicePort,
  'internalPolicyLocal' | 'externalPolicyLocal' | 'externallyAccessible' | 'usesClusterEndpoints'
>;

const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

function hintList(hints: ReadonlySet<string> | null): string {
  return hints && hints.size > 0 ? [...hints].sort().join(', ') : 'none';
}

/** The reason `ep` is not in `used` for traffic under `policy` (see the table at the top). */
function skipReason(
  ep: Endpoint,
  policy: 'Cluster' | 'Local',
  readyExists: boolean,
  topology: TopologyMode,
  nodeName: string,
  zone: string,
): { reason: SkipReason; detail: string } {
  // Never usable (only serving-and-terminating endpoints stand in for ready ones): the policy does not matter.
  if (!ep.ready && !(ep.serving && ep.terminating)) {
    return ep.terminating
      ? { reason: 'terminating', detail: 'terminating and no longer serving' }
      : { reason: 'not-ready', detail: ep.serving ? 'serving but not ready' : 'not ready' };
  }
  if (policy === 'Local' && !ep.isLocal) {
    const where = ep.nodeName === '' ? 'another node (no nodeName)' : `node ${ep.nodeName}`;
    return {
      reason: 'local-policy',
      detail: `runs on ${where}; the Local traffic policy uses only this node's endpoints`,
    };
  }
  if (policy === 'Cluster' && topology === 'PreferSameZone' && !(ep.zoneHints?.has(zone) ?? false)) {
    return {
      reason: 'other-zone-hint',
      detail: `hinted for zone ${hintList(ep.zoneHints)}; this node is in zone ${zone}`,
    };
  }
  if (policy === 'Cluster' && topology === 'PreferSameNode' && !(ep.nodeHints?.has(nodeName) ?? false)) {
    return { reason: 'other-node-hint', detail: `hinted for node ${hintList(ep.nodeHints)}, not ${nodeName}` };
  }
  if (!ep.ready && ep.terminating && readyExists) {
    return { reason: 'terminating', detail: 'terminating; used only when no ready endpoint is left' };
  }
  return { reason: 'unexplained', detail: 'left out for a reason this view does not know' };
}

function verdictOf(
  traffic: TrafficKind,
  policy: 'Cluster' | 'Local',
  endpoints: readonly Endpoint[],
  hasAnyEndpoints: boolean,
): TrafficUse {
  if (!hasAnyEndpoints) {
    return {
      traffic,
      policy,
      verdict: 'reject',
      endpoints: [],
      detail: 'no serving endpoints: connections are rejected',
    };
  }
  if (endpoints.length === 0) {
    const who = traffic === 'internal' ? 'traffic' : 'traffic from outside the cluster';
    return { traffic, policy, verdict: 'drop', endpoints: [], detail: `no local endpoints: ${who} is dropped` };
  }
  const where = policy === 'Local' ? 'local endpoint' : 'endpoint';
  return { traffic, policy, verdict: 'forward', endpoints, detail: `forwarded to ${plural(endpoints.length, where)}` };
}

/**
 * Explain `cat` (categorizeEndpoints(endpoints, port, nodeName, nodeLabels))
 * endpoint by endpoint. `endpoints` is the port's full list, in its order.
 */
export function explainEndpointUse(
  endpoints: readonly Endpoint[],
  port: EndpointUsePort,
  cat: CategorizedEndpoints,
  nodeName: string,
  nodeLabels: Readonly<Record<string, string>>,
): ServicePortUse {
  const zone = nodeLabels[LABEL_TOPOLOGY_ZONE] ?? '';
  const topology = port.usesClusterEndpoints ? topologyModeFromHints(endpoints, nodeName, zone) : '';
  const listFor = (policy: 'Cluster' | 'Local') =>
    (policy === 'Local' ? cat.localEndpoints : cat.clusterEndpoints) ?? [];
  const kinds: Array<{ traffic: TrafficKind; policy: 'Cluster' | 'Local' }> = [
    { traffic: 'internal', policy: port.internalPolicyLocal ? 'Local' : 'Cluster' },
  ];
  if (port.externallyAccessible)
    kinds.push({ traffic: 'external', policy: port.externalPolicyLocal ? 'Local' : 'Cluster' });

  const traffic = kinds.map((k) => verdictOf(k.traffic, k.policy, listFor(k.policy), cat.hasAnyEndpoints));
  const used = kinds.map((k) => new Set(listFor(k.policy).map((e) => e.key)));
  const readyExists = (policy: 'Cluster' | 'Local') =>
    endpoints.some((e) => e.ready && (policy === 'Cluster' || e.isLocal));

  const uses = endpoints.map((ep): EndpointUse => {
    const usedFor: TrafficKind[] = [];
    const skipped: EndpointSkip[] = [];
    kinds.forEach((k, i) => {
      if (used[i]!.has(ep.key)) usedFor.push(k.traffic);
      else
        skipped.push({
          traffic: k.traffic,
          ...skipReason(ep, k.policy, readyExists(k.policy), topology, nodeName, zone),
        });
    });
    return { endpoint: ep, usedFor, skipped };
  });
  return { traffic, endpoints: uses, topology };
}

/** The human words for a reason code (tables, pages). */
export const SKIP_REASON_TEXT: Readonly<Record<SkipReason, string>> = {
  'not-ready': 'not ready',
  terminating: 'terminating',
  'local-policy': 'Local policy',
  'other-zone-hint': "another zone's hint",
  'other-node-hint': 'another node',
  unexplained: 'unexplained',
};

/** One address a service port answers on, and which kind of traffic it is. */
export interface ServiceAddress {
  readonly kind: 'ClusterIP' | 'NodePort' | 'ExternalIP' | 'LoadBalancer';
  /** "ip:port"; a NodePort is "*:port" (every NodePort address of the node). */
  readonly address: string;
  readonly traffic: TrafficKind;
}

/** Every address of the port, ClusterIP first, in the order the Service lists them. */
export function serviceAddresses(
  sp: Pick<ServicePort, 'clusterIP' | 'port' | 'nodePort' | 'externalIPs' | 'loadBalancerVIPs'>,
): ServiceAddress[] {
  const out: ServiceAddress[] = [
    { kind: 'ClusterIP', address: joinHostPort(sp.clusterIP, sp.port), traffic: 'internal' },
  ];
  if (sp.nodePort !== 0) out.push({ kind: 'NodePort', address: `*:${sp.nodePort}`, traffic: 'external' });
  for (const ip of sp.externalIPs)
    out.push({ kind: 'ExternalIP', address: joinHostPort(ip, sp.port), traffic: 'external' });
  for (const ip of sp.loadBalancerVIPs)
    out.push({ kind: 'LoadBalancer', address: joinHostPort(ip, sp.port), traffic: 'external' });
  return out;
}
