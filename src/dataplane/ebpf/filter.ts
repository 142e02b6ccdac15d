// The tc programs' first check (src/bpf/filter.h) from the proxy's side: the
// same hashes, the kpt_hot bitmap of a family computed from its kpt_addrs
// and kpt_svc_cidrs keys, and the kpt_seen bit of an address.
//
// Both bitmaps are arrays of little-endian 64-bit words, so bit h of a
// bitmap is bit h & 7 of its byte h >> 3: the proxy handles them as bytes.
// HotBits counts, per bit, the keys that set it, so a key removed clears its
// bit only when no other key shares it.
import { decodeLpmKey } from './layout.js';
import { addrBytes } from './struct.js';

import { HOT_BITS_LOG, HOT_WORDS, SEEN_BITS_LOG, SEEN_WORDS } from './abi.js';

export { HOT_BITS_LOG, HOT_STRIDE, HOT_WORDS, SEEN_BITS_LOG, SEEN_WORDS } from './abi.js';
export const HOT_VALID = 1 << 0;
export const HOT_ALL = 1 << 1;
export const SEEN_COMPLETE = 1 << 0;
export const SEEN_REPLY_SRC = 0;
export const SEEN_ORIG_DST = 1;

const MUL = 0x9e3779b1;
const MIX = 0x85ebca6b;
const SEED = 0x6b707473;
const BUCKET_SALT = 0x5bd1e995;

/** filter_hash(): the top `log` bits of x times the multiplier. */
export function filterHash(x: number, log: number): number {
  return Math.imul(x, MUL) >>> (32 - log);
}

/** filter_mix(): one word into the running hash. */
function mix(h: number, w: number): number {
  const x = Math.imul(h ^ w, MIX);
  return ((x << 13) | (x >>> 19)) >>> 0;
}

const word = (a: Uint8Array, i: number): number =>
  (a[i]! | (a[i + 1]! << 8) | (a[i + 2]! << 16) | (a[i + 3]! << 24)) >>> 0;

/** addr_fold(): the four words of a 16-byte address (as a little-endian host loads them), mixed. */
export function addrFold(a: Uint8Array): number {
  return mix(mix(mix(mix(SEED, word(a, 0)), word(a, 4)), word(a, 8)), word(a, 12));
}

/** bucket_fold(): the address's IPv4 /16 or IPv6 /64. */
export function bucketFold(a: Uint8Array, v6: boolean): number {
  return v6 ? mix(mix(BUCKET_SALT, word(a, 0)), word(a, 4)) : mix(mix(BUCKET_SALT, word(a, 8)), word(a, 12) & 0xffff);
}

/** The kpt_hot bit of a destination address (16 bytes). */
export const hotAddrBit = (a: Uint8Array): number => filterHash(addrFold(a), HOT_BITS_LOG);

/** Widest ServiceCIDR (bucket bits short of the bucket) that is still marked bucket by bucket: 256 buckets. */
const MAX_SPREAD = 8;

/**
 * The kpt_hot bits of a ServiceCIDR: one per bucket (IPv4 /16, IPv6 /64) it
 * meets, or 'all' when it spans more than 256 of them.
 */
export function hotCidrBits(addr: string, prefix: number): number[] | 'all' {
  const v6 = addr.includes(':');
  const bucket = v6 ? 64 : 16;
  const spread = Math.max(0, bucket - prefix);
  if (spread > MAX_SPREAD) return 'all';
  const a = addrBytes(addr);
  const out: number[] = [];
  // The bucket's bits just above the prefix run through every value; they lie in one byte or two.
  const first = v6 ? 0 : 12;
  const bucketBytes = bucket / 8;
  for (let n = 0; n < 1 << spread; n++) {
    const b = new Uint8Array(a);
    let v = n;
    for (let bit = bucket - 1; bit >= bucket - spread; bit--, v >>= 1) {
      const byte = first + (bit >> 3);
      const mask = 0x80 >> (bit & 7);
      b[byte] = v & 1 ? b[byte]! | mask : b[byte]! & ~mask;
    }
    for (let i = first + bucketBytes; i < 16; i++) b[i] = 0;
    out.push(filterHash(bucketFold(b, v6), HOT_BITS_LOG));
  }
  return out;
}

/** The kpt_seen array index of an address's word in a region, and the bit in that word. */
export function seenSlot(region: number, a: Uint8Array): { index: number; bit: number } {
  const h = filterHash(addrFold(a), SEEN_BITS_LOG);
  return { index: 1 + region * SEEN_WORDS + (h >> 6), bit: h & 63 };
}

/** A key's contribution to kpt_hot: bits, or 'all' (a ServiceCIDR too wide). */
export function hotBitsOfKey(map: 'addrs' | 'svcCidrs', key: Uint8Array): number[] | 'all' {
  if (map === 'addrs') return [hotAddrBit(key.subarray(0, 16))];
  const k = decodeLpmKey(key);
  return hotCidrBits(k.addr, k.prefix);
}

/**
 * One family's kpt_hot bitmap, counted: add() and remove() a key's bits;
 * words() is the header and bitmap as kpt_hot holds them (header first).
 */
export class HotBits {
  private readonly counts = new Uint32Array(1 << HOT_BITS_LOG);
  private readonly bytes = new Uint8Array(HOT_WORDS * 8);
  private wide = 0;

  add(bits: number[] | 'all'): void {
    if (bits === 'all') {
      this.wide++;
      return;
    }
    for (const h of bits) {
      const c = this.counts[h]!;
      this.counts[h] = c + 1;
      if (c === 0) this.bytes[h >> 3] = this.bytes[h >> 3]! | (1 << (h & 7));
    }
  }

  remove(bits: number[] | 'all'): void {
    if (bits === 'all') {
      this.wide = Math.max(0, this.wide - 1);
      return;
    }
    for (const h of bits) {
      const c = this.counts[h]!;
      if (c === 0) continue;
      this.counts[h] = c - 1;
      if (c === 1) this.bytes[h >> 3] = this.bytes[h >> 3]! & ~(1 << (h & 7));
    }
  }

  /** The header word's flags. */
  header(): number {
    return HOT_VALID | (this.wide > 0 ? HOT_ALL : 0);
  }

  /** Word i of the bitmap (8 bytes, little-endian). */
  word(i: number): Uint8Array {
    return this.bytes.subarray(i * 8, i * 8 + 8);
  }

  has(h: number): boolean {
    return (this.bytes[h >> 3]! & (1 << (h & 7))) !== 0;
  }
}
