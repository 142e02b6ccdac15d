// Stale UDP conntrack entries (upstream conntrack/cleanup.go
// CleanStaleEntries), as a pure filter over flow records. The platform side
// lists the family's conntrack table into ConntrackFlow records, calls
// staleUDPFlows, and deletes what it returns.
//
// Rule: for each UDP service port, an entry is stale when its original
// destination is clusterIP|LB VIP|externalIP:port, or its original
// destination port is the NodePort, and its reply source IP:port is not one
// of the serving endpoints. A service port without serving endpoints has an
// empty set, so every entry to it is stale (kubernetes #139629): the REJECT
// for such a Service matches only new flows, while an existing entry keeps
// DNATing a one-way sender's datagrams to the removed endpoint for as long as
// it keeps sending. UDP service ports deleted since the last sync are treated
// the same (kubernetes #141371); a current Service that now owns the same
// frontend wins over a deleted one.

import { joinHostPort, normalizeIP } from './ip.js';
import type { Protocol, ServicePort, SyncState } from './types.js';

/**
 * One conntrack entry, as `conntrack -L` describes it:
 * proto = the layer-4 protocol; origDst/origDstPort = destination of the
 * original direction (what the client sent to); replySrc/replySrcPort =
 * source of the reply direction (after DNAT: the endpoint that answers).
 * IPs may be in any textual form; they are normalised before comparison.
 */
export interface ConntrackFlow {
  readonly proto: Protocol | string;
  readonly origDst: string;
  readonly origDstPort: number;
  readonly replySrc: string;
  readonly replySrcPort: number;
}

/** Serving endpoint keys ("ip:port") per frontend, for the UDP ports of `state`. */
export interface StaleFlowIndex {
  /** "ip:port" (JoinHostPort of a service IP and port) -> serving endpoint keys. */
  readonly byServiceIP: ReadonlyMap<string, ReadonlySet<string>>;
  /** NodePort -> serving endpoint keys. */
  readonly byNodePort: ReadonlyMap<number, ReadonlySet<string>>;
}

const NONE: ReadonlySet<string> = new Set();

/**
 * The frontends to reconcile: every UDP service port of `state` mapped to its
 * serving endpoints (possibly none), plus the frontends of `deleted` UDP
 * service ports (no endpoints at all) unless a current one reuses them.
 */
export function staleFlowIndex(state: SyncState, deleted: Iterable<ServicePort> = []): StaleFlowIndex {
  const byServiceIP = new Map<string, ReadonlySet<string>>();
  const byNodePort = new Map<number, ReadonlySet<string>>();
  const add = (sp: ServicePort, serving: ReadonlySet<string>) => {
    for (const ip of [sp.clusterIP, ...sp.loadBalancerVIPs, ...sp.externalIPs])
      byServiceIP.set(joinHostPort(ip, sp.port), serving);
    if (sp.nodePort !== 0) byNodePort.set(sp.nodePort, serving);
  };
  for (const sp of deleted) if (sp.protocol === 'UDP') add(sp, NONE);
  for (const [k, sp] of state.services) {
    if (sp.protocol !== 'UDP') continue;
    add(sp, new Set((state.endpoints.get(k) ?? []).filter((e) => e.serving).map((e) => e.key)));
  }
  return { byServiceIP, byNodePort };
}

/** Whether one flow is stale under `index` (see the file comment). */
export function isStaleUDPFlow(index: StaleFlowIndex, flow: ConntrackFlow): boolean {
  if (flow.proto !== 'UDP' && flow.proto !== 'udp') return false;
  const dst = normalizeIP(flow.origDst);
  const replySrc = normalizeIP(flow.replySrc);
  if (dst === null || replySrc === null) return false;
  const reply = joinHostPort(replySrc, flow.replySrcPort);
  const bySvc = index.byServiceIP.get(joinHostPort(dst, flow.origDstPort));
  if (bySvc) return !bySvc.has(reply);
  const byNP = index.byNodePort.get(flow.origDstPort);
  return byNP !== undefined && !byNP.has(reply);
}

/** The flows to delete, in input order. */
export function staleUDPFlows(
  state: SyncState,
  flows: readonly ConntrackFlow[],
  deleted: Iterable<ServicePort> = [],
): ConntrackFlow[] {
  const index = staleFlowIndex(state, deleted);
  if (index.byServiceIP.size === 0 && index.byNodePort.size === 0) return [];
  return flows.filter((f) => isStaleUDPFlow(index, f));
}
