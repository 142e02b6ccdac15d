// The Maglev lookup table both hashing modes share (the ebpf mode's BPF map
// and the nftables mode's verdict map are filled from it), and the kernel's
// jhash (lookup3) in the two shapes the datapaths compute it: the ebpf
// programs' own word-wise flow hash (src/dataplane/ebpf/hash.ts) and
// nf_tables' `jhash` expression over a byte string (nftJhash), so the
// tracers can follow a flow to the endpoint the kernel will pick.

/**
 * The seed of every client hash (KPT_HASH_SEED in src/bpf/lb.h, `seed` of
 * nftables' jhash): fixed, so every node hashes a client alike (nft picks a
 * random seed when none is given).
 */
export const CLIENT_HASH_SEED = 0x6b707473;

const rol = (x: number, k: number) => ((x << k) | (x >>> (32 - k))) >>> 0;

/** lookup3 (the kernel's jhash)'s mix and final rounds, on uint32 values held in doubles. */
export function jhashMix(s: [number, number, number]): void {
  let [a, b, c] = s;
  a = (a - c) >>> 0;
  a = (a ^ rol(c, 4)) >>> 0;
  c = (c + b) >>> 0;
  b = (b - a) >>> 0;
  b = (b ^ rol(a, 6)) >>> 0;
  a = (a + c) >>> 0;
  c = (c - b) >>> 0;
  c = (c ^ rol(b, 8)) >>> 0;
  b = (b + a) >>> 0;
  a = (a - c) >>> 0;
  a = (a ^ rol(c, 16)) >>> 0;
  c = (c + b) >>> 0;
  b = (b - a) >>> 0;
  b = (b ^ rol(a, 19)) >>> 0;
  a = (a + c) >>> 0;
  c = (c - b) >>> 0;
  c = (c ^ rol(b, 4)) >>> 0;
  b = (b + a) >>> 0;
  s[0] = a;
  s[1] = b;
  s[2] = c;
}

export function jhashFinal(s: [number, number, number]): void {
  let [a, b, c] = s;
  c = (c ^ b) >>> 0;
  c = (c - rol(b, 14)) >>> 0;
  a = (a ^ c) >>> 0;
  a = (a - rol(c, 11)) >>> 0;
  b = (b ^ a) >>> 0;
  b = (b - rol(a, 25)) >>> 0;
  c = (c ^ b) >>> 0;
  c = (c - rol(b, 16)) >>> 0;
  a = (a ^ c) >>> 0;
  a = (a - rol(c, 4)) >>> 0;
  b = (b ^ a) >>> 0;
  b = (b - rol(a, 14)) >>> 0;
  c = (c ^ b) >>> 0;
  c = (c - rol(b, 24)) >>> 0;
  s[0] = a;
  s[1] = b;
  s[2] = c;
}

/** FNV-1a, 32 bits, with a seed folded in first: the two hashes of a Maglev permutation. */
function fnv1a(s: string, seed: number): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * The Maglev lookup table (Eisenbud et al., "Maglev: A Fast and Reliable
 * Software Network Load Balancer", NSDI 2016) of m entries for these
 * endpoints (by identity, "ip:port"), each entry the index of its endpoint
 * in `endpoints`. Every node computes the same table for the same set, so a
 * flow lands on the same endpoint whichever node it enters, and a change of
 * one endpoint moves only about 1/n of the flows. m must be a prime larger
 * than the number of endpoints.
 */
export function maglevTable(endpoints: readonly string[], m: number): number[] {
  const n = endpoints.length;
  const table = new Array<number>(m).fill(-1);
  if (n === 0) return table.fill(0);
  const offset = endpoints.map((e) => fnv1a(e, 0x9e3779b9) % m);
  const skip = endpoints.map((e) => (fnv1a(e, 0x85ebca6b) % (m - 1)) + 1);
  const next = new Array<number>(n).fill(0);
  let filled = 0;
  for (;;) {
    for (let i = 0; i < n; i++) {
      let c = (offset[i]! + next[i]! * skip[i]!) % m;
      while (table[c]! >= 0) {
        next[i]!++;
        c = (offset[i]! + next[i]! * skip[i]!) % m;
      }
      table[c] = i;
      next[i]!++;
      if (++filled === m) return table;
    }
  }
}

/** True for a prime usable as a Maglev table size (at most 65521: entries are 16-bit). */
export function isMaglevSize(m: number): boolean {
  if (!Number.isInteger(m) || m < 3 || m > 65521) return false;
  for (let d = 2; d * d <= m; d++) if (m % d === 0) return false;
  return true;
}

/** The kernel's jhash() of a byte string (include/linux/jhash.h), little-endian words. */
export function jhashBytes(k: Uint8Array, initval: number): number {
  let length = k.length;
  const init = (0xdeadbeef + length + initval) >>> 0;
  const s: [number, number, number] = [init, init, init];
  const word = (o: number, n: number) => {
    let w = 0;
    for (let i = n - 1; i >= 0; i--) w = ((w << 8) | k[o + i]!) >>> 0;
    return w;
  };
  let o = 0;
  while (length > 12) {
    s[0] = (s[0] + word(o, 4)) >>> 0;
    s[1] = (s[1] + word(o + 4, 4)) >>> 0;
    s[2] = (s[2] + word(o + 8, 4)) >>> 0;
    jhashMix(s);
    length -= 12;
    o += 12;
  }
  if (length === 0) return s[2];
  // The tail: up to 12 bytes, each word read little-endian (missing bytes are 0).
  s[0] = (s[0] + word(o, Math.min(4, length))) >>> 0;
  if (length > 4) s[1] = (s[1] + word(o + 4, Math.min(4, length - 4))) >>> 0;
  if (length > 8) s[2] = (s[2] + word(o + 8, length - 8)) >>> 0;
  jhashFinal(s);
  return s[2];
}

/** The kernel's reciprocal_scale(): a 32-bit hash mapped onto 0..n-1 (nf_tables' `jhash ... mod n`). */
export function reciprocalScale(h: number, n: number): number {
  return Number((BigInt(h >>> 0) * BigInt(n)) >> 32n);
}
