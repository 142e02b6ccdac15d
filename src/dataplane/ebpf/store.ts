// The interface between the ebpf renderer/tracer and a set of BPF maps,
// real (src/platform/ebpf) or fake (fake.ts): raw keys and values in the
// layout of src/bpf/abi.h (abi.ts describes it, layout.ts encodes them).
import type { MapName } from './layout.js';

export interface MapOp {
  readonly map: MapName;
  readonly op: 'update' | 'delete';
  readonly key: Uint8Array;
  /** For updates. */
  readonly value?: Uint8Array;
}

export interface MapReader {
  /**
   * The value stored under key, or null. For LPM tries the key carries the
   * full prefix length and the lookup is longest-prefix, as the programs' is.
   */
  lookup(map: MapName, key: Uint8Array): Uint8Array | null;
  /** Every entry of a map. */
  dump(map: MapName): Array<[Uint8Array, Uint8Array]>;
}

export interface MapStore extends MapReader {
  /** Apply in order; throws on the first failure (what was applied stays applied). */
  apply(ops: readonly MapOp[]): void;
}
