// Reading the kube-proxy table back over nf_tables netlink (feature gate
// NFTablesNetlink) instead of `nft -j list chains|sets|maps`: the same
// KernelSnapshot as readback.ts, without an `nft` process that first loads
// every rule of the family into its cache.
//
// Three dumps, each filtered to the table by the kernel: GETCHAIN (names),
// GETSET (names, key types, map flag), and GETSETELEM for each managed set.
// Element keys are raw bytes, each concatenated field padded to 4 bytes, and
// are formatted by the set's key type (nft's datatype ids, 6 bits per field)
// into the text the renderer writes; verdicts and comments likewise.
import { formatIP } from '../../core/ip.js';
import type { Element } from '../../dataplane/nftables/objects.js';
import { EMPTY_SNAPSHOT, type KernelSnapshot } from '../../dataplane/nftables/driver.js';
import { MANAGED_SETS } from '../../dataplane/nftables/static.js';
import type { NftFamily } from '../../dataplane/nftables/names.js';
import {
  Attrs,
  attr,
  encodeMessage,
  ERRNO,
  NetlinkError,
  NETLINK_PROTOCOL,
  NLM_F,
  openNetlink,
  str,
  u32be,
  type NetlinkSocket,
} from '../netlink/index.js';
import { ProxyError } from '../../core/errors.js';

const NFNL_SUBSYS_NFTABLES = 10;
const MSG = { GETTABLE: 1, GETCHAIN: 4, GETSET: 10, GETSETELEM: 13, GETOBJ: 19 } as const;
/** NFT_OBJECT_COUNTER, and the attributes of a counter object (nf_tables.h). */
const NFT_OBJECT_COUNTER = 1;
const OBJ = { TABLE: 1, NAME: 2, TYPE: 3, DATA: 4 } as const;
const COUNTER_PACKETS = 2;
const NFPROTO: Record<NftFamily, number> = { ip: 2, ip6: 10 };
const NFT_SET_MAP = 0x8;
const NFT_SET_ELEM_INTERVAL_END = 0x1;
/** nft datatype ids (nftables datatype.h). */
const TYPE = { VERDICT: 1, IPADDR: 7, IP6ADDR: 8, INET_PROTOCOL: 12, INET_SERVICE: 13 } as const;
const PROTO_NAMES: Record<number, string> = { 6: 'tcp', 17: 'udp', 132: 'sctp' };
const VERDICTS: Record<number, string> = {
  0: 'drop',
  1: 'accept',
  [-1]: 'continue',
  [-3]: 'jump',
  [-4]: 'goto',
  [-5]: 'return',
};

function request(cmd: number, family: NftFamily, flags: number, attrs: ReturnType<typeof attr>[]): Buffer {
  return encodeMessage(
    (NFNL_SUBSYS_NFTABLES << 8) | cmd,
    NLM_F.REQUEST | flags,
    0,
    Buffer.from([NFPROTO[family], 0, 0, 0]),
    attrs,
  );
}

/** The field types of a (possibly concatenated) key type, first field first. */
export function keyTypes(keyType: number): number[] {
  const out: number[] = [];
  for (let t = keyType; t > 0; t = Math.floor(t / 64)) out.unshift(t % 64);
  return out;
}

const FIELD_LEN: Record<number, number> = {
  [TYPE.IPADDR]: 4,
  [TYPE.IP6ADDR]: 16,
  [TYPE.INET_PROTOCOL]: 1,
  [TYPE.INET_SERVICE]: 2,
};

/** Key bytes -> the renderer's text fields; throws on a type we do not write. */
export function keyText(types: readonly number[], key: Buffer): string[] {
  const out: string[] = [];
  let off = 0;
  for (const t of types) {
    const len = FIELD_LEN[t];
    if (len === undefined || off + len > key.length)
      throw new ProxyError('KPT_LIVE_STATE_UNREADABLE', `unexpected set key type ${t}`);
    const b = key.subarray(off, off + len);
    if (t === TYPE.IPADDR || t === TYPE.IP6ADDR) out.push(formatIP(b));
    else if (t === TYPE.INET_PROTOCOL) out.push(PROTO_NAMES[b[0]!] ?? String(b[0]));
    else out.push(String(b.readUInt16BE(0)));
    off += (len + 3) & ~3;
  }
  return out;
}

function verdictText(data: Attrs | undefined): string {
  const v = data?.nested(2);
  const code = v?.raw(1);
  if (!v || !code || code.length < 4)
    throw new ProxyError('KPT_LIVE_STATE_UNREADABLE', 'map element without a verdict');
  const word = VERDICTS[code.readInt32BE(0)];
  if (word === undefined)
    throw new ProxyError('KPT_LIVE_STATE_UNREADABLE', `unexpected verdict code ${code.readInt32BE(0)}`);
  const chain = v.str(2);
  return chain === undefined ? word : `${word} ${chain}`;
}

/** The element comment nft stores in the element's user data (TLV type 0). */
function commentOf(udata: Buffer | undefined): string | undefined {
  for (let off = 0; udata && off + 2 <= udata.length; off += 2 + udata[off + 1]!) {
    const len = udata[off + 1]!;
    if (udata[off] === 0) return udata.toString('utf8', off + 2, off + 2 + len).replace(/\0+$/, '');
  }
  return undefined;
}

/** Names in a dump of GETCHAIN/GETSET replies. */
function names(msgs: ReturnType<NetlinkSocket['dump']>, nameAttr: number): Array<{ name: string; a: Attrs }> {
  return msgs.flatMap((m) => {
    const a = new Attrs(m.payload, 4);
    const name = a.str(nameAttr);
    return name === undefined ? [] : [{ name, a }];
  });
}

/** Whether `table` exists in `family`: one GETTABLE, which reads none of its rules. */
export function tableExistsNetlink(sock: NetlinkSocket, family: NftFamily, table: string): boolean {
  const [exists] = sock.ackAll([request(MSG.GETTABLE, family, NLM_F.ACK, [attr(1, str(table))])]);
  if (exists?.errno === ERRNO.ENOENT) return false;
  if (exists?.errno)
    throw new ProxyError(
      'KPT_LIVE_STATE_UNREADABLE',
      `nf_tables: cannot read table ${family} ${table}: errno ${exists.errno}`,
    );
  return true;
}

/** The snapshot of `table` in `family`, or EMPTY_SNAPSHOT when the table does not exist. */
export function readSnapshotNetlink(sock: NetlinkSocket, family: NftFamily, table: string): KernelSnapshot {
  if (!tableExistsNetlink(sock, family, table)) return EMPTY_SNAPSHOT;
  const chains = names(sock.dump(request(MSG.GETCHAIN, family, NLM_F.DUMP, [attr(1, str(table))])), 3).map(
    (c) => c.name,
  );
  const sets = names(sock.dump(request(MSG.GETSET, family, NLM_F.DUMP, [attr(1, str(table))])), 2);
  const elements = new Map<string, Element[]>();
  for (const { name, a } of sets) {
    if (!MANAGED_SETS.has(name)) continue;
    const isMap = ((a.u32be(3) ?? 0) & NFT_SET_MAP) !== 0;
    const types = keyTypes(a.u32be(4) ?? 0);
    const msgs = sock.dump(request(MSG.GETSETELEM, family, NLM_F.DUMP, [attr(1, str(table)), attr(2, str(name))]));
    const els: Element[] = [];
    for (const m of msgs) {
      for (const le of new Attrs(m.payload, 4).nested(3)?.entries ?? []) {
        const e = new Attrs(le.value);
        if (((e.u32be(3) ?? 0) & NFT_SET_ELEM_INTERVAL_END) !== 0) continue;
        const key = e.nested(1)?.raw(1);
        if (!key) throw new ProxyError('KPT_LIVE_STATE_UNREADABLE', `element of ${name} without a key`);
        const comment = commentOf(e.raw(6));
        els.push({
          kind: 'element',
          set: name,
          key: keyText(types, key),
          ...(isMap ? { value: [verdictText(e.nested(2))] } : {}),
          ...(comment !== undefined ? { comment } : {}),
        });
      }
    }
    elements.set(name, els);
  }
  return { chains, sets: sets.map((s) => s.name), elements };
}

/**
 * Packets of every named counter in `table` (one GETOBJ dump, filtered to the
 * table and to counters by the kernel); empty when the table does not exist.
 * `nft list counters table ...` answers the same, but first loads every rule
 * of the family into its cache: seconds at 10k Services, on every scrape.
 */
export function readCountersNetlink(sock: NetlinkSocket, family: NftFamily, table: string): Map<string, number> {
  const out = new Map<string, number>();
  let msgs: ReturnType<NetlinkSocket['dump']>;
  try {
    msgs = sock.dump(
      request(MSG.GETOBJ, family, NLM_F.DUMP, [attr(OBJ.TABLE, str(table)), attr(OBJ.TYPE, u32be(NFT_OBJECT_COUNTER))]),
    );
  } catch (err) {
    if (err instanceof NetlinkError && err.errno === ERRNO.ENOENT) return out;
    throw err;
  }
  for (const m of msgs) {
    const a = new Attrs(m.payload, 4);
    const name = a.str(OBJ.NAME);
    const packets = a.nested(OBJ.DATA)?.raw(COUNTER_PACKETS);
    if (name !== undefined && a.str(OBJ.TABLE) === table && packets?.length === 8)
      out.set(name, Number(packets.readBigUInt64BE(0)));
  }
  return out;
}

/**
 * readCountersNetlink over one netfilter socket opened at the first call and
 * shared by every later one; resolves to null where netlink cannot be opened.
 */
export function netlinkCounterReader(): (
  family: NftFamily,
  table: string,
) => Promise<ReadonlyMap<string, number> | null> {
  let sock: Promise<NetlinkSocket | null> | undefined;
  return async (family, table) => {
    const s = await (sock ??= openNetlink(NETLINK_PROTOCOL.NETFILTER));
    return s === null ? null : readCountersNetlink(s, family, table);
  };
}
