// Crafting and reading Ethernet frames for BPF_PROG_TEST_RUN: IPv4 or IPv6,
// TCP or UDP, with correct checksums, and a parser that also verifies them
// (full checksums: test-run frames carry no CHECKSUM_PARTIAL state).
import { addrBytes, addrText } from '../../src/dataplane/ebpf/layout.js';

export interface Frame {
  readonly src: string;
  readonly dst: string;
  readonly sport: number;
  readonly dport: number;
  readonly proto: 'TCP' | 'UDP';
  /** TCP flags byte; default SYN. */
  readonly flags?: number;
  readonly payload?: Uint8Array;
  readonly srcMac?: Uint8Array;
  readonly dstMac?: Uint8Array;
}

export const TCP_SYN = 0x02;
export const TCP_ACK = 0x10;

function sum16(b: Uint8Array, init = 0): number {
  let s = init;
  for (let i = 0; i + 1 < b.length; i += 2) s += (b[i]! << 8) | b[i + 1]!;
  if (b.length % 2) s += b[b.length - 1]! << 8;
  return s;
}
function fold(s: number): number {
  while (s > 0xffff) s = (s & 0xffff) + Math.floor(s / 0x10000);
  return ~s & 0xffff;
}

const isV6 = (ip: string) => ip.includes(':');
const ipBytes = (ip: string) => (isV6(ip) ? addrBytes(ip) : addrBytes(ip).subarray(12));

export function buildFrame(f: Frame): Uint8Array {
  const v6 = isV6(f.dst);
  const payload = f.payload ?? new Uint8Array(0);
  const l4len = (f.proto === 'TCP' ? 20 : 8) + payload.length;
  const l3len = v6 ? 40 : 20;
  const out = new Uint8Array(14 + l3len + l4len);
  const dv = new DataView(out.buffer);
  out.set(f.dstMac ?? [2, 0, 0, 0, 0, 2], 0);
  out.set(f.srcMac ?? [2, 0, 0, 0, 0, 1], 6);
  dv.setUint16(12, v6 ? 0x86dd : 0x0800);
  const s = ipBytes(f.src);
  const d = ipBytes(f.dst);
  const proto = f.proto === 'TCP' ? 6 : 17;
  if (!v6) {
    out[14] = 0x45;
    dv.setUint16(16, l3len + l4len);
    out[22] = 64;
    out[23] = proto;
    out.set(s, 26);
    out.set(d, 30);
    dv.setUint16(24, fold(sum16(out.subarray(14, 34))));
  } else {
    out[14] = 0x60;
    dv.setUint16(18, l4len);
    out[20] = proto;
    out[21] = 64;
    out.set(s, 22);
    out.set(d, 38);
  }
  const l4 = 14 + l3len;
  dv.setUint16(l4, f.sport);
  dv.setUint16(l4 + 2, f.dport);
  if (f.proto === 'TCP') {
    dv.setUint32(l4 + 4, 1000);
    out[l4 + 12] = 5 << 4;
    out[l4 + 13] = f.flags ?? TCP_SYN;
    dv.setUint16(l4 + 14, 65535);
    out.set(payload, l4 + 20);
  } else {
    dv.setUint16(l4 + 4, l4len);
    out.set(payload, l4 + 8);
  }
  const csumOff = l4 + (f.proto === 'TCP' ? 16 : 6);
  dv.setUint16(csumOff, fold(pseudo(s, d, proto, l4len) + sum16(out.subarray(l4))) || 0xffff);
  return out;
}

function pseudo(s: Uint8Array, d: Uint8Array, proto: number, len: number): number {
  return sum16(s) + sum16(d) + proto + len;
}

/**
 * An ICMP (IPv4) or ICMPv6 error from src to dst quoting the IP packet of `quoted` (a frame from
 * buildFrame): its IP header and the first 8 bytes after it, as routers quote. Default: destination
 * unreachable, fragmentation needed (IPv4) or packet too big (IPv6).
 */
export function buildIcmpError(src: string, dst: string, quoted: Uint8Array, type?: number, code?: number): Uint8Array {
  const v6 = isV6(dst);
  const qlen = (v6 ? 40 : (quoted[14]! & 0xf) * 4) + 8;
  const quote = quoted.subarray(14, 14 + qlen);
  const l3len = v6 ? 40 : 20;
  const l4len = 8 + quote.length;
  const out = new Uint8Array(14 + l3len + l4len);
  const dv = new DataView(out.buffer);
  out.set([2, 0, 0, 0, 0, 2], 0);
  out.set([2, 0, 0, 0, 0, 1], 6);
  dv.setUint16(12, v6 ? 0x86dd : 0x0800);
  const s = ipBytes(src);
  const d = ipBytes(dst);
  const l4 = 14 + l3len;
  if (!v6) {
    out[14] = 0x45;
    dv.setUint16(16, l3len + l4len);
    out[22] = 64;
    out[23] = 1;
    out.set(s, 26);
    out.set(d, 30);
    dv.setUint16(24, fold(sum16(out.subarray(14, 34))));
    out[l4] = type ?? 3;
    out[l4 + 1] = code ?? 4;
    dv.setUint16(l4 + 6, 1280); // the next hop's MTU
  } else {
    out[14] = 0x60;
    dv.setUint16(18, l4len);
    out[20] = 58;
    out[21] = 64;
    out.set(s, 22);
    out.set(d, 38);
    out[l4] = type ?? 2;
    out[l4 + 1] = code ?? 0;
    dv.setUint32(l4 + 4, 1280);
  }
  out.set(quote, l4 + 8);
  const sum = sum16(out.subarray(l4)) + (v6 ? pseudo(s, d, 58, l4len) : 0);
  dv.setUint16(l4 + 2, fold(sum));
  return out;
}

export interface Parsed {
  readonly src: string;
  readonly dst: string;
  readonly proto: number;
  readonly sport: number;
  readonly dport: number;
  readonly srcMac: string;
  readonly dstMac: string;
  /** IPv4 header checksum valid (true for IPv6). */
  readonly l3ok: boolean;
  /** L4 (TCP/UDP/ICMP) checksum valid. */
  readonly l4ok: boolean;
  /** ICMP type/code for ICMP and ICMPv6 frames. */
  readonly icmp?: {
    type: number;
    code: number;
    /** The quoted packet; l3ok: its IPv4 header checksum is valid (true for IPv6). */
    inner: { src: string; dst: string; sport: number; dport: number; l3ok: boolean };
  };
}

const mac = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(':');

export function parseFrame(b: Uint8Array): Parsed {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const v6 = dv.getUint16(12) === 0x86dd;
  const l3 = 14;
  let src: string, dst: string, proto: number, l4: number, l3ok: boolean, l4len: number;
  if (!v6) {
    const ihl = (b[l3]! & 0xf) * 4;
    src = addrText(addrBytes(Array.from(b.subarray(l3 + 12, l3 + 16)).join('.')));
    dst = addrText(addrBytes(Array.from(b.subarray(l3 + 16, l3 + 20)).join('.')));
    proto = b[l3 + 9]!;
    l4 = l3 + ihl;
    l3ok = fold(sum16(b.subarray(l3, l3 + ihl))) === 0;
    l4len = dv.getUint16(l3 + 2) - ihl;
  } else {
    src = addrText(b.subarray(l3 + 8, l3 + 24));
    dst = addrText(b.subarray(l3 + 24, l3 + 40));
    proto = b[l3 + 6]!;
    l4 = l3 + 40;
    l3ok = true;
    l4len = dv.getUint16(l3 + 4);
  }
  const seg = b.subarray(l4, l4 + l4len);
  const sIP = v6 ? b.subarray(l3 + 8, l3 + 24) : b.subarray(l3 + 12, l3 + 16);
  const dIP = v6 ? b.subarray(l3 + 24, l3 + 40) : b.subarray(l3 + 16, l3 + 20);
  let l4ok: boolean;
  if (proto === 1) l4ok = fold(sum16(seg)) === 0;
  else if (proto === 17 && !v6 && dv.getUint16(l4 + 6) === 0) l4ok = true;
  else l4ok = fold(pseudo(sIP, dIP, proto, l4len) + sum16(seg)) === 0;
  const base = {
    src,
    dst,
    proto,
    sport: proto === 6 || proto === 17 ? dv.getUint16(l4) : 0,
    dport: proto === 6 || proto === 17 ? dv.getUint16(l4 + 2) : 0,
    srcMac: mac(b.subarray(6, 12)),
    dstMac: mac(b.subarray(0, 6)),
    l3ok,
    l4ok,
  };
  if (proto !== 1 && proto !== 58) return base;
  const innerL3 = l4 + 8;
  const inner = parseInner(b.subarray(innerL3), proto === 58);
  return { ...base, icmp: { type: b[l4]!, code: b[l4 + 1]!, inner } };
}

function parseInner(b: Uint8Array, v6: boolean) {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  if (!v6) {
    const ihl = (b[0]! & 0xf) * 4;
    return {
      src: Array.from(b.subarray(12, 16)).join('.'),
      dst: Array.from(b.subarray(16, 20)).join('.'),
      sport: dv.getUint16(ihl),
      dport: dv.getUint16(ihl + 2),
      l3ok: fold(sum16(b.subarray(0, ihl))) === 0,
    };
  }
  return {
    src: addrText(b.subarray(8, 24)),
    dst: addrText(b.subarray(24, 40)),
    sport: dv.getUint16(40),
    dport: dv.getUint16(42),
    l3ok: true,
  };
}
