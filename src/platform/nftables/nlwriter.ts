// A netlink batch written straight into one growing buffer: message headers,
// attributes and nested attributes, with lengths patched when each closes.
// A cold sync at 20k Services is ~200k messages; building attribute trees of
// small Buffers first (the generic codec in ../netlink/attr.ts) costs several
// times more, so the nf_tables encoder writes through this instead.
//
// Byte order: the nlmsghdr and nlattr headers are host order (little-endian
// on every supported host); nf_tables payloads are mostly network order,
// hence u32be/i32be/u64be. Registers of meta mark, ct state and the like
// carry host-order values, written with u32le.
import { NLMSG_HDRLEN } from '../netlink/message.js';

const NLA_F_NESTED = 0x8000;

export class NlWriter {
  private buf: Buffer;
  private off = 0;
  private msgStart = -1;

  constructor(initial = 1 << 16) {
    this.buf = Buffer.alloc(initial);
  }

  get length(): number {
    return this.off;
  }

  private room(n: number): void {
    if (this.off + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.off + n) size *= 2;
    const next = Buffer.alloc(size);
    this.buf.copy(next, 0, 0, this.off);
    this.buf = next;
  }

  /** Start a message: nlmsghdr (length patched by end()) + nfgenmsg. */
  begin(type: number, flags: number, seq: number, family: number, resId: number): this {
    this.room(NLMSG_HDRLEN + 4);
    const o = this.off;
    this.msgStart = o;
    this.buf.writeUInt32LE(0, o);
    this.buf.writeUInt16LE(type, o + 4);
    this.buf.writeUInt16LE(flags, o + 6);
    this.buf.writeUInt32LE(seq >>> 0, o + 8);
    this.buf.writeUInt32LE(0, o + 12);
    this.buf.writeUInt8(family, o + 16);
    this.buf.writeUInt8(0, o + 17);
    this.buf.writeUInt16BE(resId, o + 18);
    this.off = o + NLMSG_HDRLEN + 4;
    return this;
  }

  /** Close the current message. */
  end(): this {
    this.buf.writeUInt32LE(this.off - this.msgStart, this.msgStart);
    this.msgStart = -1;
    return this;
  }

  /** Open a nested attribute; pass the result to close(). */
  nest(type: number): number {
    this.room(4);
    const at = this.off;
    this.buf.writeUInt16LE(type | NLA_F_NESTED, at + 2);
    this.off += 4;
    return at;
  }

  close(at: number): this {
    const len = this.off - at;
    if (len > 0xffff) throw new RangeError(`netlink attribute of ${len} bytes does not fit its 16-bit length`);
    this.buf.writeUInt16LE(len, at);
    return this;
  }

  /** An attribute with raw bytes. */
  bytes(type: number, v: Uint8Array): this {
    const len = 4 + v.length;
    const padded = (len + 3) & ~3;
    this.room(padded);
    this.buf.writeUInt16LE(len, this.off);
    this.buf.writeUInt16LE(type, this.off + 2);
    this.buf.set(v, this.off + 4);
    this.buf.fill(0, this.off + len, this.off + padded);
    this.off += padded;
    return this;
  }

  /** A NUL-terminated string attribute. */
  str(type: number, s: string): this {
    const n = Buffer.byteLength(s);
    const len = 4 + n + 1;
    const padded = (len + 3) & ~3;
    this.room(padded);
    this.buf.writeUInt16LE(len, this.off);
    this.buf.writeUInt16LE(type, this.off + 2);
    this.buf.write(s, this.off + 4);
    this.buf.fill(0, this.off + 4 + n, this.off + padded);
    this.off += padded;
    return this;
  }

  private fixed(type: number, size: number): number {
    this.room(4 + ((size + 3) & ~3));
    this.buf.writeUInt16LE(4 + size, this.off);
    this.buf.writeUInt16LE(type, this.off + 2);
    const at = this.off + 4;
    this.off += 4 + ((size + 3) & ~3);
    return at;
  }

  // Each writer takes the offset first: fixed() may replace this.buf.
  u32be(type: number, v: number): this {
    const at = this.fixed(type, 4);
    this.buf.writeUInt32BE(v >>> 0, at);
    return this;
  }
  i32be(type: number, v: number): this {
    const at = this.fixed(type, 4);
    this.buf.writeInt32BE(v, at);
    return this;
  }
  u32le(type: number, v: number): this {
    const at = this.fixed(type, 4);
    this.buf.writeUInt32LE(v >>> 0, at);
    return this;
  }
  u64be(type: number, v: number): this {
    const at = this.fixed(type, 8);
    this.buf.writeBigUInt64BE(BigInt(v), at);
    return this;
  }
  u8(type: number, v: number): this {
    const at = this.fixed(type, 1);
    this.buf.writeUInt8(v, at);
    this.buf.fill(0, at + 1, at + 4);
    return this;
  }

  /** The bytes written so far (a copy-free view). */
  view(): Buffer {
    return this.buf.subarray(0, this.off);
  }
}
