// The proxy's view of the BPF maps' keys and values: its own types (service
// addresses as text, protocols by name, LPM prefixes in the address's family)
// turned into the structs of src/bpf/abi.h and back. The byte layout itself is
// not here: abi.ts describes each struct once and struct.ts derives the
// offsets, encoders and decoders from that description; abi.test.ts checks
// the descriptions against the BTF of the compiled object.
//
// Conventions (as in abi.h): addresses are 16 bytes, IPv4 as IPv4-mapped
// IPv6 (::ffff:a.b.c.d); ports are big-endian (network order); every other
// integer is little-endian (host order on the platforms we build for),
// except the svc_id inside LPM keys, which is big-endian so that it forms
// the leading bytes the trie matches first.
import type { IPFamily, Protocol } from '../../core/types.js';
import type { LbAlgorithm } from '../../core/lbalgorithm.js';
import * as A from './abi.js';
import { addrText, isMapped, putAddr, putU16, putU32 } from './struct.js';

export { ABI_VERSION, MAPS, MAP_NAMES, maglevValueSize } from './abi.js';
export type { MapKind, MapName, MapSpec } from './abi.js';
export { addrBytes, addrText } from './struct.js';
type MapName = A.MapName;

// ---- enums (abi.h) ----------------------------------------------------

export const KIND = { clusterIP: 1, nodePort: 2, externalIP: 3, loadBalancer: 4 } as const;
export type SvcKind = keyof typeof KIND;
export const SVC_NO_ENDPOINTS = 1 << 0;
export const SVC_LOCAL_POLICY = 1 << 1;
export const SVC_SOURCE_RANGES = 1 << 2;
/** enum lb_algo of abi.h. */
export const ALGO: Readonly<Record<LbAlgorithm, number>> = { random: 0, maglev: 1, 'round-robin': 2, 'source-hash': 3 };
export type { LbAlgorithm };

export const ADDR_LOCAL = 1 << 0;
export const ADDR_NODEPORT = 1 << 1;
export const ADDR_SERVICE = 1 << 2;
export const ADDR_CLUSTER_IP = 1 << 3;

export const IFACE_POD = 1 << 0;

export const CFG_ENABLED = 1 << 0;
export const CFG_DETECT_CIDR = 1 << 1;
export const CFG_DETECT_IFACE = 1 << 2;
export const CFG_MASQ_ALL = 1 << 3;
export const CFG_TRAFFIC = 1 << 4;
export const CFG_DSR = 1 << 5;

export const CT_REPLY = 1 << 0;
export const CT_AT_EGRESS = 1 << 1;
export const CT_MASQ = 1 << 2;
export const CT_SEEN_ACK = 1 << 3;
export const CT_VIA_LO = 1 << 4;
export const CT_SNAT = 1 << 5;
export const CT_UNMASQ = 1 << 6;
export const CT_DSR = 1 << 7;

/** ct_value.closing of a masquerade's reply entry (src/bpf/abi.h enum ct_closing). */
export const CLOSE_FIN_CLIENT = 1 << 0;
export const CLOSE_FIN_ENDPOINT = 1 << 1;
export const CLOSE_RST = 1 << 2;

export const STAT = {
  new: 0,
  ctHit: 1,
  reject: 2,
  drop: 3,
  sock: 4,
  replySkip: 5,
  netfilter: 6,
  pass: 7,
  frag: 8,
  icmp: 9,
  xdpNew: 10,
  xdpHit: 11,
  xdpPass: 12,
  xdpDrop: 13,
  dsrOpt: 14,
  dsrReply: 15,
} as const;
export const STAT_MAX = 16;

export const PROTO_NUMBER: Readonly<Record<Protocol, number>> = { TCP: 6, UDP: 17, SCTP: 132 };
export function protoName(n: number): Protocol | null {
  return n === 6 ? 'TCP' : n === 17 ? 'UDP' : n === 132 ? 'SCTP' : null;
}

export function familyIndex(f: IPFamily): number {
  return f === 'IPv4' ? 0 : 1;
}

// ---- addresses ----------------------------------------------------------

/** The "any" address of a family, the key of NodePort entries. */
export function anyAddr(family: IPFamily): string {
  return family === 'IPv4' ? '0.0.0.0' : '::';
}

export function addrFamily(b: Uint8Array): IPFamily {
  return isMapped(b) ? 'IPv4' : 'IPv6';
}

// ---- svc ----------------------------------------------------------------

export interface SvcKey {
  /** The service address; anyAddr(family) for the NodePort entry. */
  readonly addr: string;
  readonly port: number;
  readonly proto: Protocol;
}
export function encodeSvcKey(k: SvcKey): Uint8Array {
  return A.SVC_KEY.encode({ addr: k.addr, port: k.port, proto: PROTO_NUMBER[k.proto] });
}
export function decodeSvcKey(b: Uint8Array): SvcKey {
  const r = A.SVC_KEY.decode(b);
  return { addr: r.addr, port: r.port, proto: protoName(r.proto) ?? 'TCP' };
}

export interface SvcValue {
  readonly svcId: number;
  readonly clusterSet: number;
  readonly localSet: number;
  readonly affinitySecs: number;
  readonly flags: number;
  readonly kind: SvcKind;
  readonly algo: LbAlgorithm;
}
export function encodeSvcValue(v: SvcValue): Uint8Array {
  return A.SVC_VALUE.encode({ ...v, kind: KIND[v.kind], algo: ALGO[v.algo] });
}
export function decodeSvcValue(b: Uint8Array): SvcValue {
  const r = A.SVC_VALUE.decode(b);
  const kind = (Object.keys(KIND) as SvcKind[]).find((k) => KIND[k] === r.kind) ?? 'clusterIP';
  const algo = (Object.keys(ALGO) as LbAlgorithm[]).find((a) => ALGO[a] === r.algo) ?? 'random';
  return { ...r, kind, algo };
}

// ---- addrs, sets, eps, members -----------------------------------------

/** The key of kpt_addrs is a bare union kpt_addr. */
export function encodeAddrKey(ip: string): Uint8Array {
  const b = new Uint8Array(16);
  putAddr(b, 0, ip);
  return b;
}
export const decodeAddrKey = (b: Uint8Array): string => addrText(b);
export function encodeU32(n: number): Uint8Array {
  const b = new Uint8Array(4);
  putU32(b, 0, n);
  return b;
}
export const decodeU32 = (b: Uint8Array): number =>
  new DataView(b.buffer, b.byteOffset, b.byteLength).getUint32(0, true);
export const encodeU8 = (n: number): Uint8Array => new Uint8Array([n]);

/** A set as the proxy writes it: rr_next 0, so a new endpoint list starts its round-robin cycle at slot 0. */
export const encodeSetValue = (count: number): Uint8Array => A.SET_VALUE.encode({ count, rrNext: 0 });
export const decodeSetValue = (b: Uint8Array): { count: number; rrNext: number } => {
  const d = A.SET_VALUE.decode(b);
  return { count: d.count, rrNext: d.rrNext };
};

export interface EpKey {
  readonly setId: number;
  readonly slot: number;
}
export const encodeEpKey = (k: EpKey): Uint8Array => A.EP_KEY.encode(k);
export const decodeEpKey = (b: Uint8Array): EpKey => A.EP_KEY.decode(b);

export interface EpValue {
  readonly addr: string;
  readonly port: number;
}
export const encodeEpValue = (v: EpValue): Uint8Array => A.EP_VALUE.encode(v);
export const decodeEpValue = (b: Uint8Array): EpValue => A.EP_VALUE.decode(b);

export interface MemberKey {
  readonly setId: number;
  readonly addr: string;
  readonly port: number;
}
export const encodeMemberKey = (k: MemberKey): Uint8Array => A.MEMBER_KEY.encode(k);
export const decodeMemberKey = (b: Uint8Array): MemberKey => A.MEMBER_KEY.decode(b);

/** Maglev value (__u16[maglev_m], sized by value_size): one slot index per table entry. */
export function encodeMaglev(table: readonly number[]): Uint8Array {
  const b = new Uint8Array(2 * table.length);
  for (let i = 0; i < table.length; i++) putU16(b, 2 * i, table[i]!);
  return b;
}
export function decodeMaglev(b: Uint8Array): number[] {
  const out: number[] = [];
  for (let i = 0; i + 1 < b.length; i += 2) out.push(b[i]! | (b[i + 1]! << 8));
  return out;
}

// ---- affinity -----------------------------------------------------------

export interface AffKey {
  readonly client: string;
  readonly svcId: number;
}
export const encodeAffKey = (k: AffKey): Uint8Array => A.AFF_KEY.encode(k);
export const decodeAffKey = (b: Uint8Array): AffKey => A.AFF_KEY.decode(b);
export interface AffValue {
  readonly addr: string;
  readonly port: number;
  readonly lastNs: bigint;
}
export const encodeAffValue = (v: AffValue): Uint8Array => A.AFF_VALUE.encode(v);
export const decodeAffValue = (b: Uint8Array): AffValue => A.AFF_VALUE.decode(b);

// ---- LPM keys -------------------------------------------------------------

/** Prefix length of a CIDR in the 16-byte address space (IPv4 lives under ::ffff:0:0/96). */
export function lpmBits(family: IPFamily, prefix: number): number {
  return family === 'IPv4' ? 96 + prefix : prefix;
}
const familyOfText = (addr: string): IPFamily => (addr.includes(':') ? 'IPv6' : 'IPv4');

export interface LpmKey {
  /** Network address of the CIDR. */
  readonly addr: string;
  /** Prefix length in the address's own family (e.g. 24 for an IPv4 /24). */
  readonly prefix: number;
}
export function encodeLpmKey(k: LpmKey): Uint8Array {
  return A.LPM_KEY.encode({ prefixlen: lpmBits(familyOfText(k.addr), k.prefix), addr: k.addr });
}
export function decodeLpmKey(b: Uint8Array): LpmKey {
  const r = A.LPM_KEY.decode(b);
  return { addr: r.addr, prefix: familyOfText(r.addr) === 'IPv6' ? r.prefixlen : r.prefixlen - 96 };
}

export interface LpmSvcKey extends LpmKey {
  readonly svcId: number;
}
export function encodeLpmSvcKey(k: LpmSvcKey): Uint8Array {
  // The svc_id's 32 bits lead the prefix.
  const prefixlen = 32 + lpmBits(familyOfText(k.addr), k.prefix);
  return A.LPM_SVC_KEY.encode({ prefixlen, svcId: k.svcId, addr: k.addr });
}
export function decodeLpmSvcKey(b: Uint8Array): LpmSvcKey {
  const r = A.LPM_SVC_KEY.decode(b);
  const bits = r.prefixlen - 32;
  return { svcId: r.svcId, addr: r.addr, prefix: familyOfText(r.addr) === 'IPv6' ? bits : bits - 96 };
}

// ---- ifaces ---------------------------------------------------------------

export interface IfaceKey {
  readonly ifindex: number;
  readonly family: IPFamily;
}
export const encodeIfaceKey = (k: IfaceKey): Uint8Array =>
  A.IFACE_KEY.encode({ ifindex: k.ifindex, family: familyIndex(k.family) });
export function decodeIfaceKey(b: Uint8Array): IfaceKey {
  const r = A.IFACE_KEY.decode(b);
  return { ifindex: r.ifindex, family: r.family === 0 ? 'IPv4' : 'IPv6' };
}

// ---- cfg ------------------------------------------------------------------

export interface CfgValue {
  readonly mark: number;
  readonly flags: number;
  readonly netnsCookie: bigint;
}
export const encodeCfgValue = (v: CfgValue): Uint8Array => A.CFG_VALUE.encode(v);
export const decodeCfgValue = (b: Uint8Array): CfgValue => A.CFG_VALUE.decode(b);

// ---- traffic (per-CPU: values read back summed over the CPUs) -------------

export interface TrafficValue {
  readonly conns: bigint;
  readonly bytes: bigint;
}
export const encodeTrafficValue = (v: TrafficValue): Uint8Array => A.TRAFFIC_VALUE.encode(v);
export const decodeTrafficValue = (b: Uint8Array): TrafficValue => A.TRAFFIC_VALUE.decode(b);

// ---- ct -------------------------------------------------------------------

export interface CtKey {
  readonly saddr: string;
  readonly daddr: string;
  readonly sport: number;
  readonly dport: number;
  readonly proto: Protocol;
}
export const encodeCtKey = (k: CtKey): Uint8Array => A.CT_KEY.encode({ ...k, proto: PROTO_NUMBER[k.proto] });
export function decodeCtKey(b: Uint8Array): CtKey {
  const r = A.CT_KEY.decode(b);
  return { ...r, proto: protoName(r.proto) ?? 'TCP' };
}
export interface CtValue {
  readonly addr: string;
  /** With CT_SNAT: the new source (original direction) or the client's own address (reply). */
  readonly nat: string | null;
  readonly port: number;
  readonly flags: number;
  /** A masquerade's reply entry (CT_UNMASQ): CLOSE_* bits, what its TCP connection sent; absent: 0. */
  readonly closing?: number;
  readonly svcId: number;
  readonly createdNs: bigint;
}
/** Without CT_SNAT the nat field is zeros (::). */
export const encodeCtValue = (v: CtValue): Uint8Array =>
  A.CT_VALUE.encode({ ...v, nat: v.nat ?? '::', closing: v.closing ?? 0 });
export function decodeCtValue(b: Uint8Array): CtValue {
  const r = A.CT_VALUE.decode(b);
  return { ...r, nat: r.flags & CT_SNAT ? r.nat : null };
}

// ---- names ----------------------------------------------------------------

/** "namespace/name:port", cut to what fits before the NUL. */
export const encodeName = (name: string): Uint8Array => A.NAME_VALUE.encode({ name });
export const decodeName = (b: Uint8Array): string => A.NAME_VALUE.decode(b).name;

// ---- generic ----------------------------------------------------------------

/**
 * A compact string form of key bytes (one char per byte) for in-memory maps
 * keyed by entries; keyBytes turns it back. Not for display (see hex).
 */
export function keyOf(b: Uint8Array): string {
  // One call builds a flat string (appending char by char would make a rope of
  // one node per byte, which the map then has to flatten and the GC to collect).
  return String.fromCharCode.apply(null, b as unknown as number[]);
}
/**
 * The reconciler keeps map values as it keeps keys, one character per byte:
 * a short string costs a fraction of a Uint8Array with its ArrayBuffer
 * (about 40 against 175 bytes for a value of 8-24 bytes; 270,000 entries at
 * 30k Services), and equal values compare with ===.
 */
export const valueText = keyOf;
export function keyBytes(k: string): Uint8Array {
  const out = new Uint8Array(k.length);
  for (let i = 0; i < k.length; i++) out[i] = k.charCodeAt(i);
  return out;
}

export function hex(b: Uint8Array): string {
  let s = '';
  for (const x of b) s += x.toString(16).padStart(2, '0');
  return s;
}
export function unhex(s: string): Uint8Array {
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

// ---- ids and which family an entry belongs to ------------------------------

/**
 * Service-port ids: IPv4 ports get ids in [1, 2^30), IPv6 ports in
 * [2^30, 2^31), so the two families' proxies never collide in the shared
 * maps. A port's endpoint sets are 2*id (cluster policy) and 2*id+1 (local).
 */
export const ID_RANGE: Readonly<Record<IPFamily, readonly [number, number]>> = {
  IPv4: [1, 2 ** 30],
  IPv6: [2 ** 30, 2 ** 31],
};
export const clusterSetOf = (svcId: number): number => svcId * 2;
export const localSetOf = (svcId: number): number => svcId * 2 + 1;
const idFamily = (id: number): IPFamily => (id >= ID_RANGE.IPv6[0] ? 'IPv6' : 'IPv4');

/** The family whose proxy owns this entry (every rendered map's keys say it). */
export function familyOfEntry(map: MapName, key: Uint8Array): IPFamily {
  switch (map) {
    case 'svc':
    case 'addrs':
    case 'affinity':
    case 'ct':
      return addrFamily(key.subarray(0, 16));
    case 'podCidrs':
    case 'svcCidrs':
      return addrFamily(key.subarray(4, 20));
    case 'lbSrc':
      return idFamily(decodeLpmSvcKey(key).svcId);
    case 'sets':
    case 'maglev':
      return idFamily(Math.floor(decodeU32(key) / 2));
    case 'names':
    case 'traffic':
      return idFamily(decodeU32(key));
    case 'eps':
    case 'members':
      return idFamily(Math.floor(decodeU32(key.subarray(0, 4)) / 2));
    case 'ifaces':
      return decodeIfaceKey(key).family;
    case 'cfg':
      return decodeU32(key) === 0 ? 'IPv4' : 'IPv6';
    case 'sock':
      return addrFamily(key.subarray(8, 24));
    case 'stats':
    case 'seen':
      return 'IPv4';
    case 'frag':
      return addrFamily(key.subarray(0, 16));
    case 'hot':
      return decodeU32(key) >= A.HOT_STRIDE ? 'IPv6' : 'IPv4';
  }
}
