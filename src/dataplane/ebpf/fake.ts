// Fake: the ebpf mode's BPF maps in memory, with the kernel's rules for the
// operations the proxy and the tracer use:
//   - keys and values must have the map's exact sizes (EINVAL);
//   - a hash map refuses a new key when full (E2BIG); an LRU hash map
//     evicts its least recently used entry instead (lookups and updates
//     count as use);
//   - an LPM trie is looked up longest-prefix with a full-length key, takes
//     only prefix lengths within the key (EINVAL), and refuses a new prefix
//     when full (ENOSPC);
//   - an array has every index below max_entries, zero-filled; indexes
//     beyond refuse (E2BIG) and nothing can be deleted (EINVAL);
//   - deleting an absent key is ENOENT;
//   - a per-CPU map holds one value per key: what the platform reads back
//     from the kernel, the sum over the CPUs.
// Like the kernel, a batch of operations is not atomic: apply() stops at the
// first failure and what ran before it stays. print() lists what it holds.
import { entryText } from './describe.js';
import { HOT_STRIDE, SEEN_WORDS } from './abi.js';
import { hex, MAP_NAMES, MAPS, type MapName, type MapSpec, unhex } from './layout.js';
import type { MapOp, MapStore } from './store.js';
import { ProxyError } from '../../core/errors.js';

export const ERRNO = { ENOENT: 2, E2BIG: 7, EINVAL: 22, ENOSPC: 28 } as const;

export class FakeError extends ProxyError {
  constructor(
    readonly errno: number,
    message: string,
  ) {
    super(errno === ERRNO.ENOENT ? 'KPT_NOT_FOUND' : 'KPT_SYNC_FAILED', message);
    this.name = 'FakeError';
  }
}

export interface FakeOptions {
  /** max_entries per map (default: the sizes in src/bpf/maps.h). */
  readonly maxEntries?: Partial<Record<MapName, number>>;
  /** Maglev table size (the kpt_maglev value is two bytes per entry); default 16381. */
  readonly maglevM?: number;
}

const DEFAULT_MAX: Record<MapName, number> = {
  svc: 262144,
  addrs: 262144,
  sets: 524288,
  eps: 1048576,
  members: 1048576,
  maglev: 65536,
  affinity: 65536,
  lbSrc: 65536,
  podCidrs: 1024,
  svcCidrs: 1024,
  ifaces: 65536,
  cfg: 2,
  ct: 262144,
  sock: 65536,
  names: 262144,
  stats: 14,
  traffic: 65536,
  hot: 2 * HOT_STRIDE,
  seen: 1 + 2 * SEEN_WORDS,
  frag: 8192,
};

class FakeMap {
  /** hex key -> value; Map keeps insertion order, which doubles as LRU order. */
  readonly data = new Map<string, Uint8Array>();

  constructor(
    readonly name: MapName,
    readonly spec: MapSpec,
    readonly valueSize: number,
    readonly max: number,
  ) {}

  private check(key: Uint8Array, value?: Uint8Array): void {
    if (key.length !== this.spec.keySize)
      throw new FakeError(ERRNO.EINVAL, `${this.spec.name}: key of ${key.length} bytes, want ${this.spec.keySize}`);
    if (value && value.length !== this.valueSize)
      throw new FakeError(ERRNO.EINVAL, `${this.spec.name}: value of ${value.length} bytes, want ${this.valueSize}`);
    if (this.spec.kind === 'lpm_trie') {
      const bits = new DataView(key.buffer, key.byteOffset).getUint32(0, true);
      if (bits > (this.spec.keySize - 4) * 8) throw new FakeError(ERRNO.EINVAL, `${this.spec.name}: prefix ${bits}`);
    }
    if (this.isArray() && this.index(key) >= this.max)
      throw new FakeError(ERRNO.E2BIG, `${this.spec.name}: index ${this.index(key)} >= ${this.max}`);
  }

  private isArray(): boolean {
    return this.spec.kind === 'array' || this.spec.kind === 'percpu_array';
  }
  private index(key: Uint8Array): number {
    return new DataView(key.buffer, key.byteOffset).getUint32(0, true);
  }

  update(key: Uint8Array, value: Uint8Array): void {
    this.check(key, value);
    const k = hex(key);
    if (this.data.has(k))
      this.data.delete(k); // re-inserted: most recently used
    else if (!this.isArray() && this.data.size >= this.max) {
      if (this.spec.kind === 'lru_hash') this.data.delete(this.data.keys().next().value!);
      else
        throw new FakeError(
          this.spec.kind === 'lpm_trie' ? ERRNO.ENOSPC : ERRNO.E2BIG,
          `${this.spec.name}: full (${this.max} entries)`,
        );
    }
    this.data.set(k, new Uint8Array(value));
  }

  delete(key: Uint8Array): void {
    this.check(key);
    if (this.isArray()) throw new FakeError(ERRNO.EINVAL, `${this.spec.name}: arrays cannot delete`);
    if (!this.data.delete(hex(key))) throw new FakeError(ERRNO.ENOENT, `${this.spec.name}: no such key`);
  }

  lookup(key: Uint8Array): Uint8Array | null {
    this.check(key);
    if (this.spec.kind === 'lpm_trie') return this.lpm(key);
    const k = hex(key);
    const v = this.data.get(k);
    if (v === undefined) return this.isArray() ? new Uint8Array(this.valueSize) : null;
    if (this.spec.kind === 'lru_hash') {
      this.data.delete(k);
      this.data.set(k, v);
    }
    return v;
  }

  /** Longest stored prefix covering the key's address (bytes after the 4-byte prefix length). */
  private lpm(key: Uint8Array): Uint8Array | null {
    const want = key.subarray(4);
    let best: Uint8Array | null = null;
    let bestBits = -1;
    for (const [k, v] of this.data) {
      const stored = unhex(k);
      const bits = new DataView(stored.buffer).getUint32(0, true);
      if (bits <= bestBits || !prefixMatch(stored.subarray(4), want, bits)) continue;
      best = v;
      bestBits = bits;
    }
    return best;
  }
}

function prefixMatch(a: Uint8Array, b: Uint8Array, bits: number): boolean {
  for (let i = 0; i < Math.floor(bits / 8); i++) if (a[i] !== b[i]) return false;
  const rest = bits % 8;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  const i = Math.floor(bits / 8);
  return (a[i]! & mask) === (b[i]! & mask);
}

export class Fake implements MapStore {
  private readonly maps = new Map<MapName, FakeMap>();
  /** Operations applied, for tests that count writes. */
  opsApplied = 0;

  constructor(opts: FakeOptions = {}) {
    for (const name of MAP_NAMES) {
      const spec = MAPS[name];
      const valueSize = name === 'maglev' ? 2 * (opts.maglevM ?? 16381) : spec.valueSize;
      this.maps.set(name, new FakeMap(name, spec, valueSize, opts.maxEntries?.[name] ?? DEFAULT_MAX[name]));
    }
  }

  private map(name: MapName): FakeMap {
    return this.maps.get(name)!;
  }

  lookup(map: MapName, key: Uint8Array): Uint8Array | null {
    return this.map(map).lookup(key);
  }

  dump(map: MapName): Array<[Uint8Array, Uint8Array]> {
    return [...this.map(map).data].map(([k, v]) => [unhex(k), v]);
  }

  /** Entries of a map (arrays: only the indexes ever written). */
  size(map: MapName): number {
    return this.map(map).data.size;
  }

  apply(ops: readonly MapOp[]): void {
    for (const op of ops) {
      if (op.op === 'update') this.map(op.map).update(op.key, op.value!);
      else this.map(op.map).delete(op.key);
      this.opsApplied++;
    }
  }

  /** Every rendered map's entries, one line each, sorted within a map. */
  print(maps: readonly MapName[] = MAP_NAMES.filter((m) => MAPS[m].rendered)): string {
    const out: string[] = [];
    for (const m of maps) {
      const lines = this.dump(m)
        .map(([k, v]) => entryText(m, k, v))
        .sort();
      if (lines.length === 0) continue;
      out.push(`${MAPS[m].name}:`, ...lines.map((l) => `  ${l}`));
    }
    return out.join('\n');
  }
}
