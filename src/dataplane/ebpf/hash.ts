// The two hashes of the ebpf mode: the client hash the programs compute on
// every new connection of a Maglev or source-hash service (client_hash in
// src/bpf/lb.h; the tracer must agree with it bit for bit), and the Maglev
// lookup table the proxy computes for such a service's endpoints (shared
// with the nftables mode: src/dataplane/maglev.ts).
import { addrBytes } from './layout.js';
import { CLIENT_HASH_SEED, jhashFinal as final, jhashMix as mix } from '../maglev.js';

export { isMaglevSize, maglevTable } from '../maglev.js';

const SEED = CLIENT_HASH_SEED;

/** The four 32-bit words of an address as the programs load them (little-endian host). */
function words(ip: string): number[] {
  const b = addrBytes(ip);
  const v = new DataView(b.buffer, b.byteOffset, 16);
  return [0, 4, 8, 12].map((o) => v.getUint32(o, true));
}

/** A network-order port as a little-endian host loads it into a __u16. */
const be16AsLoaded = (p: number) => ((p & 0xff) << 8) | ((p >> 8) & 0xff);

/** The client of a new connection: its address, and its source port for Maglev. */
export interface ClientTuple {
  readonly src: string;
  readonly sport: number;
}

/**
 * client_hash of src/bpf/lb.h: the client address and source port (Maglev),
 * or the address alone (addrOnly, source hashing).
 */
export function clientHash(t: ClientTuple, addrOnly = false): number {
  const s = words(t.src);
  const init = (0xdeadbeef + ((addrOnly ? 4 : 5) << 2) + SEED) >>> 0;
  const st: [number, number, number] = [init, init, init];
  st[0] = (st[0] + s[0]!) >>> 0;
  st[1] = (st[1] + s[1]!) >>> 0;
  st[2] = (st[2] + s[2]!) >>> 0;
  mix(st);
  st[0] = (st[0] + s[3]!) >>> 0;
  if (!addrOnly) st[1] = (st[1] + be16AsLoaded(t.sport)) >>> 0;
  final(st);
  return st[2];
}
