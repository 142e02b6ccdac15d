// Per-Service traffic counters (the opt-in --service-traffic-metrics N):
// which Service addresses are counted and the table that counts them. The
// counters live in a table of their own (`kube-proxy-ts-traffic`), so the
// proxy's rules and their syncs stay as they are: four sets with per-element
// counters, looked up by two base chains at priority -110 (before DNAT, so
// the destination is still the Service address):
//   conns / nodeport-conns  the first packet of each new connection;
//   bytes / nodeport-bytes  every packet of the client-to-Service direction.
// Node ports are keyed by protocol and port and counted for local
// destinations only. At most `max` Service ports are counted
// (selectCountedServicePorts, shared with the ebpf mode); the rest are left
// out and reported as untracked. Pure.

import type { IPFamily, SyncState } from '../../core/types.js';
import { selectCountedServicePorts } from '../traffic.js';

export const TRAFFIC_TABLE = 'kube-proxy-ts-traffic';

/** One counted destination: a set element and the Service port it belongs to. */
export interface TrafficElement {
  /** "conns"/"bytes" (address . proto . port) or "nodeport-conns"/"nodeport-bytes" (proto . port). */
  readonly set: string;
  /** Element key as nft writes and prints it, e.g. "10.96.0.10 . tcp . 80". */
  readonly key: string;
  readonly servicePort: string;
  readonly protocol: string;
}

export interface TrafficPlan {
  readonly elements: ReadonlyMap<string, TrafficElement>;
  /** Service ports past the cap, not counted. */
  readonly untracked: number;
}

const elementId = (set: string, key: string) => `${set} ${key}`;

export function planTrafficCounters(state: SyncState, max: number): TrafficPlan {
  const elements = new Map<string, TrafficElement>();
  const { counted, untracked } = selectCountedServicePorts(state, max);
  for (const sp of counted) {
    const proto = sp.protocol.toLowerCase();
    if (proto === 'sctp') continue; // `th dport` reads the SCTP port too, but keep to what the tests prove
    const add = (set: string, key: string) =>
      elements.set(elementId(set, key), { set, key, servicePort: sp.key, protocol: sp.protocol });
    for (const ip of [sp.clusterIP, ...sp.externalIPs, ...sp.loadBalancerVIPs]) {
      if (ip === '' || ip === 'None') continue;
      add('conns', `${ip} . ${proto} . ${sp.port}`);
      add('bytes', `${ip} . ${proto} . ${sp.port}`);
    }
    if (sp.nodePort > 0) {
      add('nodeport-conns', `${proto} . ${sp.nodePort}`);
      add('nodeport-bytes', `${proto} . ${sp.nodePort}`);
    }
  }
  return { elements, untracked };
}

/** The whole table, created from nothing (counters start at zero). */
export function trafficTableScript(family: IPFamily, plan: TrafficPlan): string {
  const fam = family === 'IPv4' ? 'ip' : 'ip6';
  const addr = family === 'IPv4' ? 'ipv4_addr' : 'ipv6_addr';
  const t = `${fam} ${TRAFFIC_TABLE}`;
  const lines = [
    `add table ${t}`,
    `delete table ${t}`,
    `add table ${t} { comment "per-Service traffic counters of kube-proxy-ts" ; }`,
    `add set ${t} conns { type ${addr} . inet_proto . inet_service ; counter ; }`,
    `add set ${t} bytes { type ${addr} . inet_proto . inet_service ; counter ; }`,
    `add set ${t} nodeport-conns { type inet_proto . inet_service ; counter ; }`,
    `add set ${t} nodeport-bytes { type inet_proto . inet_service ; counter ; }`,
  ];
  for (const [chain, hook] of [
    ['prerouting', 'prerouting'],
    ['output', 'output'],
  ] as const) {
    lines.push(`add chain ${t} ${chain} { type filter hook ${hook} priority -110 ; }`);
    const svc = `${fam} daddr . meta l4proto . th dport`;
    lines.push(`add rule ${t} ${chain} ct state new ${svc} @conns`);
    lines.push(`add rule ${t} ${chain} ct direction original ${svc} @bytes`);
    lines.push(`add rule ${t} ${chain} ct state new fib daddr type local meta l4proto . th dport @nodeport-conns`);
    lines.push(
      `add rule ${t} ${chain} ct direction original fib daddr type local meta l4proto . th dport @nodeport-bytes`,
    );
  }
  return lines.join('\n') + '\n' + trafficElementsScript(family, new Map(), plan.elements);
}

/** Element changes only, so the counters of the elements that stay keep counting. */
export function trafficElementsScript(
  family: IPFamily,
  before: ReadonlyMap<string, TrafficElement>,
  after: ReadonlyMap<string, TrafficElement>,
): string {
  const t = `${family === 'IPv4' ? 'ip' : 'ip6'} ${TRAFFIC_TABLE}`;
  const lines: string[] = [];
  for (const [id, e] of before) if (!after.has(id)) lines.push(`delete element ${t} ${e.set} { ${e.key} }`);
  for (const [id, e] of after) if (!before.has(id)) lines.push(`add element ${t} ${e.set} { ${e.key} }`);
  return lines.length > 0 ? lines.join('\n') + '\n' : '';
}
