// One BPF map, by file descriptor: element reads and writes, batched where
// the kernel supports it, and a full dump. Keys and values are raw bytes in
// the layout of src/bpf/abi.h (src/dataplane/ebpf/abi.ts). Per-CPU maps (their values are
// 64-bit counters) read as the sum over every possible CPU, field by field,
// and a write puts the value on the first CPU and zero on the others, so
// that what is written reads back unchanged.
import { BpfError, libbpf, objInfo } from './libbpf.js';

export const BPF_ANY = 0n;
const ENOENT = 2;

export interface MapInfo {
  readonly type: number;
  readonly id: number;
  readonly keySize: number;
  readonly valueSize: number;
  readonly maxEntries: number;
  readonly flags: number;
  readonly name: string;
}

/** bpf_map_info of an fd (type, id, sizes, flags, name). */
export function mapInfo(fd: number): MapInfo {
  const info = objInfo(fd, 96, 'map');
  const nameEnd = info.indexOf(0, 24);
  return {
    type: info.readUInt32LE(0),
    id: info.readUInt32LE(4),
    keySize: info.readUInt32LE(8),
    valueSize: info.readUInt32LE(12),
    maxEntries: info.readUInt32LE(16),
    flags: info.readUInt32LE(20),
    name: info.toString('latin1', 24, nameEnd < 0 || nameEnd > 40 ? 40 : nameEnd),
  };
}

export const BPF_MAP_TYPE = { hash: 1, array: 2, percpu_hash: 5, percpu_array: 6, lru_hash: 9, lpm_trie: 11 } as const;

export class BpfMap {
  private readonly kbuf: Buffer;
  private readonly vbuf: Buffer;
  /** Per-CPU map: the kernel reads and writes one value per possible CPU, each 8-byte aligned. */
  private readonly cpus: number;

  constructor(
    readonly name: string,
    readonly fd: number,
    readonly keySize: number,
    readonly valueSize: number,
    readonly type: number,
  ) {
    const percpu = type === BPF_MAP_TYPE.percpu_hash || type === BPF_MAP_TYPE.percpu_array;
    this.cpus = percpu ? Math.max(1, libbpf().libbpf_num_possible_cpus()) : 0;
    this.kbuf = Buffer.alloc(keySize);
    this.vbuf = Buffer.alloc(percpu ? this.stride * this.cpus : valueSize);
  }

  private get stride(): number {
    return Math.ceil(this.valueSize / 8) * 8;
  }

  static ofFd(fd: number): BpfMap {
    const i = mapInfo(fd);
    return new BpfMap(i.name, fd, i.keySize, i.valueSize, i.type);
  }

  update(key: Uint8Array, value: Uint8Array, flags = BPF_ANY): void {
    this.kbuf.set(key);
    if (this.cpus > 0) this.vbuf.fill(0);
    this.vbuf.set(value);
    const rc = libbpf().bpf_map_update_elem(this.fd, this.kbuf, this.vbuf, flags);
    if (rc < 0) throw new BpfError(`update ${this.name}`, -rc);
  }

  /** The value, or null when the key is absent. */
  lookup(key: Uint8Array): Uint8Array | null {
    this.kbuf.set(key);
    const rc = libbpf().bpf_map_lookup_elem(this.fd, this.kbuf, this.vbuf);
    if (rc === -ENOENT) return null;
    if (rc < 0) throw new BpfError(`lookup ${this.name}`, -rc);
    if (this.cpus > 0) return this.sumOverCpus();
    return new Uint8Array(this.vbuf);
  }

  /** vbuf of a per-CPU lookup: each 8-byte field summed over the CPUs. */
  private sumOverCpus(): Uint8Array {
    const out = Buffer.alloc(this.valueSize);
    for (let off = 0; off + 8 <= this.valueSize; off += 8) {
      let sum = 0n;
      for (let c = 0; c < this.cpus; c++) sum += this.vbuf.readBigUInt64LE(c * this.stride + off);
      out.writeBigUInt64LE(BigInt.asUintN(64, sum), off);
    }
    return new Uint8Array(out);
  }

  /** A per-CPU array slot, summed over every possible CPU (8-byte counters). */
  lookupPercpuSum(index: number): bigint {
    const key = Buffer.alloc(4);
    key.writeUInt32LE(index);
    const v = this.lookup(key);
    return v ? new DataView(v.buffer, v.byteOffset).getBigUint64(0, true) : 0n;
  }

  /** True when something was deleted. */
  delete(key: Uint8Array): boolean {
    this.kbuf.set(key);
    const rc = libbpf().bpf_map_delete_elem(this.fd, this.kbuf);
    if (rc === -ENOENT) return false;
    if (rc < 0) throw new BpfError(`delete ${this.name}`, -rc);
    return true;
  }

  /**
   * Write many entries with one BPF_MAP_UPDATE_BATCH (hash maps), falling
   * back to one update per entry where batches are not supported.
   */
  updateMany(entries: ReadonlyArray<readonly [Uint8Array, Uint8Array]>): void {
    if (entries.length === 0) return;
    const keys = Buffer.alloc(entries.length * this.keySize);
    const values = Buffer.alloc(entries.length * this.valueSize);
    entries.forEach(([k, v], i) => {
      keys.set(k, i * this.keySize);
      values.set(v, i * this.valueSize);
    });
    this.updatePacked(keys, values, entries.length);
  }

  /** Whether BPF_MAP_UPDATE_BATCH takes this map's entries (not LPM tries; per-CPU values are written one by one). */
  get batches(): boolean {
    return this.type !== BPF_MAP_TYPE.lpm_trie && this.cpus === 0;
  }

  /**
   * Write `count` entries packed back to back: keys[i * keySize] with
   * values[i * valueSize], in one BPF_MAP_UPDATE_BATCH where the map takes
   * batches, else one update each.
   */
  updatePacked(keys: Buffer, values: Buffer, count: number): void {
    if (count === 0) return;
    if (count === 1 || !this.batches) {
      for (let i = 0; i < count; i++)
        this.update(
          keys.subarray(i * this.keySize, (i + 1) * this.keySize),
          values.subarray(i * this.valueSize, (i + 1) * this.valueSize),
        );
      return;
    }
    const n = Buffer.alloc(4);
    n.writeUInt32LE(count);
    const rc = libbpf().bpf_map_update_batch(this.fd, keys, values, n, null);
    if (rc < 0) throw new BpfError(`update batch ${this.name}`, -rc, `${n.readUInt32LE(0)} of ${count} written`);
  }

  /** Delete many keys; absent keys are not an error. */
  deleteMany(keys: readonly Uint8Array[]): void {
    for (const k of keys) this.delete(k);
  }

  /** Every entry (keys and values copied). Uses get_next_key: maps we dump are small or rarely dumped. */
  dump(): Array<[Uint8Array, Uint8Array]> {
    if (this.type === BPF_MAP_TYPE.hash || this.type === BPF_MAP_TYPE.lru_hash) {
      const batched = this.dumpBatch();
      if (batched) return batched;
    }
    const out: Array<[Uint8Array, Uint8Array]> = [];
    const cur = Buffer.alloc(this.keySize);
    const next = Buffer.alloc(this.keySize);
    let first = true;
    for (;;) {
      const rc = libbpf().bpf_map_get_next_key(this.fd, first ? null : cur, next);
      if (rc === -ENOENT) break;
      if (rc < 0) throw new BpfError(`get_next_key ${this.name}`, -rc);
      first = false;
      next.copy(cur);
      const v = this.lookup(cur);
      if (v) out.push([new Uint8Array(cur), v]);
    }
    return out;
  }

  /** BPF_MAP_LOOKUP_BATCH in chunks; null when the kernel refuses batches for this map. */
  private dumpBatch(): Array<[Uint8Array, Uint8Array]> | null {
    const chunk = 4096;
    const out: Array<[Uint8Array, Uint8Array]> = [];
    const keys = Buffer.alloc(chunk * this.keySize);
    const values = Buffer.alloc(chunk * this.valueSize);
    const inBatch = Buffer.alloc(Math.max(8, this.keySize));
    const outBatch = Buffer.alloc(Math.max(8, this.keySize));
    const count = Buffer.alloc(4);
    let first = true;
    for (;;) {
      count.writeUInt32LE(chunk);
      const rc = libbpf().bpf_map_lookup_batch(this.fd, first ? null : inBatch, outBatch, keys, values, count, null);
      const n = count.readUInt32LE(0);
      if (rc < 0 && -rc !== ENOENT) {
        if (first && (-rc === 22 || -rc === 95 || -rc === 524)) return null;
        throw new BpfError(`lookup batch ${this.name}`, -rc);
      }
      for (let i = 0; i < n; i++) {
        out.push([
          new Uint8Array(keys.subarray(i * this.keySize, (i + 1) * this.keySize)),
          new Uint8Array(values.subarray(i * this.valueSize, (i + 1) * this.valueSize)),
        ]);
      }
      if (rc < 0) break; // ENOENT: that was the last chunk
      outBatch.copy(inBatch);
      first = false;
    }
    return out;
  }
}
