// The byte layout of every map key and value of the BPF programs: the
// TypeScript side of src/bpf/abi.h. Sizes and field offsets are checked
// against the BTF of the compiled object (test/e2e/ebpf-programs.test.ts).
//
// Conventions (as in abi.h): addresses are 16 bytes, IPv4 as IPv4-mapped
// IPv6 (::ffff:a.b.c.d); ports are big-endian (network order); every other
// integer is little-endian (host order on the platforms we build for),
// except the svc_id inside LPM keys, which is big-endian so that it forms
// the leading bytes the trie matches first.
import { formatIP, parseIP } from '../../core/ip.js';
import type { IPFamily, Protocol } from '../../core/types.js';
import { ProxyError } from '../../core/errors.js';

export const ABI_VERSION = 1;

export type MapKind = 'hash' | 'lru_hash' | 'lpm_trie' | 'array' | 'percpu_array' | 'percpu_hash';

export interface MapSpec {
  readonly name: string;
  readonly kind: MapKind;
  readonly keySize: number;
  readonly valueSize: number;
  /** Entries written by the proxy (rendered), as opposed to runtime state the programs write. */
  readonly rendered: boolean;
}

/** Every map, by its short name (the C name without the kpt_ prefix). */
export const MAPS = {
  svc: { name: 'kpt_svc', kind: 'hash', keySize: 20, valueSize: 20, rendered: true },
  addrs: { name: 'kpt_addrs', kind: 'hash', keySize: 16, valueSize: 4, rendered: true },
  sets: { name: 'kpt_sets', kind: 'hash', keySize: 4, valueSize: 8, rendered: true },
  eps: { name: 'kpt_eps', kind: 'hash', keySize: 8, valueSize: 20, rendered: true },
  members: { name: 'kpt_members', kind: 'hash', keySize: 24, valueSize: 4, rendered: true },
  maglev: { name: 'kpt_maglev', kind: 'hash', keySize: 4, valueSize: 2 * 16381, rendered: true },
  affinity: { name: 'kpt_affinity', kind: 'lru_hash', keySize: 20, valueSize: 32, rendered: false },
  lbSrc: { name: 'kpt_lb_src', kind: 'lpm_trie', keySize: 24, valueSize: 1, rendered: true },
  podCidrs: { name: 'kpt_pod_cidrs', kind: 'lpm_trie', keySize: 20, valueSize: 1, rendered: true },
  svcCidrs: { name: 'kpt_svc_cidrs', kind: 'lpm_trie', keySize: 20, valueSize: 1, rendered: true },
  ifaces: { name: 'kpt_ifaces', kind: 'hash', keySize: 8, valueSize: 4, rendered: true },
  cfg: { name: 'kpt_cfg', kind: 'array', keySize: 4, valueSize: 16, rendered: true },
  ct: { name: 'kpt_ct', kind: 'lru_hash', keySize: 40, valueSize: 48, rendered: false },
  sock: { name: 'kpt_sock', kind: 'lru_hash', keySize: 32, valueSize: 20, rendered: false },
  names: { name: 'kpt_names', kind: 'hash', keySize: 4, valueSize: 160, rendered: true },
  stats: { name: 'kpt_stats', kind: 'percpu_array', keySize: 4, valueSize: 8, rendered: false },
  traffic: { name: 'kpt_traffic', kind: 'percpu_hash', keySize: 4, valueSize: 16, rendered: false },
} as const satisfies Record<string, MapSpec>;

export type MapName = keyof typeof MAPS;
export const MAP_NAMES = Object.keys(MAPS) as MapName[];

/** The Maglev value is maglevM 16-bit slots; the loader sizes the map to match. */
export function maglevValueSize(m: number): number {
  return 2 * m;
}

// ---- enums (abi.h) ----------------------------------------------------

export const KIND = { clusterIP: 1, nodePort: 2, externalIP: 3, loadBalancer: 4 } as const;
export type SvcKind = keyof typeof KIND;
export const SVC_NO_ENDPOINTS = 1 << 0;
export const SVC_LOCAL_POLICY = 1 << 1;
export const SVC_SOURCE_RANGES = 1 << 2;
export const ALGO = { random: 0, maglev: 1 } as const;
export type LbAlgorithm = keyof typeof ALGO;

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

export const CT_REPLY = 1 << 0;
export const CT_AT_EGRESS = 1 << 1;
export const CT_MASQ = 1 << 2;
export const CT_SEEN_ACK = 1 << 3;
export const CT_VIA_LO = 1 << 4;
export const CT_SNAT = 1 << 5;

export const STAT = { new: 0, ctHit: 1, reject: 2, drop: 3, sock: 4, replySkip: 5 } as const;
export const STAT_MAX = 8;

export const PROTO_NUMBER: Readonly<Record<Protocol, number>> = { TCP: 6, UDP: 17, SCTP: 132 };
export function protoName(n: number): Protocol | null {
  return n === 6 ? 'TCP' : n === 17 ? 'UDP' : n === 132 ? 'SCTP' : null;
}

export function familyIndex(f: IPFamily): number {
  return f === 'IPv4' ? 0 : 1;
}

// ---- addresses ----------------------------------------------------------

/** The 16-byte form of an IP (IPv4 mapped); throws on a non-address. */
export function addrBytes(ip: string): Uint8Array {
  const p = parseIP(ip);
  if (!p) throw new ProxyError('KPT_INPUT_INVALID', `not an IP address: ${JSON.stringify(ip)}`);
  if (p.family === 'IPv6') return p.bytes;
  const out = new Uint8Array(16);
  out[10] = 0xff;
  out[11] = 0xff;
  out.set(p.bytes, 12);
  return out;
}

/** The "any" address of a family, the key of NodePort entries. */
export function anyAddr(family: IPFamily): string {
  return family === 'IPv4' ? '0.0.0.0' : '::';
}

function isMapped(b: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

/** Text of a 16-byte address (IPv4-mapped shown as IPv4). */
export function addrText(b: Uint8Array): string {
  return isMapped(b) ? formatIP(b.subarray(12, 16)) : formatIP(b.subarray(0, 16));
}

export function addrFamily(b: Uint8Array): IPFamily {
  return isMapped(b) ? 'IPv4' : 'IPv6';
}

// ---- a tiny cursor over a fixed-size buffer -----------------------------

/**
 * Writes little-endian and network-order fields into a fresh buffer. Hot in
 * full renders (tens of thousands of entries): no DataView, and IPv4
 * addresses are written without going through the generic parser.
 */
class W {
  readonly b: Uint8Array;
  constructor(size: number) {
    this.b = new Uint8Array(size);
  }
  addr(off: number, ip: string): this {
    if (!putIPv4Mapped(this.b, off, ip)) this.b.set(addrBytes(ip), off);
    return this;
  }
  u8(off: number, n: number): this {
    this.b[off] = n;
    return this;
  }
  u16(off: number, n: number): this {
    this.b[off] = n & 0xff;
    this.b[off + 1] = (n >>> 8) & 0xff;
    return this;
  }
  be16(off: number, n: number): this {
    this.b[off] = (n >>> 8) & 0xff;
    this.b[off + 1] = n & 0xff;
    return this;
  }
  u32(off: number, n: number): this {
    this.b[off] = n & 0xff;
    this.b[off + 1] = (n >>> 8) & 0xff;
    this.b[off + 2] = (n >>> 16) & 0xff;
    this.b[off + 3] = (n >>> 24) & 0xff;
    return this;
  }
  be32(off: number, n: number): this {
    this.b[off] = (n >>> 24) & 0xff;
    this.b[off + 1] = (n >>> 16) & 0xff;
    this.b[off + 2] = (n >>> 8) & 0xff;
    this.b[off + 3] = n & 0xff;
    return this;
  }
  u64(off: number, n: bigint): this {
    new DataView(this.b.buffer).setBigUint64(off, n, true);
    return this;
  }
}

/**
 * A canonical dotted quad ("10.1.2.3", as every address in a SyncState is)
 * written as ::ffff:a.b.c.d at off; false for anything else (the caller then
 * uses the generic parser, which also reports what is not an address).
 */
function putIPv4Mapped(b: Uint8Array, off: number, ip: string): boolean {
  let part = 0;
  let digits = 0;
  let i = 12;
  for (let c = 0; c < ip.length; c++) {
    const ch = ip.charCodeAt(c);
    if (ch >= 48 && ch <= 57) {
      part = part * 10 + (ch - 48);
      if (++digits > 3 || part > 255) return false;
    } else if (ch === 46 && digits > 0 && i < 15) {
      b[off + i++] = part;
      part = 0;
      digits = 0;
    } else return false;
  }
  if (digits === 0 || i !== 15) return false;
  b[off + 15] = part;
  b[off + 10] = 0xff;
  b[off + 11] = 0xff;
  return true;
}

class R {
  private readonly v: DataView;
  constructor(readonly b: Uint8Array) {
    this.v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }
  addr(off: number): string {
    return addrText(this.b.subarray(off, off + 16));
  }
  u8(off: number): number {
    return this.v.getUint8(off);
  }
  u16(off: number): number {
    return this.v.getUint16(off, true);
  }
  be16(off: number): number {
    return this.v.getUint16(off, false);
  }
  u32(off: number): number {
    return this.v.getUint32(off, true);
  }
  be32(off: number): number {
    return this.v.getUint32(off, false);
  }
  u64(off: number): bigint {
    return this.v.getBigUint64(off, true);
  }
}

// ---- svc ----------------------------------------------------------------

export interface SvcKey {
  /** The service address; anyAddr(family) for the NodePort entry. */
  readonly addr: string;
  readonly port: number;
  readonly proto: Protocol;
}
export function encodeSvcKey(k: SvcKey): Uint8Array {
  return new W(20).addr(0, k.addr).be16(16, k.port).u8(18, PROTO_NUMBER[k.proto]).b;
}
export function decodeSvcKey(b: Uint8Array): SvcKey {
  const r = new R(b);
  return { addr: r.addr(0), port: r.be16(16), proto: protoName(r.u8(18)) ?? 'TCP' };
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
  return new W(20)
    .u32(0, v.svcId)
    .u32(4, v.clusterSet)
    .u32(8, v.localSet)
    .u32(12, v.affinitySecs)
    .u16(16, v.flags)
    .u8(18, KIND[v.kind])
    .u8(19, ALGO[v.algo]).b;
}
export function decodeSvcValue(b: Uint8Array): SvcValue {
  const r = new R(b);
  const kindN = r.u8(18);
  const kind = (Object.keys(KIND) as SvcKind[]).find((k) => KIND[k] === kindN) ?? 'clusterIP';
  return {
    svcId: r.u32(0),
    clusterSet: r.u32(4),
    localSet: r.u32(8),
    affinitySecs: r.u32(12),
    flags: r.u16(16),
    kind,
    algo: r.u8(19) === ALGO.maglev ? 'maglev' : 'random',
  };
}

// ---- addrs, sets, eps, members -----------------------------------------

export const encodeAddrKey = (ip: string): Uint8Array => new W(16).addr(0, ip).b;
export const decodeAddrKey = (b: Uint8Array): string => addrText(b);
export const encodeU32 = (n: number): Uint8Array => new W(4).u32(0, n).b;
export const decodeU32 = (b: Uint8Array): number => new R(b).u32(0);
export const encodeU8 = (n: number): Uint8Array => new W(1).u8(0, n).b;

export function encodeSetValue(count: number): Uint8Array {
  return new W(8).u32(0, count).b;
}
export function decodeSetValue(b: Uint8Array): { count: number } {
  return { count: new R(b).u32(0) };
}

export interface EpKey {
  readonly setId: number;
  readonly slot: number;
}
export const encodeEpKey = (k: EpKey): Uint8Array => new W(8).u32(0, k.setId).u32(4, k.slot).b;
export function decodeEpKey(b: Uint8Array): EpKey {
  const r = new R(b);
  return { setId: r.u32(0), slot: r.u32(4) };
}

export interface EpValue {
  readonly addr: string;
  readonly port: number;
}
export const encodeEpValue = (v: EpValue): Uint8Array => new W(20).addr(0, v.addr).be16(16, v.port).b;
export function decodeEpValue(b: Uint8Array): EpValue {
  const r = new R(b);
  return { addr: r.addr(0), port: r.be16(16) };
}

export interface MemberKey {
  readonly setId: number;
  readonly addr: string;
  readonly port: number;
}
export const encodeMemberKey = (k: MemberKey): Uint8Array =>
  new W(24).u32(0, k.setId).be16(4, k.port).addr(8, k.addr).b;
export function decodeMemberKey(b: Uint8Array): MemberKey {
  const r = new R(b);
  return { setId: r.u32(0), port: r.be16(4), addr: r.addr(8) };
}

/** Maglev value: one 16-bit slot index per table entry. */
export function encodeMaglev(table: readonly number[]): Uint8Array {
  const w = new W(2 * table.length);
  table.forEach((slot, i) => w.u16(2 * i, slot));
  return w.b;
}
export function decodeMaglev(b: Uint8Array): number[] {
  const r = new R(b);
  const out: number[] = [];
  for (let i = 0; i + 1 < b.length; i += 2) out.push(r.u16(i));
  return out;
}

// ---- affinity -----------------------------------------------------------

export interface AffKey {
  readonly client: string;
  readonly svcId: number;
}
export const encodeAffKey = (k: AffKey): Uint8Array => new W(20).addr(0, k.client).u32(16, k.svcId).b;
export function decodeAffKey(b: Uint8Array): AffKey {
  const r = new R(b);
  return { client: r.addr(0), svcId: r.u32(16) };
}
export interface AffValue {
  readonly addr: string;
  readonly port: number;
  readonly lastNs: bigint;
}
export const encodeAffValue = (v: AffValue): Uint8Array =>
  new W(32).addr(0, v.addr).be16(16, v.port).u64(24, v.lastNs).b;
export function decodeAffValue(b: Uint8Array): AffValue {
  const r = new R(b);
  return { addr: r.addr(0), port: r.be16(16), lastNs: r.u64(24) };
}

// ---- LPM keys -------------------------------------------------------------

/** Prefix length of a CIDR in the 16-byte address space (IPv4 lives under ::ffff:0:0/96). */
export function lpmBits(family: IPFamily, prefix: number): number {
  return family === 'IPv4' ? 96 + prefix : prefix;
}

export interface LpmKey {
  /** Network address of the CIDR. */
  readonly addr: string;
  /** Prefix length in the address's own family (e.g. 24 for an IPv4 /24). */
  readonly prefix: number;
}
export function encodeLpmKey(k: LpmKey): Uint8Array {
  const fam: IPFamily = k.addr.includes(':') ? 'IPv6' : 'IPv4';
  return new W(20).u32(0, lpmBits(fam, k.prefix)).addr(4, k.addr).b;
}
export function decodeLpmKey(b: Uint8Array): LpmKey {
  const r = new R(b);
  const addr = r.addr(4);
  const bits = r.u32(0);
  return { addr, prefix: addr.includes(':') ? bits : bits - 96 };
}

export interface LpmSvcKey extends LpmKey {
  readonly svcId: number;
}
export function encodeLpmSvcKey(k: LpmSvcKey): Uint8Array {
  const fam: IPFamily = k.addr.includes(':') ? 'IPv6' : 'IPv4';
  return new W(24)
    .u32(0, 32 + lpmBits(fam, k.prefix))
    .be32(4, k.svcId)
    .addr(8, k.addr).b;
}
export function decodeLpmSvcKey(b: Uint8Array): LpmSvcKey {
  const r = new R(b);
  const addr = r.addr(8);
  const bits = r.u32(0) - 32;
  return { svcId: r.be32(4), addr, prefix: addr.includes(':') ? bits : bits - 96 };
}

// ---- ifaces ---------------------------------------------------------------

export interface IfaceKey {
  readonly ifindex: number;
  readonly family: IPFamily;
}
export const encodeIfaceKey = (k: IfaceKey): Uint8Array => new W(8).u32(0, k.ifindex).u32(4, familyIndex(k.family)).b;
export function decodeIfaceKey(b: Uint8Array): IfaceKey {
  const r = new R(b);
  return { ifindex: r.u32(0), family: r.u32(4) === 0 ? 'IPv4' : 'IPv6' };
}

// ---- cfg ------------------------------------------------------------------

export interface CfgValue {
  readonly mark: number;
  readonly flags: number;
  readonly netnsCookie: bigint;
}
export const encodeCfgValue = (v: CfgValue): Uint8Array =>
  new W(16).u32(0, v.mark).u32(4, v.flags).u64(8, v.netnsCookie).b;
export function decodeCfgValue(b: Uint8Array): CfgValue {
  const r = new R(b);
  return { mark: r.u32(0), flags: r.u32(4), netnsCookie: r.u64(8) };
}

// ---- traffic (per-CPU: values read back summed over the CPUs) -------------

export interface TrafficValue {
  readonly conns: bigint;
  readonly bytes: bigint;
}
export const encodeTrafficValue = (v: TrafficValue): Uint8Array => new W(16).u64(0, v.conns).u64(8, v.bytes).b;
export function decodeTrafficValue(b: Uint8Array): TrafficValue {
  const r = new R(b);
  return { conns: r.u64(0), bytes: r.u64(8) };
}

// ---- ct -------------------------------------------------------------------

export interface CtKey {
  readonly saddr: string;
  readonly daddr: string;
  readonly sport: number;
  readonly dport: number;
  readonly proto: Protocol;
}
export const encodeCtKey = (k: CtKey): Uint8Array =>
  new W(40).addr(0, k.saddr).addr(16, k.daddr).be16(32, k.sport).be16(34, k.dport).u8(36, PROTO_NUMBER[k.proto]).b;
export function decodeCtKey(b: Uint8Array): CtKey {
  const r = new R(b);
  return {
    saddr: r.addr(0),
    daddr: r.addr(16),
    sport: r.be16(32),
    dport: r.be16(34),
    proto: protoName(r.u8(36)) ?? 'TCP',
  };
}
export interface CtValue {
  readonly addr: string;
  /** With CT_SNAT: the new source (original direction) or the client's own address (reply). */
  readonly nat: string | null;
  readonly port: number;
  readonly flags: number;
  readonly svcId: number;
  readonly createdNs: bigint;
}
export function encodeCtValue(v: CtValue): Uint8Array {
  const w = new W(48).addr(0, v.addr).be16(32, v.port).u8(34, v.flags).u32(36, v.svcId).u64(40, v.createdNs);
  if (v.nat !== null) w.addr(16, v.nat);
  return w.b;
}
export function decodeCtValue(b: Uint8Array): CtValue {
  const r = new R(b);
  const flags = r.u8(34);
  return {
    addr: r.addr(0),
    nat: flags & CT_SNAT ? r.addr(16) : null,
    port: r.be16(32),
    flags,
    svcId: r.u32(36),
    createdNs: r.u64(40),
  };
}

// ---- names ----------------------------------------------------------------

const NAME_LEN = 160;
export function encodeName(name: string): Uint8Array {
  const out = new Uint8Array(NAME_LEN);
  // Kubernetes names, namespaces and port names are ASCII (DNS labels).
  const n = Math.min(name.length, NAME_LEN - 1);
  for (let i = 0; i < n; i++) out[i] = name.charCodeAt(i) & 0x7f;
  return out;
}
export function decodeName(b: Uint8Array): string {
  const end = b.indexOf(0);
  return keyOf(b.subarray(0, end < 0 ? b.length : end));
}

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
      return 'IPv4';
  }
}
