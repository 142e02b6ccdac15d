// IPVS objects as plain readonly data: a virtual server (address, port,
// protocol, scheduler, persistence) and its real servers (endpoints in
// masquerade forwarding). The same shapes are rendered by the IPVS mode,
// held by its Fake and written to the kernel over generic netlink. Below
// them, the keyed objects the mode hands the one reconciler (driver.ts).
import type { Keyed } from '../../core/objects.js';
import type { IPFamily, Protocol } from '../../core/types.js';
import { IPSETS, type IpsetName, type IpsetType } from './ipsets.js';
import type { NoNodeAccess } from './rules.js';

import { IPVS_SCHEDULERS } from '../../core/config/validate.js';

/** Schedulers upstream accepts for --ipvs-scheduler (kernel modules ip_vs_<name>). */
export { IPVS_SCHEDULERS };
export type IpvsScheduler = (typeof IPVS_SCHEDULERS)[number];

/** IP_VS_SVC_F_* flags we set or read. */
export const SVC_FLAG = {
  PERSISTENT: 0x1,
  HASHED: 0x2, // set by the kernel on every listed service; never ours to set
  ONEPACKET: 0x4,
  SCHED1: 0x8, // sh/mh: fall back to another real server when the chosen one has weight 0
  SCHED2: 0x10, // sh/mh: hash the source port too
  SCHED3: 0x20,
} as const;

export interface VirtualServer {
  readonly family: IPFamily;
  readonly protocol: Protocol;
  /** Normalised IP text. */
  readonly address: string;
  readonly port: number;
  readonly scheduler: string;
  /** IP_VS_SVC_F_* without HASHED. */
  readonly flags: number;
  /** Persistence timeout in seconds (ClientIP affinity); 0 without PERSISTENT. */
  readonly timeout: number;
}

/** Forwarding method: kube-proxy uses masquerade (NAT) only. */
export const FWD_MASQ = 0;

export interface RealServer {
  /** Normalised IP text. */
  readonly address: string;
  readonly port: number;
  readonly weight: number;
}

/** What the kernel reports about a real server besides its configuration. */
export interface RealServerStatus extends RealServer {
  readonly activeConns: number;
  readonly inactiveConns: number;
  readonly persistConns: number;
}

/** "TCP/10.96.0.10:80" (IPv6: "TCP/[fd00::1]:80"): the identity of a virtual server. */
export function virtualServerKey(vs: Pick<VirtualServer, 'protocol' | 'address' | 'port'>): string {
  return `${vs.protocol}/${vs.address.includes(':') ? `[${vs.address}]` : vs.address}:${vs.port}`;
}

/** "10.244.1.5:8080" (IPv6 bracketed): the identity of a real server within its virtual server. */
export function realServerKey(rs: Pick<RealServer, 'address' | 'port'>): string {
  return `${rs.address.includes(':') ? `[${rs.address}]` : rs.address}:${rs.port}`;
}

/** The key of a real server within the whole table: "TCP/10.96.0.10:80/10.244.1.5:8080". */
export function destKey(
  vs: Pick<VirtualServer, 'protocol' | 'address' | 'port'>,
  rs: Pick<RealServer, 'address' | 'port'>,
) {
  return `${virtualServerKey(vs)}/${realServerKey(rs)}`;
}

/** Same configuration (what an edit would change): scheduler, flags, timeout. */
export function sameVirtualServer(a: VirtualServer, b: VirtualServer): boolean {
  return a.scheduler === b.scheduler && a.flags === b.flags && a.timeout === b.timeout;
}

/** One change to the IPVS table, as the kernel takes it (one generic-netlink request each). */
export type IpvsOp =
  | { readonly op: 'add-service' | 'edit-service' | 'del-service'; readonly vs: VirtualServer }
  | { readonly op: 'add-dest' | 'edit-dest' | 'del-dest'; readonly vs: VirtualServer; readonly rs: RealServer };

/**
 * What the reconciler keeps for IPVS mode, by kind, in the order the puts
 * are listed (see driver.ts for the order the platform applies them in):
 *   set       an ipset (key: its kernel name);
 *   KUBE-...  a member of that set, one kind per set (key: the member in
 *             ipset's text form), so whether a set has members, which decides
 *             its set-driven iptables rules (rules.ts), is the reconciler's
 *             count of the kind;
 *   bind      a Service address on kube-ipvs0 (key: the address);
 *   vs        a virtual server (key: virtualServerKey);
 *   rs        a real server (key: destKey);
 *   rule      a rule for an LB address the node may not reach (key:
 *             "<ip>,<proto>:<port>"). Rules are written as one restore text.
 */
export type IpvsKind = 'set' | IpsetName | 'bind' | 'vs' | 'rs' | 'rule';

export const IPVS_KINDS: readonly IpvsKind[] = ['set', ...IPSETS.map((s) => s.name), 'bind', 'vs', 'rs', 'rule'];

const SET_KINDS: ReadonlySet<string> = new Set(IPSETS.map((s) => s.name));

/** Whether objects of this kind are members of an ipset (the kind is the set's name). */
export function isSetKind(kind: IpvsKind): kind is IpsetName {
  return SET_KINDS.has(kind);
}

export type IpvsValue =
  | { readonly t: 'set'; readonly type: IpsetType }
  | { readonly t: 'member' }
  | { readonly t: 'vs'; readonly vs: VirtualServer }
  | { readonly t: 'rs'; readonly vs: VirtualServer; readonly rs: RealServer }
  | { readonly t: 'drop'; readonly rule: NoNodeAccess };

export type IpvsObject = Keyed<IpvsKind, IpvsValue>;

/** The value of what is only present or absent (set members, addresses): one shared object. */
export const PRESENT: IpvsValue = Object.freeze({ t: 'member' });

/** True when the kernel need not be written to turn `a` into `b`. */
export function sameIpvsValue(a: IpvsValue, b: IpvsValue): boolean {
  if (a === b) return true;
  switch (a.t) {
    case 'member':
      return b.t === 'member';
    case 'set':
      return b.t === 'set' && a.type === b.type;
    case 'vs':
      return b.t === 'vs' && sameVirtualServer(a.vs, b.vs);
    case 'rs':
      return b.t === 'rs' && a.rs.weight === b.rs.weight;
    case 'drop':
      return b.t === 'drop';
  }
}
