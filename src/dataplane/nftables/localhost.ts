// Localhost NodePorts in nftables mode (KEP-6032), the pure half.
//
// nftables mode cannot DNAT a packet sent to 127.0.0.1 / ::1 (the kernel
// routes it nowhere once its destination changes, and IPv6 has no
// route_localnet at all), so a TCP NodePort on loopback is served by a
// userspace relay listening on the loopback address itself. This file decides,
// from a SyncState, which relays must exist and which loopback NodePorts are
// rejected; src/platform/nftables/localhost.ts opens the sockets and writes
// the reject table.
//
// Contracts, as upstream's relay (pkg/proxy/localnodeportproxy):
// * One relay per TCP NodePort, keyed by protocol and port, so a Service that
//   changes its endpoints keeps its socket and open connections.
// * Endpoints follow externalTrafficPolicy: Local uses this node's endpoints
//   only, Cluster the cluster set. No usable endpoint = no relay (the kernel
//   refuses the connection, as upstream).
// * ClientIP affinity keeps its timeout; every client is 127.0.0.1 / ::1, so
//   it pins all connections of the port to one endpoint.
// * loadBalancerSourceRanges do not apply: they filter load-balancer IPs,
//   and a loopback client is the node itself.
// * UDP and SCTP NodePorts have no relay: their loopback packets are rejected
//   and counted, and so is TCP when the relay is not enabled ('reject' mode).
import type { IPFamily, Protocol, SyncState } from '../../core/types.js';

export interface LocalhostRelaySpec {
  /** `tcp/<nodePort>`: stable while the NodePort exists. */
  readonly key: string;
  readonly servicePortKey: string;
  readonly nodePort: number;
  /** Endpoint keys ("ip:port" / "[ip]:port"), non-empty, in SyncState order. */
  readonly endpoints: readonly string[];
  /** ClientIP affinity timeout; 0 = none. */
  readonly stickyMs: number;
}

export interface LocalhostPlan {
  readonly relays: ReadonlyMap<string, LocalhostRelaySpec>;
  /** NodePorts whose loopback packets are rejected, per protocol, sorted. */
  readonly rejected: Readonly<Record<Protocol, readonly number[]>>;
}

export const LOCALHOST_PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];

export function relayKey(nodePort: number): string {
  return `tcp/${nodePort}`;
}

/**
 * The relays and rejections for one sync. `serve` false ('reject' mode):
 * no relay, and TCP NodePorts are rejected too.
 */
export function planLocalhostNodePorts(state: SyncState, serve: boolean): LocalhostPlan {
  const relays = new Map<string, LocalhostRelaySpec>();
  const rejected: Record<Protocol, Set<number>> = { TCP: new Set(), UDP: new Set(), SCTP: new Set() };
  for (const [key, sp] of state.services) {
    if (sp.nodePort <= 0) continue;
    if (sp.protocol !== 'TCP' || !serve) {
      rejected[sp.protocol].add(sp.nodePort);
      continue;
    }
    const cat = state.categorized.get(key);
    const eps = (sp.externalPolicyLocal ? cat?.localEndpoints : cat?.clusterEndpoints) ?? [];
    if (eps.length === 0) continue;
    const spec: LocalhostRelaySpec = {
      key: relayKey(sp.nodePort),
      servicePortKey: key,
      nodePort: sp.nodePort,
      endpoints: eps.map((e) => e.key),
      stickyMs: sp.stickyMaxAgeSeconds * 1000,
    };
    relays.set(spec.key, spec);
  }
  const sorted = (s: Set<number>) => [...s].sort((a, b) => a - b);
  return { relays, rejected: { TCP: sorted(rejected.TCP), UDP: sorted(rejected.UDP), SCTP: sorted(rejected.SCTP) } };
}

/** Our own small table beside upstream's `kube-proxy` table, so upstream's layout stays untouched. */
export const LOCALHOST_TABLE = 'kube-proxy-ts-localhost';

export function loopbackAddress(family: IPFamily): string {
  return family === 'IPv4' ? '127.0.0.1' : '::1';
}

/** The named counter of rejected loopback packets of one protocol. */
export function rejectCounterName(protocol: Protocol): string {
  return `localhost-nodeport-rejected-${protocol.toLowerCase()}`;
}

const setName = (p: Protocol) => `localhost-nodeport-reject-${p.toLowerCase()}`;

/**
 * The `nft -f` script that brings the reject table to `plan.rejected`. It
 * only adds what is missing and refills sets and the chain, so the named
 * counters keep counting across syncs (a recreated counter would start at 0).
 * The chain sits on the input hook: a loopback packet reaches it only from
 * the node itself, and rejecting there answers the client as a closed port
 * would (TCP reset, ICMP port unreachable: ECONNREFUSED), where the output
 * hook would fail the sender's own send() with EPERM.
 */
export function localhostRejectScript(family: IPFamily, rejected: LocalhostPlan['rejected']): string {
  const fam = family === 'IPv4' ? 'ip' : 'ip6';
  const t = `${fam} ${LOCALHOST_TABLE}`;
  const daddr = family === 'IPv4' ? 'ip daddr 127.0.0.0/8' : 'ip6 daddr ::1';
  const lines = [`add table ${t} { comment "kube-proxy-ts: localhost NodePorts (KEP-6032)" ; }`];
  for (const p of LOCALHOST_PROTOCOLS) {
    lines.push(`add counter ${t} ${rejectCounterName(p)}`);
    lines.push(`add set ${t} ${setName(p)} { type inet_service ; }`);
    lines.push(`flush set ${t} ${setName(p)}`);
    const ports = rejected[p];
    if (ports.length > 0) lines.push(`add element ${t} ${setName(p)} { ${ports.join(', ')} }`);
  }
  lines.push(`add chain ${t} input { type filter hook input priority filter ; }`);
  lines.push(`flush chain ${t} input`);
  for (const p of LOCALHOST_PROTOCOLS) {
    const l4 = p.toLowerCase();
    const verdict = p === 'TCP' ? 'reject with tcp reset' : 'reject';
    lines.push(
      `add rule ${t} input ${daddr} ${l4} dport @${setName(p)} counter name ${rejectCounterName(p)} ${verdict}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** Removes the reject table (gate off, cleanup); harmless when it is absent. */
export function localhostCleanupScript(family: IPFamily): string {
  const t = `${family === 'IPv4' ? 'ip' : 'ip6'} ${LOCALHOST_TABLE}`;
  return `add table ${t}\ndelete table ${t}\n`;
}
