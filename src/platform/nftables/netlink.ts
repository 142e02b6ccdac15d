// A NETLINK_NETFILTER socket (through koffi and libc, no native addon of our
// own) that applies one nf_tables batch synchronously and reports the first
// error. Used for the incremental fast path: a one-endpoint change is a few
// messages, and skipping the `nft` process (which re-reads the whole table
// into its cache on every run) is what makes it milliseconds at 20k Services.
//
// Completion: after the batch we send GETGEN on the same socket; the kernel
// handles netlink requests in order, so its reply arrives after every ack or
// error of the batch. A receive timeout bounds the wait.
import { closeSync, openSync } from 'node:fs';
import { ProxyError } from '../../core/errors.js';
import type { NftFamily } from '../../dataplane/nftables/names.js';
import { encodeBatch, nlMessage, NFNL_SUBSYS_NFTABLES, NFT_MSG, NLM_F, type EncodedOp } from './nlencode.js';

const AF_NETLINK = 16;
const SOCK_RAW = 3;
const SOCK_CLOEXEC = 0x80000;
const NETLINK_NETFILTER = 12;
const SOL_SOCKET = 1;
const SO_RCVTIMEO = 20;
const SO_RCVBUF = 8;
const CLONE_NEWNET = 0x40000000;
const NLMSG_ERROR = 2;

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
}
let koffi: Koffi | null = null;
let libc: Libc | null = null;
function loadLibc(): Libc {
  if (libc) return libc;
  if (!koffi) throw new ProxyError('KPT_BUG', 'koffi not loaded');
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

export class NetlinkError extends ProxyError {
  constructor(
    readonly errno: number,
    readonly opIndex: number,
    message: string,
  ) {
    super('KPT_SYNC_FAILED', message);
    this.name = 'NetlinkError';
  }
}

/**
 * The fast path, or null when it is unavailable here (no koffi package, no
 * libc, or the socket cannot be opened); callers then use `nft -f` only.
 */
export async function openNftNetlink(netns?: string): Promise<NftNetlink | null> {
  try {
    // koffi is optional: imported lazily so the proxy runs without it.
    koffi ??= ((await import('koffi' as string)) as { default: Koffi }).default;
    return new NftNetlink(netns);
  } catch {
    return null;
  }
}

export class NftNetlink {
  private fd: number;
  private seq = Math.floor(Date.now() / 1000) & 0xffffff;
  private readonly rbuf = Buffer.alloc(1 << 16);

  /** Open the socket in the named network namespace (/run/netns/<name>) or the current one. */
  constructor(netns?: string) {
    const c = loadLibc();
    if (netns === undefined) this.fd = c.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    else this.fd = socketInNetns(c, netns);
    if (this.fd < 0) throw new ProxyError('KPT_EXEC_FAILED', 'cannot open a NETLINK_NETFILTER socket');
    const tv = Buffer.alloc(16);
    tv.writeBigInt64LE(2n, 0); // 2 s receive timeout: a lost reply is a bounded failure
    c.setsockopt(this.fd, SOL_SOCKET, SO_RCVTIMEO, tv, 16);
    const rcv = Buffer.alloc(4);
    rcv.writeInt32LE(1 << 20);
    c.setsockopt(this.fd, SOL_SOCKET, SO_RCVBUF, rcv, 4);
  }

  /** Apply the operations as one atomic batch; throws NetlinkError with the first failure. */
  apply(ops: readonly EncodedOp[], family: NftFamily): void {
    const c = loadLibc();
    const start = this.seq;
    const { buf, seqs } = encodeBatch(ops, family, start);
    const genSeq = start + ops.length + 2;
    this.seq = genSeq + 1;
    if (c.send(this.fd, buf, buf.length, 0) !== buf.length)
      throw new ProxyError('KPT_SYNC_FAILED', 'netlink send failed');
    const gen = nlMessage((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG.GETGEN, NLM_F.REQUEST, genSeq, 0, 0, []);
    if (c.send(this.fd, gen, gen.length, 0) !== gen.length)
      throw new ProxyError('KPT_SYNC_FAILED', 'netlink send failed');
    let firstError: NetlinkError | null = null;
    for (;;) {
      const n = c.recv(this.fd, this.rbuf, this.rbuf.length, 0);
      if (n <= 0) throw new ProxyError('KPT_SYNC_FAILED', 'netlink: no reply from the kernel (timeout)');
      let off = 0;
      let done = false;
      while (off + 16 <= n) {
        const len = this.rbuf.readUInt32LE(off);
        const type = this.rbuf.readUInt16LE(off + 4);
        const seq = this.rbuf.readUInt32LE(off + 8);
        if (type === NLMSG_ERROR) {
          const err = -this.rbuf.readInt32LE(off + 16);
          if (err !== 0 && firstError === null) {
            const idx = seqs.indexOf(seq);
            firstError = new NetlinkError(err, idx, `nf_tables batch rejected: errno ${err} at operation ${idx}`);
          }
        } else if (seq === genSeq) {
          done = true;
        }
        if (len < 16) break;
        off += (len + 3) & ~3;
      }
      if (done) break;
    }
    if (firstError) throw firstError;
  }

  close(): void {
    if (this.fd >= 0) loadLibc().close(this.fd);
    this.fd = -1;
  }
}

/** Create the socket inside another netns, then return this thread to its own. */
function socketInNetns(c: Libc, netns: string): number {
  const self = openSync('/proc/thread-self/ns/net', 'r');
  const target = openSync(`/run/netns/${netns}`, 'r');
  try {
    if (c.setns(target, CLONE_NEWNET) !== 0) throw new ProxyError('KPT_EXEC_FAILED', `setns into ${netns} failed`);
    let fd = -1;
    let back = -1;
    try {
      fd = c.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
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
