// IPVS objects as plain readonly data: a virtual server (address, port,
// protocol, scheduler, persistence) and its real servers (endpoints in
// masquerade forwarding). The same shapes are rendered by the IPVS mode,
// held by its Fake and written to the kernel over generic netlink.
import type { IPFamily, Protocol } from '../../core/types.js';

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

/** Same configuration (what an edit would change): scheduler, flags, timeout. */
export function sameVirtualServer(a: VirtualServer, b: VirtualServer): boolean {
  return a.scheduler === b.scheduler && a.flags === b.flags && a.timeout === b.timeout;
}

/** One change to the IPVS table, as the kernel takes it (one generic-netlink request each). */
export type IpvsOp =
  | { readonly op: 'add-service' | 'edit-service' | 'del-service'; readonly vs: VirtualServer }
  | { readonly op: 'add-dest' | 'edit-dest' | 'del-dest'; readonly vs: VirtualServer; readonly rs: RealServer };
