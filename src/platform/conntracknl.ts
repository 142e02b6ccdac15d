// The conntrack table over ctnetlink (NETLINK_NETFILTER, subsystem
// CTNETLINK), as upstream's reconciler does since kubernetes #127318: one
// filtered dump lists the family's UDP entries, and each stale entry is
// deleted by its exact original tuple in acked batches. No `conntrack`
// process and no re-dump per deletion filter.
//
// Wire format (linux/netfilter/nfnetlink_conntrack.h): every message starts
// with struct nfgenmsg {u8 family, u8 version, be16 res_id}. An entry is
// CTA_TUPLE_ORIG and CTA_TUPLE_REPLY, each nested {CTA_TUPLE_IP {src, dst},
// CTA_TUPLE_PROTO {num u8, src port be16, dst port be16}}, plus CTA_ZONE
// (be16) when not in the default zone. Addresses are raw bytes.
import { formatIP, normalizeIP, parseIP } from '../core/ip.js';
import type { IPFamily } from '../core/types.js';
import {
  Attrs,
  attr,
  encodeMessage,
  ERRNO,
  NLA_F_NESTED,
  errnoName,
  nested,
  NETLINK_PROTOCOL,
  NLM_F,
  openNetlink,
  u16be,
  u8,
  type Attr,
  type NetlinkSocket,
} from './netlink/index.js';
import type { ConntrackTable, DeleteResult, FlowRecord, FlowToDelete } from './conntrack.js';

const NFNL_SUBSYS_CTNETLINK = 1;
const IPCTNL_MSG_CT_GET = 1;
const IPCTNL_MSG_CT_DELETE = 2;

const CTA = { TUPLE_ORIG: 1, TUPLE_REPLY: 2, ZONE: 18, FILTER: 25 } as const;
const CTA_TUPLE = { IP: 1, PROTO: 2 } as const;
const CTA_IP = { V4_SRC: 1, V4_DST: 2, V6_SRC: 3, V6_DST: 4 } as const;
const CTA_PROTO = { NUM: 1, SRC_PORT: 2, DST_PORT: 3 } as const;
const CTA_FILTER_ORIG_FLAGS = 1;
const CTA_FILTER_REPLY_FLAGS = 2;
const CTA_FILTER_FLAG_PROTO_NUM = 1 << 3;
const IPPROTO_UDP = 17;
const AF = { IPv4: 2, IPv6: 10 } as const;

const msgType = (cmd: number) => (NFNL_SUBSYS_CTNETLINK << 8) | cmd;
const nfgenmsg = (family: IPFamily) => Buffer.from([AF[family], 0, 0, 0]);

/**
 * An entry as listed: the flow, its zone, and the kernel's own encoding of
 * its original tuple, which a delete sends back verbatim (no re-encoding).
 */
export type NlFlowRecord = FlowRecord & { readonly zone: number; readonly tuple?: Buffer };

/** One decoded entry; null when it is not a well-formed tuple pair of `family`. */
export function decodeEntry(payload: Buffer, family: IPFamily): NlFlowRecord | null {
  const a = new Attrs(payload, 4);
  const orig = decodeTuple(a.nested(CTA.TUPLE_ORIG), family);
  const reply = decodeTuple(a.nested(CTA.TUPLE_REPLY), family);
  if (!orig || !reply || orig.proto !== IPPROTO_UDP) return null;
  return {
    proto: 'udp',
    origSrc: orig.src,
    origDst: orig.dst,
    origSrcPort: orig.sport,
    origDstPort: orig.dport,
    replySrc: reply.src,
    replySrcPort: reply.sport,
    zone: a.u16be(CTA.ZONE) ?? 0,
    tuple: a.raw(CTA.TUPLE_ORIG)!,
  };
}

function decodeTuple(t: Attrs | undefined, family: IPFamily) {
  const ip = t?.nested(CTA_TUPLE.IP);
  const proto = t?.nested(CTA_TUPLE.PROTO);
  if (!ip || !proto) return null;
  const [s, d, len] = family === 'IPv4' ? [CTA_IP.V4_SRC, CTA_IP.V4_DST, 4] : [CTA_IP.V6_SRC, CTA_IP.V6_DST, 16];
  const src = ip.raw(s);
  const dst = ip.raw(d);
  const num = proto.u8(CTA_PROTO.NUM);
  if (src?.length !== len || dst?.length !== len || num === undefined) return null;
  return {
    src: formatIP(src),
    dst: formatIP(dst),
    proto: num,
    sport: proto.u16be(CTA_PROTO.SRC_PORT) ?? 0,
    dport: proto.u16be(CTA_PROTO.DST_PORT) ?? 0,
  };
}

/** The dump request: the family's UDP entries (the kernel filters by protocol when it can). */
export function listRequest(family: IPFamily, kernelFilter = true): Buffer {
  const attrs: Attr[] = kernelFilter
    ? [
        nested(CTA.TUPLE_ORIG, [nested(CTA_TUPLE.PROTO, [attr(CTA_PROTO.NUM, u8(IPPROTO_UDP))])]),
        nested(CTA.FILTER, [
          attr(CTA_FILTER_ORIG_FLAGS, u32(CTA_FILTER_FLAG_PROTO_NUM)),
          attr(CTA_FILTER_REPLY_FLAGS, u32(0)),
        ]),
      ]
    : [];
  return encodeMessage(msgType(IPCTNL_MSG_CT_GET), NLM_F.REQUEST | NLM_F.DUMP, 0, nfgenmsg(family), attrs);
}

/** Host-order u32 (CTA_FILTER flags are NLA_U32). */
function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b;
}

/**
 * CT_DELETE with a tuple as the kernel listed it: one allocation and a copy,
 * because building the attribute tree per flow dominated a large delete
 * (bench/README.md, conntrack).
 */
function deleteRequestRaw(family: IPFamily, tuple: Buffer, zone: number): Buffer {
  const attrLen = 4 + tuple.length;
  const padded = (attrLen + 3) & ~3;
  const len = 20 + padded + (zone ? 8 : 0);
  const b = Buffer.alloc(len);
  b.writeUInt32LE(len, 0);
  b.writeUInt16LE(msgType(IPCTNL_MSG_CT_DELETE), 4);
  b.writeUInt16LE(NLM_F.REQUEST | NLM_F.ACK, 6);
  b[16] = AF[family];
  b.writeUInt16LE(attrLen, 20);
  b.writeUInt16LE(CTA.TUPLE_ORIG | NLA_F_NESTED, 22);
  tuple.copy(b, 24);
  if (zone) {
    b.writeUInt16LE(6, 20 + padded);
    b.writeUInt16LE(CTA.ZONE, 22 + padded);
    b.writeUInt16BE(zone, 24 + padded);
  }
  return b;
}

/** The delete request for one entry, by its exact original tuple; null for an unusable record. */
export function deleteRequest(family: IPFamily, f: FlowToDelete & { zone?: number; tuple?: Buffer }): Buffer | null {
  if (f.tuple) return deleteRequestRaw(family, f.tuple, f.zone ?? 0);
  const src = f.origSrc === undefined ? null : parseIP(f.origSrc);
  const dst = parseIP(f.origDst);
  if (!src || !dst || src.family !== family || dst.family !== family || f.origSrcPort === undefined) return null;
  const [s, d] = family === 'IPv4' ? [CTA_IP.V4_SRC, CTA_IP.V4_DST] : [CTA_IP.V6_SRC, CTA_IP.V6_DST];
  const tuple = nested(CTA.TUPLE_ORIG, [
    nested(CTA_TUPLE.IP, [attr(s, Buffer.from(src.bytes)), attr(d, Buffer.from(dst.bytes))]),
    nested(CTA_TUPLE.PROTO, [
      attr(CTA_PROTO.NUM, u8(IPPROTO_UDP)),
      attr(CTA_PROTO.SRC_PORT, u16be(f.origSrcPort)),
      attr(CTA_PROTO.DST_PORT, u16be(f.origDstPort)),
    ]),
  ]);
  const attrs = f.zone ? [tuple, attr(CTA.ZONE, u16be(f.zone))] : [tuple];
  return encodeMessage(msgType(IPCTNL_MSG_CT_DELETE), NLM_F.REQUEST | NLM_F.ACK, 0, nfgenmsg(family), attrs);
}

/** ctnetlink for one network namespace. Calls are synchronous, bounded by the socket's receive timeout. */
export class CtNetlink implements ConntrackTable {
  readonly kind = 'netlink';
  private kernelFilter = true;

  constructor(private readonly sock: NetlinkSocket) {}

  /** Every UDP entry of the family; entries of other protocols are dropped if the kernel sent them. */
  listUDPFlows(family: IPFamily): NlFlowRecord[] {
    let msgs;
    try {
      msgs = this.sock.dump(listRequest(family, this.kernelFilter));
    } catch (e) {
      // Kernels before CTA_FILTER (5.8) reject the filter: list everything and filter here.
      if (!this.kernelFilter || (e as { errno?: number }).errno !== ERRNO.EINVAL) throw e;
      this.kernelFilter = false;
      msgs = this.sock.dump(listRequest(family, false));
    }
    const out: NlFlowRecord[] = [];
    for (const m of msgs) {
      const e = decodeEntry(m.payload, family);
      if (e) out.push(e);
    }
    return out;
  }

  /**
   * Delete each entry by its original tuple. ENOENT (it timed out or was
   * deleted meanwhile) is not an error. Records without the original source
   * cannot name one entry and are reported as errors.
   */
  deleteFlows(family: IPFamily, flows: readonly (FlowToDelete & { zone?: number; tuple?: Buffer })[]): DeleteResult {
    const errors: string[] = [];
    const reqs: Buffer[] = [];
    const sent: FlowToDelete[] = [];
    // Described only on error: formatting 100k flows would cost more than deleting them.
    const what = (f: FlowToDelete) =>
      `${f.origSrc ?? '*'}:${f.origSrcPort ?? '*'} -> ${normalizeIP(f.origDst) ?? f.origDst}:${f.origDstPort}`;
    for (const f of flows) {
      const r = deleteRequest(family, f);
      if (r) {
        reqs.push(r);
        sent.push(f);
      } else errors.push(`conntrack delete ${what(f)}: not a complete ${family} UDP tuple`);
    }
    let deleted = 0;
    this.sock.ackAll(reqs).forEach((res, i) => {
      if (res.errno === 0) deleted++;
      else if (res.errno !== ERRNO.ENOENT)
        errors.push(
          `conntrack delete ${what(sent[i]!)}: ${errnoName(res.errno)}${res.reason ? `: ${res.reason}` : ''}`,
        );
    });
    return { deleted, errors };
  }

  /** Stale flows are deleted one by one: each record is one exact entry. */
  deleteStale(family: IPFamily, flows: readonly (FlowRecord & { zone?: number; tuple?: Buffer })[]): DeleteResult {
    return this.deleteFlows(family, flows);
  }

  close(): void {
    this.sock.close();
  }
}

/** ctnetlink in our namespace or a named one; null when netlink is unavailable here. */
export async function openCtNetlink(netns?: string): Promise<CtNetlink | null> {
  const sock = await openNetlink(NETLINK_PROTOCOL.NETFILTER, netns === undefined ? {} : { netns });
  return sock ? new CtNetlink(sock) : null;
}
