// Netlink attributes (struct nlattr): a 4-byte header in host byte order
// (length including the header, then the type with NLA_F_NESTED for nested
// lists), the payload, and padding to 4 bytes. One codec for every netlink
// family we speak: nf_tables, generic netlink (IPVS), rtnetlink.
//
// Payload byte order is the family's business: nf_tables and IPVS ports and
// addresses are network order (the `*be` builders), IPVS and rtnetlink
// integers are host order (the plain builders; every supported host is
// little-endian, as Node's own Buffer users assume).

export const NLA_F_NESTED = 0x8000;
export const NLA_F_NET_BYTEORDER = 0x4000;
const NLA_TYPE_MASK = ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER) & 0xffff;

/** One attribute: a leaf with raw bytes, or a nested list. */
export type Attr =
  { readonly type: number; readonly value: Buffer } | { readonly type: number; readonly nested: Attr[] };

export const attr = (type: number, value: Buffer): Attr => ({ type, value });
export const nested = (type: number, list: Attr[]): Attr => ({ type, nested: list });

export function u8(n: number): Buffer {
  return Buffer.from([n & 0xff]);
}
export function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(n & 0xffff);
  return b;
}
export function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b;
}
export function u16be(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n & 0xffff);
  return b;
}
export function u32be(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}
export function i32be(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
}
/** A NUL-terminated string (NLA_NUL_STRING / NLA_STRING as the kernel expects them). */
export function str(s: string): Buffer {
  return Buffer.concat([Buffer.from(s, 'utf8'), Buffer.alloc(1)]);
}

/** Encoded size of a list, to size one buffer up front. */
function sizeOf(list: readonly Attr[]): number {
  let n = 0;
  for (const a of list) n += 4 + ((('value' in a ? a.value.length : sizeOf(a.nested)) + 3) & ~3);
  return n;
}

function writeAttrs(list: readonly Attr[], out: Buffer, off: number): number {
  for (const a of list) {
    const start = off;
    off += 4;
    if ('value' in a) {
      a.value.copy(out, off);
      off += a.value.length;
    } else {
      off = writeAttrs(a.nested, out, off);
    }
    out.writeUInt16LE(off - start, start);
    out.writeUInt16LE('nested' in a ? a.type | NLA_F_NESTED : a.type, start + 2);
    off = (off + 3) & ~3; // padding bytes are already zero (Buffer.alloc)
  }
  return off;
}

export function encodeAttrs(list: readonly Attr[]): Buffer {
  const out = Buffer.alloc(sizeOf(list));
  writeAttrs(list, out, 0);
  return out;
}

/**
 * A decoded attribute list: the last occurrence of each type (what the kernel
 * and libnl do), plus the raw entries in order for lists of repeated types.
 */
export class Attrs {
  readonly entries: ReadonlyArray<{ readonly type: number; readonly value: Buffer }>;
  private readonly byType = new Map<number, Buffer>();

  constructor(buf: Buffer, start = 0, end = buf.length) {
    const entries: Array<{ type: number; value: Buffer }> = [];
    let off = start;
    while (off + 4 <= end) {
      const len = buf.readUInt16LE(off);
      if (len < 4 || off + len > end) break; // truncated: keep what parsed
      const type = buf.readUInt16LE(off + 2) & NLA_TYPE_MASK;
      const value = buf.subarray(off + 4, off + len);
      entries.push({ type, value });
      this.byType.set(type, value);
      off += (len + 3) & ~3;
    }
    this.entries = entries;
  }

  has(type: number): boolean {
    return this.byType.has(type);
  }
  raw(type: number): Buffer | undefined {
    return this.byType.get(type);
  }
  nested(type: number): Attrs | undefined {
    const v = this.byType.get(type);
    return v === undefined ? undefined : new Attrs(v);
  }
  u8(type: number): number | undefined {
    const v = this.byType.get(type);
    return v && v.length >= 1 ? v.readUInt8(0) : undefined;
  }
  u16(type: number): number | undefined {
    const v = this.byType.get(type);
    return v && v.length >= 2 ? v.readUInt16LE(0) : undefined;
  }
  u16be(type: number): number | undefined {
    const v = this.byType.get(type);
    return v && v.length >= 2 ? v.readUInt16BE(0) : undefined;
  }
  u32(type: number): number | undefined {
    const v = this.byType.get(type);
    return v && v.length >= 4 ? v.readUInt32LE(0) : undefined;
  }
  u32be(type: number): number | undefined {
    const v = this.byType.get(type);
    return v && v.length >= 4 ? v.readUInt32BE(0) : undefined;
  }
  /** A string attribute without its terminating NUL. */
  str(type: number): string | undefined {
    const v = this.byType.get(type);
    if (v === undefined) return undefined;
    const nul = v.indexOf(0);
    return v.toString('utf8', 0, nul < 0 ? v.length : nul);
  }
}
