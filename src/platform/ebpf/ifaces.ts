// The interfaces of the proxy's network namespace, from one rtnetlink
// RTM_GETLINK dump over the shared netlink socket (../netlink): index, name,
// link type and bridge master. sysfs is not used: /sys/class/net shows the
// namespace of whoever mounted /sys, which under `nsenter --net` is not ours.
import koffi from 'koffi';
import { ProxyError } from '../../core/errors.js';
import {
  Attrs,
  encodeMessage,
  errnoName,
  errorCode,
  NETLINK_PROTOCOL,
  NetlinkSocket,
  netlinkAvailable,
  NLM_F,
  NLMSG_DONE,
  NLMSG_ERROR,
} from '../netlink/index.js';

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

const RTM_NEWLINK = 16;
const RTM_GETLINK = 18;
const IFLA_IFNAME = 3;
const IFLA_MASTER = 10;
const IFF_UP = 1;

let route: NetlinkSocket | null = null;

/** Open the rtnetlink socket once (koffi is loaded lazily by the netlink module). */
export async function openIfaceSource(): Promise<void> {
  if (route) return;
  if (!(await netlinkAvailable())) throw new ProxyError('KPT_EXEC_FAILED', 'netlink is not available here');
  route = new NetlinkSocket(NETLINK_PROTOCOL.ROUTE);
}

/** Every interface of the current network namespace (openIfaceSource first). */
export function listIfaces(): Iface[] {
  if (!route) throw new ProxyError('KPT_BUG', 'listIfaces before openIfaceSource');
  const ifinfo = Buffer.alloc(16); // struct ifinfomsg, all zero: every family, every link
  const seq = route.nextSeq();
  route.send(encodeMessage(RTM_GETLINK, NLM_F.REQUEST | NLM_F.DUMP, seq, ifinfo));
  const out: Iface[] = [];
  // Parsed as they arrive: a message's payload lives only until the next datagram is read.
  route.receive((m) => {
    if (m.seq !== seq) return false;
    if (m.type === NLMSG_ERROR && errorCode(m) !== 0)
      throw new ProxyError('KPT_EXEC_FAILED', `listing interfaces: ${errnoName(errorCode(m))}`);
    if (m.type === RTM_NEWLINK) out.push(parseLink(m.payload));
    return m.type === NLMSG_DONE || m.type === NLMSG_ERROR;
  });
  return out;
}

function parseLink(m: Buffer): Iface {
  const a = new Attrs(m, 16);
  return {
    index: m.readInt32LE(4),
    name: a.str(IFLA_IFNAME) ?? '',
    type: m.readUInt16LE(2),
    master: a.u32(IFLA_MASTER) ?? 0,
    up: (m.readUInt32LE(8) & IFF_UP) !== 0,
  };
}

const SOL_SOCKET = 1;
const SO_NETNS_COOKIE = 71;
const AF_INET = 2;
const SOCK_DGRAM = 2;
const SOCK_CLOEXEC = 0x80000;

interface Libc {
  socket(domain: number, type: number, proto: number): number;
  close(fd: number): number;
  getsockopt(fd: number, level: number, name: number, val: Buffer, len: Buffer): number;
}
let libc: Libc | null = null;
function calls(): Libc {
  if (libc) return libc;
  const l = koffi.load('libc.so.6');
  libc = {
    socket: l.func('int socket(int, int, int)'),
    close: l.func('int close(int)'),
    getsockopt: l.func('int getsockopt(int, int, int, _Out_ void *, _Inout_ void *)'),
  } as unknown as Libc;
  return libc;
}

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
