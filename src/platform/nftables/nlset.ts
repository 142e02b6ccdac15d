// Sets, maps and their elements as nf_tables messages, exactly as nft 1.0.6
// writes them for the same `nft -f` lines (checked by reading both back from
// the kernel, test/e2e/nftables-parity.test.ts):
//
//   - named sets and maps: key/data types (nft datatype ids, 6 bits per
//     concatenated field), flags, timeout, and the user data nft stores to
//     print them back (byte orders, a marker for concatenated keys, comment);
//   - elements: keys (each field of a concatenation padded to 4 bytes),
//     verdicts, `addr . port` data, comments;
//   - the anonymous sets and maps a rule carries inline (`{ a, b }`), which
//     nft creates in the same batch, just before the rule, and the rule names
//     by "__set%d"/"__map%d" plus a batch-local set id.
import { parseCIDR, parseIP } from '../../core/ip.js';
import type { NftFamily } from '../../dataplane/nftables/names.js';
import type { Element, NftMap, NftSet } from '../../dataplane/nftables/objects.js';
import { hostU32 } from './nlexpr.js';
import type { NlWriter } from './nlwriter.js';

export const NFPROTO: Record<NftFamily, number> = { ip: 2, ip6: 10 };

/** nft datatype ids. */
export const TYPE = {
  VERDICT: 1,
  INTEGER: 4,
  IPADDR: 7,
  IP6ADDR: 8,
  INET_PROTOCOL: 12,
  INET_SERVICE: 13,
} as const;
const TYPE_NAMES: Record<string, number> = {
  ipv4_addr: TYPE.IPADDR,
  ipv6_addr: TYPE.IP6ADDR,
  inet_proto: TYPE.INET_PROTOCOL,
  inet_service: TYPE.INET_SERVICE,
  integer: TYPE.INTEGER,
};
const TYPE_LEN: Record<number, number> = {
  [TYPE.IPADDR]: 4,
  [TYPE.IP6ADDR]: 16,
  [TYPE.INET_PROTOCOL]: 1,
  [TYPE.INET_SERVICE]: 2,
  [TYPE.INTEGER]: 4,
};
const VERDICT_DATATYPE = 0xffffff00;

const SET_F = { ANONYMOUS: 0x1, CONSTANT: 0x2, INTERVAL: 0x4, MAP: 0x8, TIMEOUT: 0x10, EVAL: 0x20 } as const;
const ELEM_F_INTERVAL_END = 0x1;
export const PROTO: Record<string, number> = { tcp: 6, udp: 17, sctp: 132 };

/** What the encoder needs to know of a named set or map to write its elements. */
export interface SetSchema {
  readonly fields: readonly number[];
  readonly interval: boolean;
  /** none: a set; verdict: a verdict map; addrport: an endpoint map (`addr . port`); service: a port map. */
  readonly data: 'none' | 'verdict' | 'addrport' | 'service';
}

/** nft's one-byte-type, one-byte-length user-data TLV. */
export function tlv(type: number, v: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from([type, v.length]), v]);
}
const cstr = (s: string) => Buffer.from(`${s}\0`);
const u32 = hostU32;

function parseFields(text: string): number[] | null {
  const out: number[] = [];
  for (const f of text.split(' . ')) {
    const t = TYPE_NAMES[f.trim()];
    if (t === undefined) return null;
    out.push(t);
  }
  return out;
}

function keyLen(fields: readonly number[]): number {
  if (fields.length === 1) return TYPE_LEN[fields[0]!]!;
  return fields.reduce((n, t) => n + ((TYPE_LEN[t]! + 3) & ~3), 0);
}

const packType = (fields: readonly number[]) => fields.reduce((acc, t) => acc * 64 + t, 0);

/** The schema of a set or map as the renderer declares it, or null for a type we do not write. */
export function schemaOf(o: NftSet | NftMap): SetSchema | null {
  const [keyText, dataText] = o.type.split(' : ');
  const fields = parseFields(keyText ?? '');
  if (!fields) return null;
  const interval = (o.flags ?? []).includes('interval');
  if (o.kind === 'set') return dataText === undefined ? { fields, interval, data: 'none' } : null;
  if (dataText === 'verdict') return { fields, interval, data: 'verdict' };
  if (dataText === 'inet_service') return { fields, interval, data: 'service' };
  const d = parseFields(dataText ?? '');
  return d && d.length === 2 && (d[0] === TYPE.IPADDR || d[0] === TYPE.IP6ADDR) && d[1] === TYPE.INET_SERVICE
    ? { fields, interval, data: 'addrport' }
    : null;
}

/**
 * NEWSET attributes (after the table) of a named set or map the renderer
 * declares with `type`. Endpoint maps declared with `typeof` are written by
 * endpointsMapAttrs. Null for anything else.
 */
export function writeNamedSet(w: NlWriter, o: NftSet | NftMap, id: number): boolean {
  if (o.kind === 'map' && o.typeOf !== undefined) return false;
  const schema = schemaOf(o);
  if (!schema) return false;
  const flags = new Set(o.flags ?? []);
  for (const f of flags) if (!['interval', 'dynamic', 'timeout'].includes(f)) return false;
  let bits = 0;
  if (flags.has('interval')) bits |= SET_F.INTERVAL;
  if (o.kind === 'map') bits |= SET_F.MAP;
  if (flags.has('timeout')) bits |= SET_F.TIMEOUT;
  if (flags.has('dynamic')) bits |= SET_F.EVAL;
  const concat = schema.fields.length > 1;
  w.str(2, o.name).u32be(3, bits).u32be(4, packType(schema.fields)).u32be(5, keyLen(schema.fields));
  const service = schema.data === 'service';
  if (o.kind === 'map')
    w.u32be(6, service ? TYPE.INET_SERVICE : VERDICT_DATATYPE).u32be(7, service ? TYPE_LEN[TYPE.INET_SERVICE]! : 0);
  w.u32be(10, id);
  if (o.kind === 'set' && o.timeoutSeconds !== undefined) w.u64be(11, o.timeoutSeconds * 1000);
  const ud: Buffer[] = [tlv(0, u32(concat ? 0 : 2 /* BYTEORDER_BIG_ENDIAN */))];
  if (o.kind === 'map') ud.push(tlv(1, u32(service ? 2 : 0)));
  // nft 1.0.6 marks a concatenated `type` key with an empty concat typeof.
  if (concat) ud.push(tlv(3, Buffer.concat([tlv(0, u32(13 /* EXPR_CONCAT */)), tlv(1, Buffer.alloc(0))])));
  if (o.kind === 'map') ud.push(tlv(6, u32(0)));
  if (o.comment !== undefined) ud.push(tlv(7, cstr(o.comment)));
  w.bytes(13, Buffer.concat(ud));
  return true;
}

/** One key field as bytes, or null when the text does not fit the type. */
function fieldBytes(type: number, text: string): Uint8Array | null {
  if (type === TYPE.IPADDR || type === TYPE.IP6ADDR) {
    const ip = parseIP(text);
    if (!ip || (ip.family === 'IPv4') !== (type === TYPE.IPADDR)) return null;
    return ip.bytes;
  }
  if (type === TYPE.INET_PROTOCOL) {
    const p = PROTO[text] ?? (/^\d+$/.test(text) ? Number(text) : undefined);
    return p === undefined || p > 255 ? null : Uint8Array.of(p);
  }
  if (type === TYPE.INET_SERVICE) {
    if (!/^\d+$/.test(text) || Number(text) > 65535) return null;
    const b = Buffer.alloc(2);
    b.writeUInt16BE(Number(text));
    return b;
  }
  return null;
}

export function keyBytes(fields: readonly number[], key: readonly string[]): Buffer | null {
  if (key.length !== fields.length) return null;
  if (fields.length === 1) {
    const b = fieldBytes(fields[0]!, key[0]!);
    return b ? Buffer.from(b) : null;
  }
  const out = Buffer.alloc(keyLen(fields));
  let off = 0;
  for (let i = 0; i < fields.length; i++) {
    const b = fieldBytes(fields[i]!, key[i]!);
    if (!b) return null;
    out.set(b, off);
    off += (b.length + 3) & ~3;
  }
  return out;
}

/** nft's element user data: the comment as TLV 0. */
export function commentUdata(c: string): Buffer {
  return tlv(0, cstr(c));
}

function writeVerdict(w: NlWriter, text: string): boolean {
  const t = text.split(' ');
  let code: number;
  if ((t[0] === 'goto' || t[0] === 'jump') && t.length === 2) code = t[0] === 'goto' ? -4 : -3;
  else if (t.length === 1 && (t[0] === 'drop' || t[0] === 'accept')) code = t[0] === 'drop' ? 0 : 1;
  else return false;
  const d = w.nest(2 /* NFTA_SET_ELEM_DATA */);
  const v = w.nest(2 /* NFTA_DATA_VERDICT */);
  w.i32be(1, code);
  if (t.length === 2) w.str(2, t[1]!);
  w.close(v).close(d);
  return true;
}

/**
 * One element of a named set or map into an open element list (the list
 * index is its attribute type, as libnftnl writes it). False when the element
 * does not fit the schema.
 */
export function writeElement(
  w: NlWriter,
  family: NftFamily,
  index: number,
  s: SetSchema,
  e: Element,
  add: boolean,
): boolean {
  if (s.data === 'addrport') return writeEndpointInterval(w, family, index, e, add);
  const key = keyBytes(s.fields, e.key);
  if (!key) return false;
  const el = w.nest(index);
  const k = w.nest(1 /* NFTA_SET_ELEM_KEY */);
  w.bytes(1, key).close(k);
  if (add) {
    if (s.data === 'verdict' && !writeVerdict(w, (e.value ?? []).join(' '))) return false;
    if (s.data === 'service') {
      const port = e.value?.length === 1 ? fieldBytes(TYPE.INET_SERVICE, e.value[0]!) : null;
      if (!port) return false;
      const d = w.nest(2 /* NFTA_SET_ELEM_DATA */);
      w.bytes(1, port).close(d);
    }
    if (s.data === 'none' && e.value !== undefined) return false;
    if (e.comment !== undefined) w.bytes(6 /* NFTA_SET_ELEM_USERDATA */, commentUdata(e.comment));
  }
  w.close(el);
  return true;
}

/**
 * An endpoint-map interval "lo-hi" : IP . port, as nft sends it to an rbtree
 * set: the start element with the data, then an end element at hi+1 flagged
 * INTERVAL_END. Keys are network order (the rule converts numgen's value
 * with byteorder). Deletes carry both keys and no data. Uses two list slots.
 */
function writeEndpointInterval(w: NlWriter, family: NftFamily, index: number, e: Element, add: boolean): boolean {
  const m = e.key.length === 1 ? /^(\d+)-(\d+)$/.exec(e.key[0]!) : null;
  if (!m || Number(m[2]) < Number(m[1]) || Number(m[2]) >= 0xffffffff) return false;
  let data: Buffer | null = null;
  if (add) {
    const ip = parseIP(e.value?.[0]);
    const port = Number(e.value?.[1]);
    if (!ip || (ip.family === 'IPv4') !== (family === 'ip') || e.value?.length !== 2 || !(port >= 0 && port <= 65535))
      return false;
    data = Buffer.alloc(ip.bytes.length + 4);
    data.set(ip.bytes, 0);
    data.writeUInt16BE(port, ip.bytes.length);
  }
  const be = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    return b;
  };
  const start = w.nest(index);
  const k = w.nest(1);
  w.bytes(1, be(Number(m[1]))).close(k);
  if (data) {
    const d = w.nest(2);
    w.bytes(1, data).close(d);
  }
  w.close(start);
  const end = w.nest(index + 1);
  w.u32be(3, ELEM_F_INTERVAL_END);
  const k2 = w.nest(1);
  w.bytes(1, be(Number(m[2]) + 1)).close(k2);
  w.close(end);
  return true;
}

/** List slots an element uses (endpoint intervals use two). */
export function elementSlots(s: SetSchema): number {
  return s.data === 'addrport' ? 2 : 1;
}

// ---- anonymous sets and maps of a rule ----

/** An inline set or map of a rule, created in the batch just before it. */
export type AnonSet =
  | {
      readonly kind: 'addrs';
      readonly family: NftFamily;
      /** payload field of `ip saddr`/`ip daddr` (for the typeof user data). */
      readonly field: 'saddr' | 'daddr';
      /** Merged, sorted intervals [start, end] (inclusive), or plain addresses. */
      readonly interval: boolean;
      readonly items: ReadonlyArray<readonly [bigint, bigint]>;
      /** Elements nft counted in the set's size (see addrsElements). */
    }
  | { readonly kind: 'dnatmap'; readonly family: NftFamily; readonly entries: ReadonlyArray<readonly [number, Buffer]> }
  | { readonly kind: 'vmap'; readonly entries: ReadonlyArray<readonly [number, number, string]> }
  | { readonly kind: 'protos'; readonly protos: readonly number[] };

const addrBits = (f: NftFamily) => (f === 'ip' ? 32n : 128n);

function toBig(bytes: Uint8Array): bigint {
  let v = 0n;
  for (const b of bytes) v = (v << 8n) | BigInt(b);
  return v;
}
function fromBig(v: bigint, len: number): Buffer {
  const out = Buffer.alloc(len);
  for (let i = len - 1; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

/**
 * The inline address list of a rule (`{ 10.0.0.0/8, 192.0.2.1 }`) as nft
 * evaluates it: with any prefix, an interval set whose overlapping and
 * adjacent ranges are merged (nft's automerge); with plain addresses only, a
 * plain set. Null when an item is not an address of the family.
 */
export function addrsSet(family: NftFamily, field: 'saddr' | 'daddr', items: readonly string[]): AnonSet | null {
  const bits = addrBits(family);
  const ranges: Array<[bigint, bigint]> = [];
  let interval = false;
  for (const it of items) {
    if (it.includes('/')) {
      const c = parseCIDR(it);
      if (!c || (c.family === 'IPv4') !== (family === 'ip')) return null;
      interval = true;
      const start = toBig(c.network);
      const hostBits = bits - BigInt(c.prefix);
      ranges.push([start, start + (1n << hostBits) - 1n]);
    } else {
      const ip = parseIP(it);
      if (!ip || (ip.family === 'IPv4') !== (family === 'ip')) return null;
      const v = toBig(ip.bytes);
      ranges.push([v, v]);
    }
  }
  ranges.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  if (!interval) {
    const uniq = ranges.filter((r, i) => i === 0 || r[0] !== ranges[i - 1]![0]);
    return { kind: 'addrs', family, field, interval, items: uniq };
  }
  const merged: Array<[bigint, bigint]> = [];
  for (const r of ranges) {
    const last = merged[merged.length - 1];
    if (last && r[0] <= last[1] + 1n) {
      if (r[1] > last[1]) last[1] = r[1];
    } else merged.push([r[0], r[1]]);
  }
  return { kind: 'addrs', family, field, interval, items: merged };
}

/** nft's payload typeof user data of `ip saddr` etc.: protocol desc and field ids. */
function payloadTypeof(family: NftFamily, field: 'saddr' | 'daddr'): Buffer {
  const desc = family === 'ip' ? 12 : 13;
  const f = family === 'ip' ? (field === 'saddr' ? 11 : 12) : field === 'saddr' ? 8 : 9;
  return Buffer.concat([tlv(0, u32(7 /* EXPR_PAYLOAD */)), tlv(1, Buffer.concat([tlv(0, u32(desc)), tlv(1, u32(f))]))]);
}

interface ElemOut {
  key: Buffer;
  end?: boolean;
  open?: boolean;
  data?: Buffer;
  verdict?: [number, string];
}

/** The elements nft sends for an inline set, and the size it declares (see the file comment). */
function anonElements(a: AnonSet): { elems: ElemOut[]; size: number } {
  if (a.kind === 'dnatmap')
    return { elems: a.entries.map(([k, d]) => ({ key: Buffer.from(u32(k)), data: d })), size: a.entries.length };
  if (a.kind === 'vmap')
    return {
      elems: a.entries.map(([k, code, chain]) => ({ key: Buffer.from(u32(k)), verdict: [code, chain] })),
      size: a.entries.length,
    };
  if (a.kind === 'protos') return { elems: a.protos.map((p) => ({ key: Buffer.of(p) })), size: a.protos.length };
  const len = a.family === 'ip' ? 4 : 16;
  if (!a.interval) return { elems: a.items.map(([v]) => ({ key: fromBig(v, len) })), size: a.items.length };
  return intervalElements(a.family, a.items);
}

/**
 * Sorted address intervals as nft sends them to an interval set: a leading
 * end element at 0 unless the first starts there, then each interval's start
 * and the end element one past its last address (none for an interval open
 * to the top, whose start is flagged instead), and the size nft declares.
 */
function intervalElements(family: NftFamily, items: ReadonlyArray<readonly [bigint, bigint]>) {
  const len = family === 'ip' ? 4 : 16;
  const max = (1n << addrBits(family)) - 1n;
  const elems: ElemOut[] = [];
  if (items.length > 0 && items[0]![0] > 0n) elems.push({ key: fromBig(0n, len), end: true });
  let open = false;
  for (const [s, e] of items) {
    if (e === max) {
      elems.push({ key: fromBig(s, len), open: true });
      open = true;
    } else {
      elems.push({ key: fromBig(s, len) });
      elems.push({ key: fromBig(e + 1n, len), end: true });
    }
  }
  // nft counts the end of an interval open to the top, which it does not send.
  return { elems, size: elems.length + (open ? 1 : 0) };
}

/**
 * The elements of a named interval set of addresses (`flags interval`, no
 * auto-merge) filled in the batch that creates it, as nft 1.0.6 sends them
 * from its cache: every prefix or address as an interval, sorted, with the
 * leading end element (it then repeats each `add element` line, which adds
 * nothing). Null when a key is not an address or prefix of the family, or
 * two overlap (nft refuses those).
 */
export function writeIntervalSet(w: NlWriter, family: NftFamily, keys: readonly string[]): boolean {
  const bits = addrBits(family);
  const ranges: Array<readonly [bigint, bigint]> = [];
  for (const k of keys) {
    const c = parseCIDR(k.includes('/') ? k : `${k}/${bits}`);
    if (!c || (c.family === 'IPv4') !== (family === 'ip')) return false;
    const start = toBig(c.network);
    ranges.push([start, start + (1n << (bits - BigInt(c.prefix))) - 1n]);
  }
  ranges.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  if (ranges.some((r, i) => i > 0 && r[0] <= ranges[i - 1]![1])) return false;
  writeElems(w, intervalElements(family, ranges).elems);
  return true;
}

/** NEWSET attributes (after the table) of an inline set or map. */
export function writeAnonSet(w: NlWriter, a: AnonSet, id: number): void {
  const size = anonElements(a).size;
  if (a.kind === 'protos') {
    w.str(2, '__set%d')
      .u32be(3, SET_F.ANONYMOUS | SET_F.CONSTANT)
      .u32be(4, TYPE.INET_PROTOCOL)
      .u32be(5, TYPE_LEN[TYPE.INET_PROTOCOL]!)
      .u32be(10, id);
    const desc = w.nest(9);
    w.u32be(1, size).close(desc);
    // Host byte order; typeof `meta l4proto` (EXPR_META, key NFT_META_L4PROTO).
    const metaTypeof = Buffer.concat([tlv(0, u32(9)), tlv(1, tlv(0, u32(16)))]);
    w.bytes(13, Buffer.concat([tlv(0, u32(1)), tlv(3, metaTypeof)]));
    return;
  }
  if (a.kind === 'addrs') {
    const t = a.family === 'ip' ? TYPE.IPADDR : TYPE.IP6ADDR;
    w.str(2, '__set%d')
      .u32be(3, SET_F.ANONYMOUS | SET_F.CONSTANT | (a.interval ? SET_F.INTERVAL : 0))
      .u32be(4, t)
      .u32be(5, TYPE_LEN[t]!)
      .u32be(10, id);
    const desc = w.nest(9);
    w.u32be(1, size).close(desc);
    const ud = [tlv(0, u32(2))];
    if (a.interval) ud.push(tlv(2, u32(1)) /* merge elements */);
    ud.push(tlv(3, payloadTypeof(a.family, a.field)));
    w.bytes(13, Buffer.concat(ud));
    return;
  }
  w.str(2, '__map%d')
    .u32be(3, SET_F.ANONYMOUS | SET_F.CONSTANT | SET_F.MAP)
    .u32be(4, TYPE.INTEGER)
    .u32be(5, 4);
  if (a.kind === 'dnatmap') {
    const addr = a.family === 'ip' ? TYPE.IPADDR : TYPE.IP6ADDR;
    w.u32be(6, addr * 64 + TYPE.INET_SERVICE).u32be(7, a.family === 'ip' ? 8 : 20);
  } else {
    w.u32be(6, VERDICT_DATATYPE).u32be(7, 0);
  }
  w.u32be(10, id);
  const desc = w.nest(9);
  w.u32be(1, size).close(desc);
  const ud = [tlv(0, u32(1 /* host byte order */)), tlv(1, u32(0))];
  if (a.kind === 'vmap') ud.push(tlv(4, Buffer.concat([tlv(0, u32(1 /* EXPR_VERDICT */)), tlv(1, Buffer.alloc(0))])));
  ud.push(tlv(6, u32(0)));
  w.bytes(13, Buffer.concat(ud));
}

/**
 * An element list attribute has a 16-bit length, so a large inline map (a
 * Maglev choice: 1021 verdicts naming endpoint chains) goes over several
 * NEWSETELEM messages, as nft sends it; a small one stays one message.
 */
const ELEM_LIST_BYTES_MAX = 60000;

/** Upper bound of one element's bytes in the list (attribute headers, padding). */
const elemBytes = (e: ElemOut) => 64 + e.key.length + (e.data?.length ?? 0) + (e.verdict?.[1].length ?? 0);

/** The NFTA_SET_ELEM_LIST_ELEMENTS of an inline set or map: one per NEWSETELEM message, in order. */
export function anonElementLists(a: AnonSet): Array<(w: NlWriter) => void> {
  const groups: ElemOut[][] = [[]];
  let bytes = 0;
  for (const e of anonElements(a).elems) {
    const n = elemBytes(e);
    if (bytes + n > ELEM_LIST_BYTES_MAX && groups[groups.length - 1]!.length > 0) {
      groups.push([]);
      bytes = 0;
    }
    groups[groups.length - 1]!.push(e);
    bytes += n;
  }
  return groups.map((g) => (w: NlWriter) => writeElems(w, g));
}

function writeElems(w: NlWriter, elems: readonly ElemOut[]): void {
  const list = w.nest(3);
  elems.forEach((e, i) => {
    const el = w.nest(i + 1);
    if (e.end) w.u32be(3, ELEM_F_INTERVAL_END);
    const k = w.nest(1);
    w.bytes(1, e.key).close(k);
    if (e.data) {
      const d = w.nest(2);
      w.bytes(1, e.data).close(d);
    }
    if (e.verdict) {
      const d = w.nest(2);
      const v = w.nest(2);
      w.i32be(1, e.verdict[0]).str(2, e.verdict[1]).close(v).close(d);
    }
    if (e.open) w.bytes(6, tlv(1 /* NFTNL_UDATA_SET_ELEM_FLAGS */, u32(1 /* INTERVAL_OPEN */)));
    w.close(el);
  });
  w.close(list);
}
