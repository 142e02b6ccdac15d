// rtnetlink for IPVS mode: the kube-ipvs0 dummy link and the Service
// addresses bound to it, plus the node's local addresses (NodePort virtual
// servers are made per node address). One socket, batched acked requests,
// as `ip link` / `ip addr` would do one process per change.
import { BugError } from '../../core/errors.js';
import { parseIP } from '../../core/ip.js';
import type { IPFamily } from '../../core/types.js';
import { ProxyError } from '../../core/errors.js';
import { attr, Attrs, nested, str } from '../netlink/attr.js';
import { encodeMessage, ERRNO, errnoName, NLM_F } from '../netlink/message.js';
import { NETLINK_PROTOCOL, netlinkAvailable, NetlinkError, NetlinkSocket } from '../netlink/socket.js';

const RTM = { NEWLINK: 16, DELLINK: 17, GETLINK: 18, NEWADDR: 20, DELADDR: 21, GETADDR: 22 } as const;
const IFLA = { IFNAME: 3, LINKINFO: 18 } as const;
const IFLA_INFO_KIND = 1;
const IFA = { ADDRESS: 1, LOCAL: 2, FLAGS: 8 } as const;
const IFA_F_NODAD = 0x02;
const AF: Record<IPFamily, number> = { IPv4: 2, IPv6: 10 };
const AF_UNSPEC = 0;
const RT_SCOPE_UNIVERSE = 0;

/** struct ifinfomsg: family, pad, type, index, flags, change. */
function ifinfomsg(index = 0): Buffer {
  const b = Buffer.alloc(16);
  b.writeInt32LE(index, 4);
  return b;
}

/** struct ifaddrmsg: family, prefixlen, flags, scope, index. */
function ifaddrmsg(family: number, prefix: number, index: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt8(family, 0);
  b.writeUInt8(prefix, 1);
  b.writeUInt8(0, 2);
  b.writeUInt8(RT_SCOPE_UNIVERSE, 3);
  b.writeUInt32LE(index, 4);
  return b;
}

/** An address of a link (as `ip addr` lists it). */
export interface LinkAddress {
  readonly index: number;
  readonly family: IPFamily;
  readonly address: string;
  readonly prefix: number;
}

export class Rtnl {
  private constructor(private readonly sock: NetlinkSocket) {}

  static async open(netns?: string): Promise<Rtnl> {
    if (!(await netlinkAvailable()))
      throw new ProxyError(
        'KPT_EXEC_FAILED',
        'rtnetlink: netlink sockets are unavailable (the koffi package is missing)',
      );
    return new Rtnl(new NetlinkSocket(NETLINK_PROTOCOL.ROUTE, netns === undefined ? {} : { netns }));
  }

  /** The link's index and kind ("dummy", "" for links without a kind), or null when there is none. */
  link(name: string): { index: number; kind: string } | null {
    const req = encodeMessage(RTM.GETLINK, NLM_F.REQUEST | NLM_F.ACK, 0, ifinfomsg(), [attr(IFLA.IFNAME, str(name))]);
    let found: { index: number; kind: string } | null = null;
    const [r] = this.sock.ackAll([req], (_i, m) => {
      const a = new Attrs(m.payload, 16);
      found = { index: m.payload.readInt32LE(4), kind: a.nested(IFLA.LINKINFO)?.str(IFLA_INFO_KIND) ?? '' };
    });
    if (r!.errno === ERRNO.ENODEV) return null;
    if (r!.errno !== 0) throw new NetlinkError(r!.errno, 0, `rtnetlink: reading link ${name}: ${errnoName(r!.errno)}`);
    return found;
  }

  /**
   * Make sure a dummy link of that name exists and return its index. Left
   * down, as upstream leaves kube-ipvs0: its addresses are local all the same.
   */
  ensureDummy(name: string): number {
    const existing = this.link(name);
    if (existing) {
      if (existing.kind !== 'dummy')
        throw new ProxyError('KPT_SYNC_FAILED', `${name} exists but is a ${existing.kind || 'non-dummy'} link`);
      return existing.index;
    }
    const req = encodeMessage(RTM.NEWLINK, NLM_F.REQUEST | NLM_F.ACK | NLM_F.CREATE | NLM_F.EXCL, 0, ifinfomsg(), [
      attr(IFLA.IFNAME, str(name)),
      nested(IFLA.LINKINFO, [attr(IFLA_INFO_KIND, str('dummy'))]),
    ]);
    const [r] = this.sock.ackAll([req]);
    if (r!.errno !== 0 && r!.errno !== ERRNO.EEXIST)
      throw new NetlinkError(r!.errno, 0, `rtnetlink: creating dummy link ${name}: ${errnoName(r!.errno)}`);
    const made = this.link(name);
    if (!made) throw new ProxyError('KPT_SYNC_FAILED', `rtnetlink: ${name} vanished right after it was created`);
    return made.index;
  }

  /** Delete the link if it exists and is a dummy; true when one was deleted. */
  deleteDummy(name: string): boolean {
    const l = this.link(name);
    if (!l) return false;
    if (l.kind !== 'dummy') throw new ProxyError('KPT_SYNC_FAILED', `${name} is not a dummy link; not deleting it`);
    const [r] = this.sock.ackAll([encodeMessage(RTM.DELLINK, NLM_F.REQUEST | NLM_F.ACK, 0, ifinfomsg(l.index))]);
    if (r!.errno !== 0 && r!.errno !== ERRNO.ENODEV)
      throw new NetlinkError(r!.errno, 0, `rtnetlink: deleting ${name}: ${errnoName(r!.errno)}`);
    return true;
  }

  /** Every address of every link (one dump), or of one family. */
  addresses(family?: IPFamily): LinkAddress[] {
    const req = encodeMessage(
      RTM.GETADDR,
      NLM_F.REQUEST | NLM_F.DUMP,
      0,
      ifaddrmsg(family ? AF[family] : AF_UNSPEC, 0, 0),
    );
    const out: LinkAddress[] = [];
    for (const m of this.sock.dump(req)) {
      if (m.type !== RTM.NEWADDR || m.payload.length < 8) continue;
      const fam = m.payload.readUInt8(0);
      const f: IPFamily | null = fam === AF.IPv4 ? 'IPv4' : fam === AF.IPv6 ? 'IPv6' : null;
      if (!f) continue;
      const a = new Attrs(m.payload, 8);
      // IFA_LOCAL is the local address on point-to-point links; IFA_ADDRESS otherwise.
      const raw = a.raw(IFA.LOCAL) ?? a.raw(IFA.ADDRESS);
      if (!raw) continue;
      const ip = parseIP(f === 'IPv4' ? [...raw.subarray(0, 4)].join('.') : ipv6Text(raw));
      if (!ip) continue;
      out.push({ index: m.payload.readUInt32LE(4), family: f, address: ip.text, prefix: m.payload.readUInt8(1) });
    }
    return out;
  }

  /**
   * Add (true) or delete (false) host addresses (/32, /128) on a link, in one
   * batch. "Already there" on add and "not there" on delete count as done.
   * Returns the addresses that failed, with the reason.
   */
  changeAddresses(
    index: number,
    add: boolean,
    addresses: readonly string[],
  ): Array<{ address: string; error: string }> {
    const reqs: Buffer[] = [];
    for (const s of addresses) {
      const ip = parseIP(s);
      if (!ip) throw new BugError(`not an IP address: ${s}`);
      const v6 = ip.family === 'IPv6';
      const attrs = [attr(IFA.LOCAL, Buffer.from(ip.bytes)), attr(IFA.ADDRESS, Buffer.from(ip.bytes))];
      // No duplicate address detection: a Service address is usable at once.
      if (v6 && add) attrs.push(attr(IFA.FLAGS, u32le(IFA_F_NODAD)));
      const flags = add ? NLM_F.REQUEST | NLM_F.ACK | NLM_F.CREATE | NLM_F.EXCL : NLM_F.REQUEST | NLM_F.ACK;
      reqs.push(
        encodeMessage(add ? RTM.NEWADDR : RTM.DELADDR, flags, 0, ifaddrmsg(AF[ip.family], v6 ? 128 : 32, index), attrs),
      );
    }
    const failed: Array<{ address: string; error: string }> = [];
    this.sock.ackAll(reqs).forEach((r, i) => {
      const ok = r.errno === 0 || (add ? r.errno === ERRNO.EEXIST : r.errno === ERRNO.EADDRNOTAVAIL);
      if (!ok) failed.push({ address: addresses[i]!, error: errnoName(r.errno) + (r.reason ? `: ${r.reason}` : '') });
    });
    return failed;
  }

  close(): void {
    this.sock.close();
  }
}

function u32le(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}

function ipv6Text(raw: Buffer): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(raw.readUInt16BE(i).toString(16));
  return groups.join(':');
}
