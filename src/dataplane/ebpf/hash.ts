// The two hashes of the ebpf mode: the flow hash the programs compute on
// every new connection of a Maglev service (flow_hash in src/bpf/lb.h; the
// tracer must agree with it bit for bit), and the Maglev lookup table the
// proxy computes for such a service's endpoints.
import { addrBytes } from './layout.js';
import { PROTO_NUMBER } from './layout.js';
import type { Protocol } from '../../core/types.js';

const SEED = 0x6b707473;

const rol = (x: number, k: number) => ((x << k) | (x >>> (32 - k))) >>> 0;

/** lookup3's mix and final rounds, on uint32 values held in doubles. */
function mix(s: [number, number, number]): void {
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

function final(s: [number, number, number]): void {
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

/** The four 32-bit words of an address as the programs load them (little-endian host). */
function words(ip: string): number[] {
  const b = addrBytes(ip);
  const v = new DataView(b.buffer, b.byteOffset, 16);
  return [0, 4, 8, 12].map((o) => v.getUint32(o, true));
}

/** A network-order port as a little-endian host loads it into a __u16. */
const be16AsLoaded = (p: number) => ((p & 0xff) << 8) | ((p >> 8) & 0xff);

export interface FlowTuple {
  readonly src: string;
  readonly dst: string;
  readonly sport: number;
  readonly dport: number;
  readonly proto: Protocol;
}

/** flow_hash of src/bpf/lb.h for this tuple. */
export function flowHash(t: FlowTuple): number {
  const s = words(t.src);
  const d = words(t.dst);
  const init = (0xdeadbeef + (12 << 2) + SEED) >>> 0;
  const st: [number, number, number] = [init, init, init];
  st[0] = (st[0] + s[0]!) >>> 0;
  st[1] = (st[1] + s[1]!) >>> 0;
  st[2] = (st[2] + s[2]!) >>> 0;
  mix(st);
  st[0] = (st[0] + s[3]!) >>> 0;
  st[1] = (st[1] + d[0]!) >>> 0;
  st[2] = (st[2] + d[1]!) >>> 0;
  mix(st);
  st[0] = (st[0] + d[2]!) >>> 0;
  st[1] = (st[1] + d[3]!) >>> 0;
  st[2] = (st[2] + (((be16AsLoaded(t.sport) << 16) | be16AsLoaded(t.dport)) >>> 0)) >>> 0;
  mix(st);
  st[0] = (st[0] + PROTO_NUMBER[t.proto]) >>> 0;
  final(st);
  return st[2];
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
