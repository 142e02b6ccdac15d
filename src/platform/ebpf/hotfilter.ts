// Keeping the tc programs' first check (src/bpf/filter.h) true:
//   - kpt_hot follows every write to kpt_addrs and kpt_svc_cidrs that goes
//     through the runtime. Bits of added keys are written before the keys
//     (a packet to a new Service address is never let go while the address
//     is there), bits of removed keys cleared after them; a failed write
//     rebuilds both families from what the maps then hold.
//   - kpt_seen is the programs' own; the proxy only sets its header to
//     SEEN_COMPLETE once every kpt_ct entry has its mark (trustSeen), which
//     holds from the start when kpt_ct is new, and after an upgrade over
//     pinned maps once the older programs' entries have been marked by their
//     next packet.
import type { IPFamily } from '../../core/types.js';
import * as F from '../../dataplane/ebpf/filter.js';
import * as L from '../../dataplane/ebpf/layout.js';
import type { MapOp } from '../../dataplane/ebpf/store.js';
import type { BpfMap } from './map.js';

type Tracked = 'addrs' | 'svcCidrs';
const tracked = (m: L.MapName): m is Tracked => m === 'addrs' || m === 'svcCidrs';
const FAMILIES: readonly IPFamily[] = ['IPv4', 'IPv6'];

interface FamilyBits {
  bits: F.HotBits;
  /** The keys counted, by map and key (L.keyOf). */
  keys: Map<string, number[] | 'all'>;
  /** What kpt_hot holds: header then words, 8 bytes each. */
  written: Uint8Array;
}

export interface HotMaps {
  readonly hot: BpfMap;
  readonly addrs: BpfMap;
  readonly svcCidrs: BpfMap;
}

export class HotFilter {
  private fam = new Map<IPFamily, FamilyBits>();

  constructor(private readonly maps: HotMaps) {
    this.rebuild();
  }

  /** Count every key the two maps hold now and write kpt_hot to match. */
  rebuild(): void {
    this.fam = new Map(
      FAMILIES.map((f) => [
        f,
        { bits: new F.HotBits(), keys: new Map(), written: new Uint8Array(F.HOT_STRIDE * 8).fill(0xff) },
      ]),
    );
    for (const m of ['addrs', 'svcCidrs'] as const) for (const [k] of this.maps[m].dump()) this.count(m, k, true);
    this.flush();
  }

  /** Before ops are written: the bits of every key they add. Returns whether any op concerns the filter. */
  before(ops: ReadonlyArray<{ readonly map: L.MapName; readonly op: string; readonly key: Uint8Array }>): boolean {
    let any = false;
    for (const o of ops) {
      if (!tracked(o.map)) continue;
      any = true;
      if (o.op !== 'delete') this.count(o.map, o.key, true);
    }
    if (any) this.flush();
    return any;
  }

  /** After they were written: the keys they removed go. */
  after(ops: readonly MapOp[]): void {
    for (const o of ops) if (tracked(o.map) && o.op === 'delete') this.count(o.map, o.key, false);
    this.flush();
  }

  private count(map: Tracked, key: Uint8Array, add: boolean): void {
    const f = this.fam.get(L.familyOfEntry(map, key))!;
    const id = `${map}|${L.keyOf(key)}`;
    const had = f.keys.get(id);
    if (add) {
      if (had !== undefined) return;
      const bits = F.hotBitsOfKey(map, key);
      f.keys.set(id, bits);
      f.bits.add(bits);
    } else if (had !== undefined) {
      f.keys.delete(id);
      f.bits.remove(had);
    }
  }

  /** Write the words of kpt_hot that differ from what it holds, header last. */
  private flush(): void {
    FAMILIES.forEach((family, fi) => {
      const f = this.fam.get(family)!;
      const base = fi * F.HOT_STRIDE;
      const writes: Array<[Uint8Array, Uint8Array]> = [];
      for (let w = 0; w < F.HOT_WORDS; w++) {
        const now = f.bits.word(w);
        const at = (1 + w) * 8;
        if (sameBytes(now, f.written.subarray(at, at + 8))) continue;
        writes.push([L.encodeU32(base + 1 + w), new Uint8Array(now)]);
        f.written.set(now, at);
      }
      const header = u64(f.bits.header());
      if (!sameBytes(header, f.written.subarray(0, 8))) {
        writes.push([L.encodeU32(base), header]);
        f.written.set(header, 0);
      }
      if (writes.length) this.maps.hot.updateMany(writes);
    });
  }
}

/**
 * Set SEEN_COMPLETE when every entry of kpt_ct carries its kpt_seen mark (a
 * reply entry: its source; an original: its destination). Returns whether
 * the header says complete now.
 */
export function trustSeen(seen: BpfMap, ct: BpfMap): boolean {
  const header = seen.lookup(L.encodeU32(0));
  if (header && (header[0]! & F.SEEN_COMPLETE) !== 0) return true;
  const words = new Map<number, Uint8Array | null>();
  for (const [k, v] of ct.dump()) {
    const reply = (L.decodeCtValue(v).flags & L.CT_REPLY) !== 0;
    const addr = reply ? k.subarray(0, 16) : k.subarray(16, 32); // ct_key: saddr, daddr
    const { index, bit } = F.seenSlot(reply ? F.SEEN_REPLY_SRC : F.SEEN_ORIG_DST, addr);
    if (!words.has(index)) words.set(index, seen.lookup(L.encodeU32(index)));
    const w = words.get(index);
    if (!w || (w[bit >> 3]! & (1 << (bit & 7))) === 0) return false;
  }
  seen.update(L.encodeU32(0), u64(F.SEEN_COMPLETE));
  return true;
}

function u64(n: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setUint32(0, n, true);
  return b;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
