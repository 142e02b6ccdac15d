// Netlink messages (struct nlmsghdr, 16 bytes, host byte order): length,
// type, flags, sequence number, port id; then a family header (nfgenmsg,
// genlmsghdr, ifinfomsg, ...) and attributes.
import { encodeAttrs, type Attr } from './attr.js';

export const NLMSG_NOOP = 1;
export const NLMSG_ERROR = 2;
export const NLMSG_DONE = 3;
export const NLMSG_HDRLEN = 16;

export const NLM_F = {
  REQUEST: 0x1,
  MULTI: 0x2,
  ACK: 0x4,
  ECHO: 0x8,
  // GET requests
  ROOT: 0x100,
  MATCH: 0x200,
  DUMP: 0x300,
  // NEW requests
  REPLACE: 0x100,
  EXCL: 0x200,
  CREATE: 0x400,
  APPEND: 0x800,
} as const;

/** Encode one message: header, the family header bytes, then the attributes. */
export function encodeMessage(
  type: number,
  flags: number,
  seq: number,
  familyHeader: Buffer,
  attrs: readonly Attr[] = [],
): Buffer {
  const body = encodeAttrs(attrs);
  const fh = (familyHeader.length + 3) & ~3;
  const out = Buffer.alloc(NLMSG_HDRLEN + fh + body.length);
  out.writeUInt32LE(out.length, 0);
  out.writeUInt16LE(type, 4);
  out.writeUInt16LE(flags, 6);
  out.writeUInt32LE(seq >>> 0, 8);
  out.writeUInt32LE(0, 12); // to the kernel
  familyHeader.copy(out, NLMSG_HDRLEN);
  body.copy(out, NLMSG_HDRLEN + fh);
  return out;
}

/** One received message; `payload` is everything after the nlmsghdr. */
export interface NetlinkMessage {
  readonly type: number;
  readonly flags: number;
  readonly seq: number;
  readonly payload: Buffer;
}

/** Split a datagram into messages (several per datagram in dumps and acks). */
export function parseMessages(buf: Buffer, n = buf.length): NetlinkMessage[] {
  const out: NetlinkMessage[] = [];
  let off = 0;
  while (off + NLMSG_HDRLEN <= n) {
    const len = buf.readUInt32LE(off);
    if (len < NLMSG_HDRLEN || off + len > n) break;
    out.push({
      type: buf.readUInt16LE(off + 4),
      flags: buf.readUInt16LE(off + 6),
      seq: buf.readUInt32LE(off + 8),
      payload: buf.subarray(off + NLMSG_HDRLEN, off + len),
    });
    off += (len + 3) & ~3;
  }
  return out;
}

/** The errno of an NLMSG_ERROR message: 0 is an ack, > 0 a failure (positive errno). */
export function errorCode(m: NetlinkMessage): number {
  return m.payload.length >= 4 ? -m.payload.readInt32LE(0) : 0;
}

/** errno numbers we branch on (Linux, all architectures we run on). */
export const ERRNO = {
  EPERM: 1,
  ENOENT: 2,
  ESRCH: 3,
  EINTR: 4,
  EAGAIN: 11,
  ENOMEM: 12,
  EBUSY: 16,
  EEXIST: 17,
  ENODEV: 19,
  EINVAL: 22,
  ERANGE: 34,
  EOPNOTSUPP: 95,
  EADDRNOTAVAIL: 99,
  EPROTONOSUPPORT: 93,
} as const;

const NAMES: Record<number, string> = Object.fromEntries(Object.entries(ERRNO).map(([k, v]) => [v, k]));

/** "EEXIST (17)" for messages. */
export function errnoName(e: number): string {
  const n = NAMES[e];
  return n === undefined ? `errno ${e}` : `${n} (${e})`;
}
