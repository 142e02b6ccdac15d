// nf_tables netlink messages for the incremental fast path: the few object
// operations a partial sync of the 'lean' layout produces, encoded exactly as
// nft 1.0.6 encodes the same commands (checked against `nft --debug=netlink`
// and by reading the result back with `nft -j list`). Anything else returns
// null and the caller falls back to `nft -f`.
import { parseIP } from '../../core/ip.js';
import { attr, i32be, nested, str, u32 as u32le, u32be, type Attr } from '../netlink/attr.js';
import { encodeMessage, NLM_F } from '../netlink/message.js';
import type { Operation } from '../../dataplane/nftables/objects.js';
import type { NftFamily } from '../../dataplane/nftables/names.js';

export const NFNL_SUBSYS_NFTABLES = 10;
export const NFNL_MSG_BATCH_BEGIN = 16;
export const NFNL_MSG_BATCH_END = 17;
export const NFT_MSG = {
  NEWCHAIN: 3,
  DELCHAIN: 5,
  NEWRULE: 6,
  DELRULE: 8,
  NEWSET: 9,
  DELSET: 11,
  NEWSETELEM: 12,
  DELSETELEM: 14,
  GETGEN: 16,
} as const;
export { NLM_F };
const NFPROTO = { ip: 2, ip6: 10 } as const;
const PROTO: Record<string, number> = { tcp: 6, udp: 17, sctp: 132 };
const NFT_REG_1 = 1;
const NFT_REG_2 = 2;
const NFT_GOTO = -4;
const NFT_JUMP = -3;

const u32 = u32be; // nf_tables integers are network order
const i32 = i32be;
const A = attr;
const N = nested;

/** nlmsghdr + nfgenmsg (family, version 0, resource id in network order) + attributes. */
export function nlMessage(
  type: number,
  flags: number,
  seq: number,
  family: number,
  resId: number,
  attrs: Attr[],
): Buffer {
  const nfgen = Buffer.alloc(4);
  nfgen.writeUInt8(family, 0);
  nfgen.writeUInt16BE(resId, 2);
  return encodeMessage(type, flags, seq, nfgen, attrs);
}

const expr = (name: string, data: Attr[]): Attr =>
  N(1 /* NFTA_LIST_ELEM */, [A(1 /* NFTA_EXPR_NAME */, str(name)), N(2 /* NFTA_EXPR_DATA */, data)]);
const dataValue = (b: Buffer): Attr => N(3 /* NFTA_CMP_DATA */, [A(1 /* NFTA_DATA_VALUE */, b)]);
const cmpEq = (reg: number, b: Buffer) => expr('cmp', [A(1, u32(reg)), A(2, u32(0)), dataValue(b)]);

/**
 * Expressions of the lean layout's DNAT rules:
 *   [numgen random mod K 0] meta l4proto P dnat to IP:port
 */
function dnatRuleExprs(family: NftFamily, text: string): Attr[] | null {
  const m = /^(?:numgen random mod (\d+) 0 )?meta l4proto (tcp|udp|sctp) dnat to (\S+)$/.exec(text);
  if (!m) return null;
  const hp = /^\[?([^\]]+?)\]?:(\d+)$/.exec(m[3]!);
  const ip = hp ? parseIP(hp[1]) : null;
  if (!hp || !ip || (ip.family === 'IPv4') !== (family === 'ip')) return null;
  const out: Attr[] = [];
  if (m[1] !== undefined) {
    out.push(
      expr('numgen', [A(1, u32(NFT_REG_1)), A(2, u32(Number(m[1]))), A(3, u32(1 /* NFT_NG_RANDOM */)), A(4, u32(0))]),
    );
    out.push(cmpEq(NFT_REG_1, u32(0)));
  }
  out.push(expr('meta', [A(2 /* KEY */, u32(16 /* NFT_META_L4PROTO */)), A(1 /* DREG */, u32(NFT_REG_1))]));
  out.push(cmpEq(NFT_REG_1, Buffer.from([PROTO[m[2]!]!])));
  out.push(expr('immediate', [A(1, u32(NFT_REG_1)), N(2, [A(1, Buffer.from(ip.bytes))])]));
  const port = Buffer.alloc(2);
  port.writeUInt16BE(Number(hp[2]));
  out.push(expr('immediate', [A(1, u32(NFT_REG_2)), N(2, [A(1, port)])]));
  // As nft: min registers only, flags PROTO_SPECIFIED (the kernel adds MAP_IPS).
  out.push(
    expr('nat', [
      A(1, u32(1 /* NFT_NAT_DNAT */)),
      A(2, u32(NFPROTO[family])),
      A(3, u32(NFT_REG_1)),
      A(5, u32(NFT_REG_2)),
      A(7, u32(2 /* NF_NAT_RANGE_PROTO_SPECIFIED */)),
    ]),
  );
  return out;
}

/**
 * Expressions of the 'maps' layout's one DNAT rule per policy chain:
 *   meta l4proto P dnat ip addr . port to numgen random mod M map @m
 * As nft: the numgen value is converted to network order before the lookup,
 * whose 8 (20) data bytes land in NFT_REG_1: address, then the port at
 * 32-bit register 9 (IPv4) or NFT_REG_2 (IPv6, after 16 address bytes).
 */
function dnatMapRuleExprs(family: NftFamily, text: string): Attr[] | null {
  const m = /^meta l4proto (tcp|udp|sctp) dnat (ip6?) addr \. port to numgen random mod (\d+) map @(\S+)$/.exec(text);
  if (!m || m[2] !== family) return null;
  return [
    expr('meta', [A(2 /* KEY */, u32(16 /* NFT_META_L4PROTO */)), A(1 /* DREG */, u32(NFT_REG_1))]),
    cmpEq(NFT_REG_1, Buffer.from([PROTO[m[1]!]!])),
    expr('numgen', [A(1, u32(NFT_REG_1)), A(2, u32(Number(m[3]))), A(3, u32(1 /* NFT_NG_RANDOM */)), A(4, u32(0))]),
    expr('byteorder', [
      A(1, u32(NFT_REG_1)),
      A(2, u32(NFT_REG_1)),
      A(3, u32(1 /* HTON */)),
      A(4, u32(4)),
      A(5, u32(4)),
    ]),
    // No SET_ID (nft sends one): the kernel finds the set by name, also when
    // it is created earlier in the same batch.
    expr('lookup', [A(2 /* SREG */, u32(NFT_REG_1)), A(3 /* DREG */, u32(NFT_REG_1)), A(1 /* SET */, str(m[4]!))]),
    // As nft: no flags here (the kernel derives them from the registers).
    expr('nat', [
      A(1, u32(1 /* NFT_NAT_DNAT */)),
      A(2, u32(NFPROTO[family])),
      A(3, u32(NFT_REG_1)),
      A(5, u32(family === 'ip' ? 9 : NFT_REG_2)),
    ]),
  ];
}

/** nft's proto_desc ids of the transport headers (udata of `tcp dport` etc.). */
const L4_DESC: Record<string, number> = { tcp: 8, udp: 6, sctp: 10 };

/** nft's one-byte-type, one-byte-length udata TLV. */
const tlv = (type: number, v: Buffer) => Buffer.concat([Buffer.from([type, v.length]), v]);
const payloadUdata = (desc: number, field: number) =>
  Buffer.concat([tlv(0, u32le(7 /* payload */)), tlv(1, Buffer.concat([tlv(0, u32le(desc)), tlv(1, u32le(field))]))]);

/**
 * NEWSET of a 'maps'-layout endpoint map: `typeof numgen random mod M :
 * ip daddr . tcp dport ; flags interval` (udp, sctp). The udata is what nft stores to
 * print the typeof back (byte orders, then key and data expressions).
 */
function endpointsMapAttrs(
  family: NftFamily,
  name: string,
  typeOf: string | undefined,
  flags: readonly string[] | undefined,
  id: number,
): Attr[] | null {
  const m = /^numgen random mod (\d+) : (ip6?) daddr \. (tcp|udp|sctp) dport$/.exec(typeOf ?? '');
  if (!m || m[2] !== family || (flags ?? []).join(',') !== 'interval') return null;
  const keyTypeof = Buffer.concat([
    tlv(0, u32le(0x17 /* numgen */)),
    tlv(1, Buffer.concat([tlv(0, u32le(1)), tlv(1, u32le(Number(m[1]))), tlv(2, u32le(0))])),
  ]);
  const addr = family === 'ip' ? payloadUdata(12 /* ip */, 12 /* daddr */) : payloadUdata(13 /* ip6 */, 9 /* daddr */);
  const dataTypeof = Buffer.concat([
    tlv(0, u32le(13 /* concat */)),
    tlv(1, Buffer.concat([tlv(0, addr), tlv(1, payloadUdata(L4_DESC[m[3]!]!, 2 /* dport */))])),
  ]);
  const udata = Buffer.concat([
    tlv(0, u32le(1)),
    tlv(1, u32le(0)),
    tlv(3, keyTypeof),
    tlv(4, dataTypeof),
    tlv(6, u32le(0)),
  ]);
  const addrType = family === 'ip' ? 7 : 8;
  return [
    A(2, str(name)),
    A(3, u32(0x4 | 0x8 /* NFT_SET_INTERVAL | NFT_SET_MAP */)),
    A(4, u32(4 /* integer */)),
    A(5, u32(4)),
    A(6, u32((addrType << 6) | 13 /* inet_service */)),
    A(7, u32(family === 'ip' ? 8 : 20)),
    A(10, u32(id)),
    A(13, udata),
  ];
}

/**
 * An endpoint-map interval "lo-hi" : IP . port, as nft sends it to an
 * rbtree set: the start element with the data, then an end element at hi+1
 * flagged NFT_SET_ELEM_INTERVAL_END. Keys are network order (see the rule's
 * byteorder). Deletes carry both keys and no data.
 */
function intervalElements(
  family: NftFamily,
  key: readonly string[],
  value: readonly string[] | undefined,
  add: boolean,
): Attr[] | null {
  const m = key.length === 1 ? /^(\d+)-(\d+)$/.exec(key[0]!) : null;
  if (!m || Number(m[2]) < Number(m[1]) || Number(m[2]) >= 0xffffffff) return null;
  const start: Attr[] = [N(1 /* KEY */, [A(1, u32(Number(m[1])))])];
  if (add) {
    const ip = parseIP(value?.[0]);
    const port = Number(value?.[1]);
    if (!ip || (ip.family === 'IPv4') !== (family === 'ip') || value?.length !== 2 || !(port >= 0 && port <= 65535))
      return null;
    const p = Buffer.alloc(4);
    p.writeUInt16BE(port);
    start.push(N(2 /* DATA */, [A(1, Buffer.concat([Buffer.from(ip.bytes), p]))]));
  }
  const end: Attr[] = [A(3 /* FLAGS */, u32(1 /* NFT_SET_ELEM_INTERVAL_END */)), N(1, [A(1, u32(Number(m[2]) + 1))])];
  return [N(1, start), N(2, end)]; // list index as type, as libnftnl
}

/** A set element key: fields concatenated, each padded to 4 bytes. */
function elementKey(fields: readonly string[]): Buffer | null {
  const parts: Buffer[] = [];
  for (const f of fields) {
    let b: Buffer;
    if (/^[0-9]+$/.test(f)) {
      b = Buffer.alloc(4);
      b.writeUInt16BE(Number(f));
    } else if (PROTO[f] !== undefined) {
      b = Buffer.alloc(4);
      b.writeUInt8(PROTO[f]!);
    } else {
      const ip = parseIP(f);
      if (!ip) return null;
      b = Buffer.from(ip.bytes);
    }
    parts.push(b);
  }
  return Buffer.concat(parts);
}

function verdict(v: readonly string[] | undefined): Attr | null {
  const t = (v ?? []).join(' ').split(' ');
  if (t[0] === 'goto' || t[0] === 'jump') {
    return N(2 /* NFTA_SET_ELEM_DATA */, [
      N(2 /* NFTA_DATA_VERDICT */, [A(1, i32(t[0] === 'goto' ? NFT_GOTO : NFT_JUMP)), A(2, str(t[1]!))]),
    ]);
  }
  if (t[0] === 'drop' && t.length === 1) return N(2, [N(2, [A(1, i32(0))])]);
  return null;
}

/** nft's udata TLV for an element comment (NFTNL_UDATA_SET_ELEM_COMMENT). */
function commentUdata(c: string): Buffer {
  const s = str(c);
  return Buffer.concat([Buffer.from([0, s.length]), s]);
}

export interface EncodedOp {
  readonly type: number;
  readonly flags: number;
  readonly attrs: Attr[];
}

/** How the fast path treats a set or map: a plain set, a verdict map, or a 'maps'-layout endpoint map. */
export type SetKind = boolean | 'endpoints';

let setId = 0;

/**
 * Encode one operation, or null when the fast path does not support it (the
 * whole transaction then goes through `nft -f`). setIsMap: true for verdict
 * maps, false for sets, 'endpoints' for endpoint maps, undefined if unknown.
 */
export function encodeOperation(
  op: Operation,
  family: NftFamily,
  table: string,
  setIsMap: (name: string) => SetKind | undefined,
): EncodedOp | null {
  const o = op.object;
  const T = A(1, str(table));
  const t = (n: number) => (NFNL_SUBSYS_NFTABLES << 8) | n;
  if (o.kind === 'map' && setIsMap(o.name) === 'endpoints') {
    if (op.verb === 'flush') return { type: t(NFT_MSG.DELSETELEM), flags: 0, attrs: [T, A(2, str(o.name))] };
    if (op.verb === 'delete') return { type: t(NFT_MSG.DELSET), flags: 0, attrs: [T, A(2, str(o.name))] };
    setId = (setId % 0xffff) + 1;
    const attrs = endpointsMapAttrs(family, o.name, o.typeOf, o.flags, setId);
    return attrs ? { type: t(NFT_MSG.NEWSET), flags: NLM_F.CREATE, attrs: [T, ...attrs] } : null;
  }
  if (o.kind === 'element' && (op.verb === 'add' || op.verb === 'delete') && setIsMap(o.set) === 'endpoints') {
    const els = intervalElements(family, o.key, o.value, op.verb === 'add');
    if (!els) return null;
    return {
      type: t(op.verb === 'add' ? NFT_MSG.NEWSETELEM : NFT_MSG.DELSETELEM),
      flags: op.verb === 'add' ? NLM_F.CREATE : 0,
      attrs: [T, A(2, str(o.set)), N(3, els)],
    };
  }
  if (o.kind === 'chain' && o.type === undefined && o.comment === undefined) {
    if (op.verb === 'add') return { type: t(NFT_MSG.NEWCHAIN), flags: NLM_F.CREATE, attrs: [T, A(3, str(o.name))] };
    if (op.verb === 'delete') return { type: t(NFT_MSG.DELCHAIN), flags: 0, attrs: [T, A(3, str(o.name))] };
    if (op.verb === 'flush') return { type: t(NFT_MSG.DELRULE), flags: 0, attrs: [T, A(2, str(o.name))] };
  }
  if (o.kind === 'rule' && op.verb === 'add' && o.comment === undefined) {
    const exprs = dnatRuleExprs(family, o.rule) ?? dnatMapRuleExprs(family, o.rule);
    if (!exprs) return null;
    return {
      type: t(NFT_MSG.NEWRULE),
      flags: NLM_F.CREATE | NLM_F.APPEND,
      attrs: [T, A(2, str(o.chain)), N(4, exprs)],
    };
  }
  if (o.kind === 'element' && (op.verb === 'add' || op.verb === 'delete')) {
    const isMap = setIsMap(o.set);
    if (isMap === undefined) return null;
    const key = elementKey(o.key);
    if (!key) return null;
    const el: Attr[] = [N(1 /* KEY */, [A(1 /* NFTA_DATA_VALUE */, key)])];
    if (op.verb === 'add') {
      if (isMap) {
        const v = verdict(o.value);
        if (!v) return null;
        el.push(v);
      }
      if (o.comment !== undefined) el.push(A(6 /* USERDATA */, commentUdata(o.comment)));
    }
    return {
      type: t(op.verb === 'add' ? NFT_MSG.NEWSETELEM : NFT_MSG.DELSETELEM),
      flags: op.verb === 'add' ? NLM_F.CREATE : 0,
      attrs: [T, A(2, str(o.set)), N(3, [N(1 /* NFTA_LIST_ELEM */, el)])],
    };
  }
  return null;
}

/** BATCH_BEGIN, the operations, BATCH_END, each op acked; seqs start at `seq`. */
export function encodeBatch(
  ops: readonly EncodedOp[],
  family: NftFamily,
  seq: number,
): { buf: Buffer; seqs: number[] } {
  const fam = NFPROTO[family];
  const parts = [nlMessage(NFNL_MSG_BATCH_BEGIN, NLM_F.REQUEST, seq, 0, NFNL_SUBSYS_NFTABLES, [])];
  const seqs: number[] = [];
  ops.forEach((op, i) => {
    seqs.push(seq + 1 + i);
    parts.push(nlMessage(op.type, NLM_F.REQUEST | NLM_F.ACK | op.flags, seq + 1 + i, fam, 0, op.attrs));
  });
  parts.push(nlMessage(NFNL_MSG_BATCH_END, NLM_F.REQUEST, seq + 1 + ops.length, 0, NFNL_SUBSYS_NFTABLES, []));
  return { buf: Buffer.concat(parts), seqs };
}
