// A netlink batch written straight into buffers: message headers, attributes
// and nested attributes, with lengths patched when each closes.
// A cold sync is one message per object, very many in a large cluster;
// building attribute trees of small Buffers first (the generic codec in
// ../netlink/attr.ts) costs several times more, so the nf_tables encoder
// writes through this instead.
//
// Memory: the bytes go into chunks of `chunkSize` (1 MiB for a batch), never
// into one buffer that doubles: a large cluster's batch is big, and a
// doubling buffer holds up to twice that plus the copy made at the last
// growth (bench/README.md, memory). A message never straddles two chunks
// (when one does not fit, its bytes so far move to a fresh chunk), and the
// chunks go to the kernel as one datagram with writev (NetlinkSocket.sendv).
// Positions returned by nest() count from the start of the batch, so they
// survive such a move.
//
// Byte order: the nlmsghdr and nlattr headers are host order (little-endian
// on every supported host); nf_tables payloads are mostly network order,
// hence u32be/i32be/u64be. Registers of meta mark, ct state and the like
// carry host-order values, written with u32le.
import { ProxyError } from '../../core/errors.js';
import { NLMSG_HDRLEN } from '../netlink/message.js';

const NLA_F_NESTED = 0x8000;

export class NlWriter {
  /** Finished chunks, each cut to its written bytes. */
  private readonly done: Buffer[] = [];
  /** Bytes in `done`: the batch offset of buf[0]. */
  private base = 0;
  private buf: Buffer;
  private off = 0;
  /** Start of the open message in `buf`, -1 between messages. */
  private msgStart = -1;

  constructor(private readonly chunkSize = 1 << 16) {
    this.buf = Buffer.alloc(chunkSize);
  }

  /** Bytes written so far. */
  get length(): number {
    return this.base + this.off;
  }

  /** Make room for `n` more bytes in the current chunk. */
  private room(n: number): void {
    if (this.off + n <= this.buf.length) return;
    // Move the open message (if any) to a new chunk; the current one ends before it.
    const keepFrom = this.msgStart >= 0 ? this.msgStart : this.off;
    const carried = this.off - keepFrom;
    const next = Buffer.alloc(Math.max(this.chunkSize, 2 * (carried + n)));
    this.buf.copy(next, 0, keepFrom, this.off);
    if (keepFrom > 0) this.done.push(this.buf.subarray(0, keepFrom));
    this.base += keepFrom;
    this.buf = next;
    this.off = carried;
    if (this.msgStart >= 0) this.msgStart = 0;
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

  /** Open a nested attribute (inside a message); pass the result to close(). */
  nest(type: number): number {
    this.room(4);
    const at = this.off;
    this.buf.writeUInt16LE(type | NLA_F_NESTED, at + 2);
    this.off += 4;
    return this.base + at;
  }

  close(at: number): this {
    const len = this.length - at;
    if (len > 0xffff)
      throw new ProxyError('KPT_UNSUPPORTED', `netlink attribute of ${len} bytes does not fit its 16-bit length`);
    this.buf.writeUInt16LE(len, at - this.base);
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

  /** The bytes written so far, in order (copy-free views; send them with writev as one datagram). */
  chunks(): Buffer[] {
    return this.off > 0 ? [...this.done, this.buf.subarray(0, this.off)] : [...this.done];
  }

  /** The bytes written so far as one buffer (a copy-free view when they fit one chunk). */
  view(): Buffer {
    return this.done.length === 0 ? this.buf.subarray(0, this.off) : Buffer.concat(this.chunks());
  }
}
