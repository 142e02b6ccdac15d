// The interfaces of the proxy's network namespace, from one rtnetlink
// RTM_GETLINK dump (through koffi and libc): index, name, link type and
// bridge master. sysfs is not used: /sys/class/net shows the namespace of
// whoever mounted /sys, which under `nsenter --net` is not ours.
import koffi from 'koffi';
import { ProxyError } from '../../core/errors.js';

export interface Iface {
  readonly index: number;
  readonly name: string;
  /** ARPHRD_* (1 Ethernet, 772 loopback). */
  readonly type: number;
  /** ifindex of the bridge (or other master) this is a port of; 0 for none. */
  readonly master: number;
  readonly up: boolean;
}

export const ARPHRD_ETHER = 1;
export const ARPHRD_LOOPBACK = 772;

const AF_NETLINK = 16;
const SOCK_RAW = 3;
const SOCK_CLOEXEC = 0x80000;
const NETLINK_ROUTE = 0;
const RTM_NEWLINK = 16;
const RTM_GETLINK = 18;
const NLMSG_ERROR = 2;
const NLMSG_DONE = 3;
const NLM_F_REQUEST = 1;
const NLM_F_DUMP = 0x300;
const IFLA_IFNAME = 3;
const IFLA_MASTER = 10;
const IFF_UP = 1;

interface Libc {
  socket(domain: number, type: number, proto: number): number;
  send(fd: number, buf: Buffer, len: number, flags: number): number;
  recv(fd: number, buf: Buffer, len: number, flags: number): number;
  close(fd: number): number;
  getsockopt(fd: number, level: number, name: number, val: Buffer, len: Buffer): number;
}
let libc: Libc | null = null;
function calls(): Libc {
  if (libc) return libc;
  const l = koffi.load('libc.so.6');
  libc = {
    socket: l.func('int socket(int, int, int)'),
    send: l.func('long send(int, void *, size_t, int)'),
    recv: l.func('long recv(int, _Out_ void *, size_t, int)'),
    close: l.func('int close(int)'),
    getsockopt: l.func('int getsockopt(int, int, int, _Out_ void *, _Inout_ void *)'),
  } as unknown as Libc;
  return libc;
}

/** Every interface of the current network namespace. */
export function listIfaces(): Iface[] {
  const c = calls();
  const fd = c.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) throw new ProxyError('KPT_EXEC_FAILED', 'cannot open a NETLINK_ROUTE socket');
  try {
    const req = Buffer.alloc(32);
    req.writeUInt32LE(32, 0);
    req.writeUInt16LE(RTM_GETLINK, 4);
    req.writeUInt16LE(NLM_F_REQUEST | NLM_F_DUMP, 6);
    req.writeUInt32LE(1, 8);
    if (c.send(fd, req, req.length, 0) !== req.length) throw new ProxyError('KPT_EXEC_FAILED', 'rtnetlink send failed');
    const out: Iface[] = [];
    const buf = Buffer.alloc(1 << 16);
    for (;;) {
      const n = c.recv(fd, buf, buf.length, 0);
      if (n <= 0) throw new ProxyError('KPT_EXEC_FAILED', 'rtnetlink: no reply');
      for (let off = 0; off + 16 <= n;) {
        const len = buf.readUInt32LE(off);
        const type = buf.readUInt16LE(off + 4);
        if (type === NLMSG_DONE) return out;
        if (type === NLMSG_ERROR)
          throw new ProxyError('KPT_EXEC_FAILED', `rtnetlink error ${-buf.readInt32LE(off + 16)}`);
        if (type === RTM_NEWLINK) out.push(parseLink(buf.subarray(off + 16, off + len)));
        if (len < 16) break;
        off += (len + 3) & ~3;
      }
    }
  } finally {
    c.close(fd);
  }
}

function parseLink(m: Buffer): Iface {
  const type = m.readUInt16LE(2);
  const index = m.readInt32LE(4);
  const flags = m.readUInt32LE(8);
  let name = '';
  let master = 0;
  for (let off = 16; off + 4 <= m.length;) {
    const alen = m.readUInt16LE(off);
    const atype = m.readUInt16LE(off + 2) & 0x3fff;
    if (alen < 4) break;
    if (atype === IFLA_IFNAME) name = m.toString('utf8', off + 4, off + alen).replace(/\0.*$/s, '');
    if (atype === IFLA_MASTER) master = m.readUInt32LE(off + 4);
    off += (alen + 3) & ~3;
  }
  return { index, name, type, master, up: (flags & IFF_UP) !== 0 };
}

const SOL_SOCKET = 1;
const SO_NETNS_COOKIE = 71;
const AF_INET = 2;
const SOCK_DGRAM = 2;

/** The cookie of the current network namespace (what bpf_get_netns_cookie returns in it). */
export function netnsCookie(): bigint {
  const c = calls();
  const fd = c.socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw new ProxyError('KPT_EXEC_FAILED', 'cannot open a socket');
  try {
    const val = Buffer.alloc(8);
    const len = Buffer.alloc(4);
    len.writeUInt32LE(8);
    if (c.getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, val, len) !== 0)
      throw new ProxyError('KPT_EXEC_FAILED', 'SO_NETNS_COOKIE is not supported by this kernel');
    return val.readBigUInt64LE(0);
  } finally {
    c.close(fd);
  }
}
