// IPVS generic-netlink messages (family "IPVS", version 1): encode service
// and destination commands, decode dump replies. The layout is the kernel's
// include/uapi/linux/ip_vs.h; ipvsadm and libnl speak the same.
//
// Byte order: ports are network order, addresses are a 16-byte
// nf_inet_addr (IPv4 in the first 4 bytes), everything else host order.
import { BugError } from '../../core/errors.js';
import { parseIP, formatIP } from '../../core/ip.js';
import type { IPFamily, Protocol } from '../../core/types.js';
import type { IpvsOp, RealServer, RealServerStatus, VirtualServer } from '../../dataplane/ipvs/objects.js';
import { FWD_MASQ, SVC_FLAG } from '../../dataplane/ipvs/objects.js';
import { attr, Attrs, nested, str, u16, u16be, u32, type Attr } from '../netlink/attr.js';
import { genlHeader, GENL_HDRLEN } from '../netlink/genl.js';
import { encodeMessage, NLM_F, type NetlinkMessage } from '../netlink/message.js';

export const IPVS_GENL_NAME = 'IPVS';
export const IPVS_GENL_VERSION = 1;

export const IPVS_CMD = {
  NEW_SERVICE: 1,
  SET_SERVICE: 2,
  DEL_SERVICE: 3,
  GET_SERVICE: 4,
  NEW_DEST: 5,
  SET_DEST: 6,
  DEL_DEST: 7,
  GET_DEST: 8,
  SET_CONFIG: 12,
  GET_CONFIG: 13,
  GET_INFO: 15,
  FLUSH: 17,
} as const;

const CMD_ATTR = { SERVICE: 1, DEST: 2, TIMEOUT_TCP: 4, TIMEOUT_TCP_FIN: 5, TIMEOUT_UDP: 6 } as const;
const SVC = { AF: 1, PROTOCOL: 2, ADDR: 3, PORT: 4, FWMARK: 5, SCHED: 6, FLAGS: 7, TIMEOUT: 8, NETMASK: 9 } as const;
const DEST = {
  ADDR: 1,
  PORT: 2,
  FWD: 3,
  WEIGHT: 4,
  U_THRESH: 5,
  L_THRESH: 6,
  ACTIVE: 7,
  INACTIVE: 8,
  PERSIST: 9,
  ADDR_FAMILY: 11,
} as const;
const INFO = { VERSION: 1, CONN_TAB_SIZE: 2 } as const;

const AF: Record<IPFamily, number> = { IPv4: 2, IPv6: 10 };
const PROTO: Record<Protocol, number> = { TCP: 6, UDP: 17, SCTP: 132 };
const PROTO_NAME: Record<number, Protocol> = { 6: 'TCP', 17: 'UDP', 132: 'SCTP' };

function addr16(ip: string): Buffer {
  const p = parseIP(ip);
  if (!p) throw new BugError(`not an IP address: ${ip}`);
  const b = Buffer.alloc(16);
  Buffer.from(p.bytes).copy(b);
  return b;
}

function addrText(b: Buffer | undefined, family: IPFamily): string {
  if (!b || b.length < (family === 'IPv4' ? 4 : 16)) return '';
  return formatIP(new Uint8Array(b.subarray(0, family === 'IPv4' ? 4 : 16)));
}

/** Attributes that name a service (what DEL and GET_DEST need). */
function serviceId(vs: Pick<VirtualServer, 'family' | 'protocol' | 'address' | 'port'>): Attr[] {
  return [
    attr(SVC.AF, u16(AF[vs.family])),
    attr(SVC.PROTOCOL, u16(PROTO[vs.protocol])),
    attr(SVC.ADDR, addr16(vs.address)),
    attr(SVC.PORT, u16be(vs.port)),
  ];
}

/** The full service: the kernel requires scheduler, flags, timeout and netmask on NEW and SET. */
function serviceFull(vs: VirtualServer): Attr[] {
  const flags = Buffer.alloc(8);
  flags.writeUInt32LE(vs.flags >>> 0, 0);
  flags.writeUInt32LE(0xffffffff, 4); // mask: every flag is ours to set
  return [
    ...serviceId(vs),
    attr(SVC.SCHED, str(vs.scheduler)),
    attr(SVC.FLAGS, flags),
    attr(SVC.TIMEOUT, u32(vs.timeout)),
    // ipvsadm's convention: a full mask for IPv4, the prefix length for IPv6.
    attr(SVC.NETMASK, u32(vs.family === 'IPv4' ? 0xffffffff : 128)),
  ];
}

function destAttrs(family: IPFamily, rs: RealServer): Attr[] {
  return [
    attr(DEST.ADDR, addr16(rs.address)),
    attr(DEST.PORT, u16be(rs.port)),
    attr(DEST.FWD, u32(FWD_MASQ)),
    attr(DEST.WEIGHT, u32(rs.weight)),
    attr(DEST.U_THRESH, u32(0)),
    attr(DEST.L_THRESH, u32(0)),
    attr(DEST.ADDR_FAMILY, u16(AF[family])),
  ];
}

/** One IPVS request message (sequence number 0: NetlinkSocket.ackAll numbers them). */
function request(familyId: number, cmd: number, attrs: Attr[], flags = NLM_F.REQUEST | NLM_F.ACK): Buffer {
  return encodeMessage(familyId, flags, 0, genlHeader(cmd, IPVS_GENL_VERSION), attrs);
}

export function encodeOp(familyId: number, o: IpvsOp): Buffer {
  switch (o.op) {
    case 'add-service':
      return request(familyId, IPVS_CMD.NEW_SERVICE, [nested(CMD_ATTR.SERVICE, serviceFull(o.vs))]);
    case 'edit-service':
      return request(familyId, IPVS_CMD.SET_SERVICE, [nested(CMD_ATTR.SERVICE, serviceFull(o.vs))]);
    case 'del-service':
      return request(familyId, IPVS_CMD.DEL_SERVICE, [nested(CMD_ATTR.SERVICE, serviceId(o.vs))]);
    case 'add-dest':
    case 'edit-dest':
      return request(familyId, o.op === 'add-dest' ? IPVS_CMD.NEW_DEST : IPVS_CMD.SET_DEST, [
        nested(CMD_ATTR.SERVICE, serviceId(o.vs)),
        nested(CMD_ATTR.DEST, destAttrs(o.vs.family, o.rs)),
      ]);
    case 'del-dest':
      return request(familyId, IPVS_CMD.DEL_DEST, [
        nested(CMD_ATTR.SERVICE, serviceId(o.vs)),
        nested(CMD_ATTR.DEST, [
          attr(DEST.ADDR, addr16(o.rs.address)),
          attr(DEST.PORT, u16be(o.rs.port)),
          attr(DEST.ADDR_FAMILY, u16(AF[o.vs.family])),
        ]),
      ]);
  }
}

export function encodeListServices(familyId: number): Buffer {
  return request(familyId, IPVS_CMD.GET_SERVICE, [], NLM_F.REQUEST | NLM_F.DUMP);
}

export function encodeListDests(familyId: number, vs: VirtualServer): Buffer {
  return request(familyId, IPVS_CMD.GET_DEST, [nested(CMD_ATTR.SERVICE, serviceId(vs))], NLM_F.REQUEST | NLM_F.DUMP);
}

/** A listed service, or null for ones we do not model (firewall-mark services, unknown protocols). */
export function decodeService(m: NetlinkMessage): VirtualServer | null {
  const s = new Attrs(m.payload, GENL_HDRLEN).nested(CMD_ATTR.SERVICE);
  if (!s || (s.has(SVC.FWMARK) && (s.u32(SVC.FWMARK) ?? 0) !== 0)) return null;
  const af = s.u16(SVC.AF);
  const family: IPFamily | null = af === AF.IPv4 ? 'IPv4' : af === AF.IPv6 ? 'IPv6' : null;
  const protocol = PROTO_NAME[s.u16(SVC.PROTOCOL) ?? 0];
  if (!family || !protocol) return null;
  const flags = s.raw(SVC.FLAGS);
  return {
    family,
    protocol,
    address: addrText(s.raw(SVC.ADDR), family),
    port: s.u16be(SVC.PORT) ?? 0,
    scheduler: s.str(SVC.SCHED) ?? '',
    flags: flags && flags.length >= 4 ? flags.readUInt32LE(0) & ~SVC_FLAG.HASHED : 0,
    timeout: s.u32(SVC.TIMEOUT) ?? 0,
  };
}

export function decodeDest(m: NetlinkMessage, family: IPFamily): RealServerStatus | null {
  const d = new Attrs(m.payload, GENL_HDRLEN).nested(CMD_ATTR.DEST);
  if (!d) return null;
  const af = d.u16(DEST.ADDR_FAMILY);
  const fam: IPFamily = af === AF.IPv6 ? 'IPv6' : af === AF.IPv4 ? 'IPv4' : family;
  return {
    address: addrText(d.raw(DEST.ADDR), fam),
    port: d.u16be(DEST.PORT) ?? 0,
    weight: d.u32(DEST.WEIGHT) ?? 0,
    activeConns: d.u32(DEST.ACTIVE) ?? 0,
    inactiveConns: d.u32(DEST.INACTIVE) ?? 0,
    persistConns: d.u32(DEST.PERSIST) ?? 0,
  };
}

export interface IpvsTimeouts {
  /** Seconds; 0 leaves the kernel's value. */
  readonly tcp: number;
  readonly tcpFin: number;
  readonly udp: number;
}

export function encodeSetTimeouts(familyId: number, t: IpvsTimeouts): Buffer {
  return request(familyId, IPVS_CMD.SET_CONFIG, [
    attr(CMD_ATTR.TIMEOUT_TCP, u32(t.tcp)),
    attr(CMD_ATTR.TIMEOUT_TCP_FIN, u32(t.tcpFin)),
    attr(CMD_ATTR.TIMEOUT_UDP, u32(t.udp)),
  ]);
}

export function encodeGetConfig(familyId: number): Buffer {
  return request(familyId, IPVS_CMD.GET_CONFIG, []);
}

export function decodeTimeouts(m: NetlinkMessage): IpvsTimeouts {
  const a = new Attrs(m.payload, GENL_HDRLEN);
  return {
    tcp: a.u32(CMD_ATTR.TIMEOUT_TCP) ?? 0,
    tcpFin: a.u32(CMD_ATTR.TIMEOUT_TCP_FIN) ?? 0,
    udp: a.u32(CMD_ATTR.TIMEOUT_UDP) ?? 0,
  };
}

export function encodeGetInfo(familyId: number): Buffer {
  return request(familyId, IPVS_CMD.GET_INFO, []);
}

/** "1.2.1" from the kernel's packed version. */
export function decodeVersion(m: NetlinkMessage): string {
  const v = new Attrs(m.payload, GENL_HDRLEN).u32(INFO.VERSION) ?? 0;
  return `${(v >> 16) & 0xff}.${(v >> 8) & 0xff}.${v & 0xff}`;
}
