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
// out and reported as untracked. Built of the nftables mode's objects and
// rule bodies, so its Fake and tracer read the table too. Pure.

import type { IPFamily, SyncState } from '../../core/types.js';
import { selectCountedServicePorts } from '../traffic.js';
import { nftFamily } from './names.js';
import * as R from './rule.js';
import { Transaction } from './transaction.js';

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
export function trafficTable(family: IPFamily, plan: TrafficPlan): Transaction {
  const fam = nftFamily(family);
  const addr = family === 'IPv4' ? 'ipv4_addr' : 'ipv6_addr';
  const tx = new Transaction(fam, TRAFFIC_TABLE)
    .add({ kind: 'table' })
    .delete({ kind: 'table' })
    .add({ kind: 'table', comment: 'per-Service traffic counters of kube-proxy-ts' });
  for (const name of ['conns', 'bytes'])
    tx.add({ kind: 'set', name, type: `${addr} . inet_proto . inet_service`, counter: true });
  for (const name of ['nodeport-conns', 'nodeport-bytes'])
    tx.add({ kind: 'set', name, type: 'inet_proto . inet_service', counter: true });
  const svc = R.daddrProtoPort(fam);
  const local = R.fibLocal('daddr');
  for (const hook of ['prerouting', 'output'] as const) {
    tx.add({ kind: 'chain', name: hook, type: 'filter', hook, priority: -110 });
    tx.add(R.rule(hook, [R.ctStateNew, R.lookup(svc, 'conns')]));
    tx.add(R.rule(hook, [R.ctDirectionOriginal, R.lookup(svc, 'bytes')]));
    tx.add(R.rule(hook, [R.ctStateNew, local, R.lookup(R.PROTO_PORT, 'nodeport-conns')]));
    tx.add(R.rule(hook, [R.ctDirectionOriginal, local, R.lookup(R.PROTO_PORT, 'nodeport-bytes')]));
  }
  return elementChanges(tx, new Map(), plan.elements);
}

/** Element changes only, so the counters of the elements that stay keep counting (no operation: none). */
export function trafficElements(
  family: IPFamily,
  before: ReadonlyMap<string, TrafficElement>,
  after: ReadonlyMap<string, TrafficElement>,
): Transaction {
  return elementChanges(new Transaction(nftFamily(family), TRAFFIC_TABLE), before, after);
}

function elementChanges(
  tx: Transaction,
  before: ReadonlyMap<string, TrafficElement>,
  after: ReadonlyMap<string, TrafficElement>,
): Transaction {
  for (const [id, e] of before) if (!after.has(id)) tx.delete({ kind: 'element', set: e.set, key: e.key.split(' . ') });
  for (const [id, e] of after) if (!before.has(id)) tx.add({ kind: 'element', set: e.set, key: e.key.split(' . ') });
  return tx;
}
