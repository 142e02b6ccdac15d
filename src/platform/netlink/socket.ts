// A netlink socket through koffi and libc (no native addon of our own): one
// synchronous request/response channel per protocol and network namespace.
// Shared by the nf_tables fast path, IPVS (generic netlink), rtnetlink
// (kube-ipvs0 and its addresses) and ipset.
//
// Calls block the event loop for the few milliseconds a sync's exchange
// takes, as an `execFileSync` would, but without a process per call. Every
// receive is bounded by SO_RCVTIMEO, so a lost reply is a bounded failure.
import { closeSync, openSync, writev, writevSync } from 'node:fs';
import { ProxyError } from '../../core/errors.js';
import { injectedFault } from '../faults.js';
import { errorCode, NLMSG_DONE, NLMSG_ERROR, parseMessages, type NetlinkMessage } from './message.js';

/** Netlink protocol numbers (socket(AF_NETLINK, SOCK_RAW, protocol)). */
export const NETLINK_PROTOCOL = { ROUTE: 0, NETFILTER: 12, GENERIC: 16 } as const;

const PROTOCOL_NAMES: Readonly<Record<number, string>> = { 0: 'route', 12: 'netfilter', 16: 'generic' };

const AF_NETLINK = 16;
const SOCK_RAW = 3;
const SOCK_CLOEXEC = 0x80000;
const SOL_SOCKET = 1;
const SO_RCVBUF = 8;
const SO_SNDBUF = 7;
const SO_SNDBUFFORCE = 32;
const SO_RCVBUFFORCE = 33;
const SO_RCVTIMEO = 20;
const SOL_NETLINK = 270;
const NETLINK_CAP_ACK = 10;
const NETLINK_EXT_ACK = 11;
const MSG_TRUNC = 0x20;
const MSG_DONTWAIT = 0x40;
const NETLINK_ADD_MEMBERSHIP = 1;
const NETLINK_DROP_MEMBERSHIP = 2;
const EAGAIN = 11;
const ENOBUFS = 105;
const CLONE_NEWNET = 0x40000000;
/** Most buffers one writev takes (Linux UIO_MAXIOV). */
const IOV_MAX = 1024;
/** NLMSGERR_ATTR_MSG in an extended ack. */
const NLMSGERR_ATTR_MSG = 1;
const NLM_F_CAPPED = 0x100;
const NLM_F_ACK_TLVS = 0x200;

interface Libc {
  socket(domain: number, type: number, proto: number): number;
  send(fd: number, buf: Buffer, len: number, flags: number): number;
  recv(fd: number, buf: Buffer, len: number, flags: number): number;
  setsockopt(fd: number, level: number, name: number, val: Buffer, len: number): number;
  setns(fd: number, nstype: number): number;
  close(fd: number): number;
}

interface Koffi {
  load(path: string): { func(decl: string): unknown };
  errno(): number;
}
let koffi: Koffi | null = null;
let libc: Libc | null = null;

/**
 * Load koffi (an optional dependency, imported lazily so the proxy runs
 * without it) and libc. False when netlink sockets are unavailable here.
 */
export async function netlinkAvailable(): Promise<boolean> {
  try {
    koffi ??= ((await import('koffi' as string)) as { default: Koffi }).default;
    loadLibc();
    return true;
  } catch {
    return false;
  }
}

function loadLibc(): Libc {
  if (libc) return libc;
  if (!koffi) throw new ProxyError('KPT_BUG', 'netlink: call netlinkAvailable() first');
  const l = koffi.load('libc.so.6');
  libc = {
    socket: l.func('int socket(int, int, int)'),
    send: l.func('long send(int, void *, size_t, int)'),
    recv: l.func('long recv(int, _Out_ void *, size_t, int)'),
    setsockopt: l.func('int setsockopt(int, int, int, void *, uint32_t)'),
    setns: l.func('int setns(int, int)'),
    close: l.func('int close(int)'),
  } as Libc;
  return libc;
}

/** A request the kernel refused; `errno` is positive (EEXIST = 17). */
export class NetlinkError extends ProxyError {
  constructor(
    readonly errno: number,
    /** Index of the failing request in its batch, -1 when not known. */
    readonly opIndex: number,
    message: string,
  ) {
    super('KPT_SYNC_FAILED', message);
    this.name = 'NetlinkError';
  }
}

/** The kernel's own words from an extended ack, when it sent any. */
export function extAckMessage(m: NetlinkMessage): string | undefined {
  if ((m.flags & NLM_F_ACK_TLVS) === 0 || m.payload.length < 20) return undefined;
  const origLen = m.payload.readUInt32LE(4);
  let off = 4 + ((m.flags & NLM_F_CAPPED) !== 0 ? 16 : origLen);
  while (off + 4 <= m.payload.length) {
    const len = m.payload.readUInt16LE(off);
    const type = m.payload.readUInt16LE(off + 2) & 0x3fff;
    if (len < 4) break;
    if (type === NLMSGERR_ATTR_MSG) return m.payload.toString('utf8', off + 4, off + len).replace(/\0+$/, '');
    off += (len + 3) & ~3;
  }
  return undefined;
}

export interface OpenOptions {
  /** Open inside /run/netns/<name> (tests, benchmarks); default: our own namespace. */
  readonly netns?: string;
  /** Receive timeout; default 5 s. */
  readonly timeoutMs?: number;
}

export class NetlinkSocket {
  private fd: number;
  private seqNo: number;
  private sndbuf = 1 << 20;
  private readonly rbuf = Buffer.alloc(1 << 18);

  constructor(
    readonly protocol: number,
    opts: OpenOptions = {},
  ) {
    const c = loadLibc();
    this.fd = opts.netns === undefined ? openRaw(c, protocol) : socketInNetns(c, protocol, opts.netns);
    if (this.fd < 0) throw new ProxyError('KPT_EXEC_FAILED', `cannot open a netlink socket (protocol ${protocol})`);
    const ms = opts.timeoutMs ?? 5000;
    const tv = Buffer.alloc(16);
    tv.writeBigInt64LE(BigInt(Math.floor(ms / 1000)), 0);
    tv.writeBigInt64LE(BigInt((ms % 1000) * 1000), 8);
    c.setsockopt(this.fd, SOL_SOCKET, SO_RCVTIMEO, tv, 16);
    const size = Buffer.alloc(4);
    size.writeInt32LE(4 << 20);
    // Room for the acks of a whole batch; FORCE passes rmem_max as root.
    if (c.setsockopt(this.fd, SOL_SOCKET, SO_RCVBUFFORCE, size, 4) !== 0)
      c.setsockopt(this.fd, SOL_SOCKET, SO_RCVBUF, size, 4);
    size.writeInt32LE(1 << 20);
    c.setsockopt(this.fd, SOL_SOCKET, SO_SNDBUF, size, 4);
    const one = Buffer.alloc(4);
    one.writeInt32LE(1);
    c.setsockopt(this.fd, SOL_NETLINK, NETLINK_CAP_ACK, one, 4); // errors echo only the header
    c.setsockopt(this.fd, SOL_NETLINK, NETLINK_EXT_ACK, one, 4); // and the kernel's reason
    // Start somewhere unlikely to match a stale reply of an earlier socket.
    this.seqNo = (process.pid * 7919 + Math.floor(Date.now() / 1000)) & 0x3fffffff;
  }

  /** Reserve `n` consecutive sequence numbers; returns the first. */
  nextSeq(n = 1): number {
    const s = this.seqNo;
    this.seqNo = (this.seqNo + n) & 0x3fffffff;
    return s;
  }

  /**
   * Make room for one datagram of `bytes` (an nf_tables batch must arrive
   * in one; the kernel refuses a datagram larger than the send buffer).
   * FORCE passes wmem_max as root, as nft does for large batches.
   */
  reserveSendBuffer(bytes: number): void {
    if (bytes + 4096 <= this.sndbuf) return;
    const c = loadLibc();
    const size = Buffer.alloc(4);
    size.writeInt32LE(Math.min(bytes + 4096, 0x7fffffff));
    if (c.setsockopt(this.fd, SOL_SOCKET, SO_SNDBUFFORCE, size, 4) !== 0)
      c.setsockopt(this.fd, SOL_SOCKET, SO_SNDBUF, size, 4);
    this.sndbuf = bytes + 4096;
  }

  send(buf: Buffer): void {
    if (this.fd < 0) throw new ProxyError('KPT_BUG', 'netlink socket used after close');
    if (injectedFault(`netlink-${PROTOCOL_NAMES[this.protocol] ?? this.protocol}`))
      throw new ProxyError('KPT_SYNC_FAILED', 'netlink send failed (injected fault)');
    const n = loadLibc().send(this.fd, buf, buf.length, 0);
    if (n !== buf.length) throw new ProxyError('KPT_SYNC_FAILED', `netlink send failed (${n} of ${buf.length} bytes)`);
  }

  /**
   * Send `chunks` as ONE datagram of `bytes` bytes (writev on the socket: the
   * kernel gathers them into one message, as an nf_tables batch must arrive),
   * so the caller never joins them into one large buffer.
   */
  sendv(chunks: readonly Buffer[], bytes: number): void {
    if (chunks.length === 1) return this.send(chunks[0]!);
    if (this.fd < 0) throw new ProxyError('KPT_BUG', 'netlink socket used after close');
    if (injectedFault(`netlink-${PROTOCOL_NAMES[this.protocol] ?? this.protocol}`))
      throw new ProxyError('KPT_SYNC_FAILED', 'netlink send failed (injected fault)');
    if (chunks.length > IOV_MAX) throw new ProxyError('KPT_BUG', `netlink: ${chunks.length} chunks exceed IOV_MAX`);
    let n: number;
    try {
      n = writevSync(this.fd, chunks as Buffer[]);
    } catch (err) {
      throw new ProxyError('KPT_SYNC_FAILED', `netlink send failed: ${(err as Error).message}`, { cause: err });
    }
    if (n !== bytes) throw new ProxyError('KPT_SYNC_FAILED', `netlink send failed (${n} of ${bytes} bytes)`);
  }

  /**
   * sendv() on a thread of libuv's pool instead of the event loop's: the
   * kernel handles an nf_tables batch inside the send itself (a 10k-Service
   * batch takes hundreds of milliseconds there), and meanwhile the loop keeps
   * serving. Nothing else may use this socket until it resolves.
   */
  async sendvOffThread(chunks: readonly Buffer[], bytes: number): Promise<void> {
    if (this.fd < 0) throw new ProxyError('KPT_BUG', 'netlink socket used after close');
    if (injectedFault(`netlink-${PROTOCOL_NAMES[this.protocol] ?? this.protocol}`))
      throw new ProxyError('KPT_SYNC_FAILED', 'netlink send failed (injected fault)');
    if (chunks.length > IOV_MAX) throw new ProxyError('KPT_BUG', `netlink: ${chunks.length} chunks exceed IOV_MAX`);
    const n = await new Promise<number>((resolve, reject) =>
      writev(this.fd, chunks as Buffer[], (err, written) =>
        err
          ? reject(new ProxyError('KPT_SYNC_FAILED', `netlink send failed: ${err.message}`, { cause: err }))
          : resolve(written),
      ),
    );
    if (n !== bytes) throw new ProxyError('KPT_SYNC_FAILED', `netlink send failed (${n} of ${bytes} bytes)`);
  }

  /**
   * Read messages and hand each to `onMessage` until it returns true. A
   * timeout or a truncated datagram throws.
   */
  receive(onMessage: (m: NetlinkMessage) => boolean): void {
    const c = loadLibc();
    for (;;) {
      const n = c.recv(this.fd, this.rbuf, this.rbuf.length, MSG_TRUNC);
      if (n <= 0) throw new ProxyError('KPT_SYNC_FAILED', 'netlink: no reply from the kernel (timeout)');
      if (n > this.rbuf.length) throw new ProxyError('KPT_SYNC_FAILED', `netlink: reply of ${n} bytes truncated`);
      for (const m of parseMessages(this.rbuf, n)) if (onMessage(m)) return;
    }
  }

  /** Join or leave a multicast group (e.g. NFNLGRP_NFTABLES for nf_tables change events). */
  setMembership(group: number, join: boolean): void {
    const g = Buffer.alloc(4);
    g.writeUInt32LE(group);
    const name = join ? NETLINK_ADD_MEMBERSHIP : NETLINK_DROP_MEMBERSHIP;
    if (loadLibc().setsockopt(this.fd, SOL_NETLINK, name, g, 4) !== 0)
      throw new ProxyError('KPT_EXEC_FAILED', `netlink: cannot ${join ? 'join' : 'leave'} group ${group}`);
  }

  /**
   * Hand every message already queued to `onMessage`, without waiting.
   * 'overrun' when the kernel dropped messages because the receive buffer
   * was full (ENOBUFS): the caller lost events and must assume the worst.
   */
  receivePending(onMessage: (m: NetlinkMessage) => void): 'ok' | 'overrun' {
    const c = loadLibc();
    let overrun = false;
    for (;;) {
      const n = c.recv(this.fd, this.rbuf, this.rbuf.length, MSG_TRUNC | MSG_DONTWAIT);
      if (n < 0) {
        const errno = koffi!.errno();
        if (errno === ENOBUFS) {
          overrun = true;
          continue;
        }
        if (errno === EAGAIN) return overrun ? 'overrun' : 'ok';
        throw new ProxyError('KPT_SYNC_FAILED', `netlink: receive failed (errno ${errno})`);
      }
      if (n === 0) return overrun ? 'overrun' : 'ok';
      if (n > this.rbuf.length) {
        overrun = true; // a truncated datagram: its messages are lost
        continue;
      }
      for (const m of parseMessages(this.rbuf, n)) onMessage(m);
    }
  }

  /**
   * Send requests that each carry NLM_F_ACK and wait for every ack. Returns
   * one entry per request: 0 or a positive errno, with the kernel's reason.
   * Requests are sent in chunks of at most ~128 KiB (the send buffer); the
   * kernel handles them in order and keeps going after a failed one.
   * `onReply` sees data replies (e.g. NLM_F_ECHO) by request index.
   */
  ackAll(
    requests: readonly Buffer[],
    onReply?: (index: number, m: NetlinkMessage) => void,
  ): Array<{ errno: number; reason?: string }> {
    const results: Array<{ errno: number; reason?: string }> = new Array(requests.length);
    let i = 0;
    while (i < requests.length) {
      const first = i;
      let bytes = 0;
      while (i < requests.length && (i === first || bytes + requests[i]!.length <= 128 << 10)) {
        bytes += requests[i]!.length;
        i++;
      }
      const seq0 = this.nextSeq(i - first);
      const chunk = requests.slice(first, i).map((r, k) => {
        const b = Buffer.from(r); // the caller's buffers are not ours to renumber
        b.writeUInt32LE((seq0 + k) & 0x3fffffff, 8);
        return b;
      });
      this.send(Buffer.concat(chunk));
      let pending = i - first;
      this.receive((m) => {
        const k = ((m.seq - seq0) & 0x3fffffff) + first;
        if (k < first || k >= i) return false; // a stale reply of an earlier exchange
        if (m.type === NLMSG_ERROR) {
          const errno = errorCode(m);
          const reason = errno === 0 ? undefined : extAckMessage(m);
          results[k] = reason === undefined ? { errno } : { errno, reason };
          pending--;
        } else if (onReply) {
          onReply(k, m);
        }
        return pending === 0;
      });
    }
    return results;
  }

  /** One NLM_F_DUMP request: every reply message up to NLMSG_DONE; an error reply throws. */
  dump(request: Buffer): NetlinkMessage[] {
    const seq = this.nextSeq();
    const b = Buffer.from(request);
    b.writeUInt32LE(seq, 8);
    this.send(b);
    const out: NetlinkMessage[] = [];
    this.receive((m) => {
      if (m.seq !== seq) return false;
      if (m.type === NLMSG_DONE) return true;
      if (m.type === NLMSG_ERROR) {
        const errno = errorCode(m);
        if (errno === 0) return true;
        const reason = extAckMessage(m);
        throw new NetlinkError(errno, 0, `netlink dump failed: errno ${errno}${reason ? `: ${reason}` : ''}`);
      }
      // Copy: the payload points into rbuf, which the next datagram of a long dump overwrites.
      out.push({ ...m, payload: Buffer.from(m.payload) });
      return false;
    });
    return out;
  }

  close(): void {
    if (this.fd >= 0) loadLibc().close(this.fd);
    this.fd = -1;
  }
}

/** Open a socket, or null when netlink is unavailable here (no koffi, no libc, no such protocol). */
export async function openNetlink(protocol: number, opts: OpenOptions = {}): Promise<NetlinkSocket | null> {
  if (!(await netlinkAvailable())) return null;
  try {
    return new NetlinkSocket(protocol, opts);
  } catch {
    return null;
  }
}

function openRaw(c: Libc, protocol: number): number {
  return c.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
}

/** Create the socket inside another netns, then return this thread to its own. */
function socketInNetns(c: Libc, protocol: number, netns: string): number {
  const self = openSync('/proc/thread-self/ns/net', 'r');
  const target = openSync(`/run/netns/${netns}`, 'r');
  try {
    if (c.setns(target, CLONE_NEWNET) !== 0) throw new ProxyError('KPT_EXEC_FAILED', `setns into ${netns} failed`);
    let fd = -1;
    let back = -1;
    try {
      fd = openRaw(c, protocol);
    } finally {
      back = c.setns(self, CLONE_NEWNET);
    }
    if (back !== 0) throw new ProxyError('KPT_BUG', 'setns back to our own netns failed');
    return fd;
  } finally {
    closeSync(target);
    closeSync(self);
  }
}
