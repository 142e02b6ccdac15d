// Pure IP and CIDR helpers. Parsing is "sloppy" like upstream's ParseIPSloppy:
// IPv4 octets with leading zeros are accepted as decimal ("172.30.0.041" is
// 172.30.0.41). Everything returned is normalised: dotted decimal for IPv4,
// RFC 5952 lower-case compressed form for IPv6.

import type { IPFamily } from './types.js';

export interface ParsedIP {
  readonly family: IPFamily;
  /** 4 or 16 bytes. */
  readonly bytes: Uint8Array;
  readonly text: string;
}

export interface ParsedCIDR {
  readonly family: IPFamily;
  /** Network address (host bits cleared). */
  readonly network: Uint8Array;
  readonly prefix: number;
  /** Normalised "network/prefix". */
  readonly text: string;
}

/**
 * IPv4 by character codes (every endpoint address of every slice comes
 * through here, so no split or regex): four decimal parts of 1-3 digits, each
 * at most 255. Sets v4Sloppy when a part had a leading zero, i.e. when the
 * normalised text differs from the input.
 */
let v4Sloppy = false;
function parseIPv4(s: string): Uint8Array | null {
  const out = new Uint8Array(4);
  let part = 0;
  let n = 0;
  let digits = 0;
  let sloppy = false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 46) {
      if (digits === 0 || part === 3) return null;
      out[part++] = n;
      n = 0;
      digits = 0;
      continue;
    }
    if (c < 48 || c > 57 || ++digits > 3) return null;
    if (digits === 2 && n === 0) sloppy = true;
    n = n * 10 + (c - 48);
    if (n > 255) return null;
  }
  if (digits === 0 || part !== 3) return null;
  out[3] = n;
  v4Sloppy = sloppy;
  return out;
}

function parseIPv6(s: string): Uint8Array | null {
  if (s.includes('%')) return null; // zones are not addresses a Service can use
  let head = s;
  let tail4: Uint8Array | null = null;
  const lastColon = s.lastIndexOf(':');
  if (lastColon >= 0 && s.slice(lastColon + 1).includes('.')) {
    tail4 = parseIPv4(s.slice(lastColon + 1));
    if (!tail4) return null;
    head = s.slice(0, lastColon + 1) + '0:0';
  }
  const dbl = head.split('::');
  if (dbl.length > 2) return null;
  const toGroups = (x: string): number[] | null => {
    if (x === '') return [];
    const gs = x.split(':');
    const out: number[] = [];
    for (const g of gs) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
      out.push(Number.parseInt(g, 16));
    }
    return out;
  };
  const left = toGroups(dbl[0]!);
  const right = dbl.length === 2 ? toGroups(dbl[1]!) : [];
  if (!left || !right) return null;
  let groups: number[];
  if (dbl.length === 2) {
    const missing = 8 - left.length - right.length;
    if (missing < 1) return null;
    groups = [...left, ...new Array<number>(missing).fill(0), ...right];
  } else {
    if (left.length !== 8) return null;
    groups = left;
  }
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    out[i * 2] = g >> 8;
    out[i * 2 + 1] = g & 0xff;
  });
  if (tail4) out.set(tail4, 12);
  return out;
}

/** RFC 5952 text of a 16-byte address. */
function formatIPv6(b: Uint8Array): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((b[i]! << 8) | b[i + 1]!);
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (gs: number[]) => gs.map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLen))}`;
}

export function formatIP(bytes: Uint8Array): string {
  return bytes.length === 4 ? Array.from(bytes).join('.') : formatIPv6(bytes);
}

/** Parse an IP address; null when it is not one. */
export function parseIP(s: unknown): ParsedIP | null {
  if (typeof s !== 'string' || s.length === 0 || s.length > 64) return null;
  const v4 = s.includes(':') ? null : parseIPv4(s);
  // Already normalised (the usual case): the input is the text, no formatting.
  if (v4) return { family: 'IPv4', bytes: v4, text: v4Sloppy ? formatIP(v4) : s };
  const v6 = s.includes(':') ? parseIPv6(s) : null;
  if (v6) return { family: 'IPv6', bytes: v6, text: formatIP(v6) };
  return null;
}

/** Normalised text of an IP, or null. */
export function normalizeIP(s: unknown): string | null {
  return parseIP(s)?.text ?? null;
}

export function ipFamilyOf(s: unknown): IPFamily | null {
  return parseIP(s)?.family ?? null;
}

/** Parse "addr/prefix"; host bits are cleared (like Go's net.ParseCIDR network). */
export function parseCIDR(s: unknown): ParsedCIDR | null {
  if (typeof s !== 'string') return null;
  const slash = s.indexOf('/');
  if (slash < 0) return null;
  const ip = parseIP(s.slice(0, slash));
  const ps = s.slice(slash + 1);
  if (!ip || !/^[0-9]{1,3}$/.test(ps)) return null;
  const prefix = Number.parseInt(ps, 10);
  const max = ip.bytes.length * 8;
  if (prefix > max) return null;
  const network = maskBytes(ip.bytes, prefix);
  return { family: ip.family, network, prefix, text: `${formatIP(network)}/${prefix}` };
}

function maskBytes(bytes: Uint8Array, prefix: number): Uint8Array {
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) {
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    out[i] = bytes[i]! & ((0xff << (8 - bits)) & 0xff);
  }
  return out;
}

export function cidrContains(cidr: ParsedCIDR, ip: ParsedIP | string): boolean {
  const p = typeof ip === 'string' ? parseIP(ip) : ip;
  if (!p || p.family !== cidr.family) return false;
  const masked = maskBytes(p.bytes, cidr.prefix);
  return masked.every((b, i) => b === cidr.network[i]);
}

/** True for 0.0.0.0/0 and ::/0. */
export function isZeroCIDR(s: string): boolean {
  const c = parseCIDR(s.trim());
  return c !== null && c.prefix === 0;
}

export function isLoopback(ip: ParsedIP | string): boolean {
  const p = typeof ip === 'string' ? parseIP(ip) : ip;
  if (!p) return false;
  if (p.family === 'IPv4') return p.bytes[0] === 127;
  return p.bytes.every((b, i) => (i === 15 ? b === 1 : b === 0));
}

/**
 * Why an address can never be a Service's: unspecified, loopback, link-local
 * or multicast (the API server refuses these, as Go's ValidateNonSpecialIP
 * does), else null. Programming one would capture the node's own traffic,
 * e.g. a ClusterIP 127.0.0.1 made nftables mode reject every connection to
 * the node's loopback, the metrics server's included.
 *
 * One more block, which the API server accepts but we do not: IPv6's
 * discard-only 100::/64 (RFC 6666), where the proxy's own IPv6 datapath
 * canary lives (src/core/canary.ts). No network numbers hosts from it, so no
 * real Service is lost, and no user's Service can take the canary's address.
 */
export function specialIPReason(ip: ParsedIP): string | null {
  const b = ip.bytes;
  if (b.every((x) => x === 0)) return 'unspecified';
  if (isLoopback(ip)) return 'loopback';
  if (ip.family === 'IPv4') {
    if (b[0] === 169 && b[1] === 254) return 'link-local';
    if (b[0]! >= 224 && b[0]! <= 239) return 'multicast';
    return null;
  }
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) return 'link-local';
  if (b[0] === 0xff) return 'multicast';
  if (isDiscardOnly6(b)) return 'discard-only 100::/64, kept for the datapath canary';
  return null;
}

/** In 100::/64 (the first 8 bytes 0100:0000:0000:0000). */
function isDiscardOnly6(b: Uint8Array): boolean {
  return b[0] === 0x01 && b.subarray(1, 8).every((x) => x === 0);
}

/** "ip:port", or "[ip]:port" for IPv6 (Go's net.JoinHostPort). */
export function joinHostPort(ip: string, port: number): string {
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}
