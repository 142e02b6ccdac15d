// The kernel's own view of one nftables table, dumped over nf_tables netlink
// (GETTABLE, GETCHAIN, GETSET, GETSETELEM of every set including anonymous
// ones, GETRULE) into a canonical text: every attribute, nested ones
// recursively, in hex, minus what differs between two identical tables in two
// namespaces (object handles, the generation in the message header). Two
// tables whose dumps are equal hold the same bytes in the kernel: the same
// expressions with the same registers and data, the same set flags, key and
// data types, user data, elements and comments.
import { Attrs, attr, encodeMessage, NLM_F, str, type NetlinkSocket } from '../../src/platform/netlink/index.js';
import type { NftFamily } from '../../src/dataplane/nftables/names.js';

const MSG = { GETTABLE: 1, GETCHAIN: 4, GETRULE: 7, GETSET: 10, GETSETELEM: 13 } as const;
const NFPROTO: Record<NftFamily, number> = { ip: 2, ip6: 10 };
/** Handle attributes per object kind: they number objects in creation order across the whole namespace. */
const HANDLES: Record<number, readonly number[]> = {
  [MSG.GETTABLE]: [4],
  [MSG.GETCHAIN]: [2],
  [MSG.GETRULE]: [3],
  [MSG.GETSET]: [16],
  [MSG.GETSETELEM]: [],
};

/** An interval-end element at key 0: the key (a data attribute holding a 32-bit 0), then the END flag. */
const ZERO_END = '    1 0800010000000000\n    3 00000001';

function request(cmd: number, family: NftFamily, attrs: ReturnType<typeof attr>[], flags: number = NLM_F.DUMP) {
  return encodeMessage((10 << 8) | cmd, NLM_F.REQUEST | flags, 0, Buffer.from([NFPROTO[family], 0, 0, 0]), attrs);
}

function render(buf: Buffer, depth: number, skip: readonly number[]): string[] {
  const out: string[] = [];
  let off = 0;
  while (off + 4 <= buf.length) {
    const len = buf.readUInt16LE(off);
    const rawType = buf.readUInt16LE(off + 2);
    if (len < 4 || off + len > buf.length) break;
    const type = rawType & 0x3fff;
    const v = buf.subarray(off + 4, off + len);
    if (!skip.includes(type)) {
      const pad = '  '.repeat(depth);
      if (rawType & 0x8000) out.push(`${pad}${type}:`, ...render(v, depth + 1, []));
      else out.push(`${pad}${type} ${v.toString('hex')}`);
    }
    off += (len + 3) & ~3;
  }
  return out;
}

/** Every object of `table` as canonical text, or null when the table does not exist. */
export function dumpTable(sock: NetlinkSocket, family: NftFamily, table: string): string | null {
  const t = attr(1, str(table));
  const [exists] = sock.ackAll([request(MSG.GETTABLE, family, [t], NLM_F.ACK)]);
  if (exists?.errno) return null;
  const lines: string[] = [];
  const section = (cmd: number, label: string, extra: ReturnType<typeof attr>[] = []) => {
    for (const m of sock.dump(request(cmd, family, [t, ...extra]))) {
      lines.push(`${label}`, ...render(m.payload.subarray(4), 1, HANDLES[cmd]!));
    }
  };
  for (const m of sock.dump(request(MSG.GETTABLE, family, []))) {
    if (new Attrs(m.payload, 4).str(1) === table)
      lines.push('table', ...render(m.payload.subarray(4), 1, HANDLES[MSG.GETTABLE]!));
  }
  section(MSG.GETCHAIN, 'chain');
  const sets: string[] = [];
  for (const m of sock.dump(request(MSG.GETSET, family, [t]))) {
    sets.push(new Attrs(m.payload, 4).str(2) ?? '');
    lines.push('set', ...render(m.payload.subarray(4), 1, HANDLES[MSG.GETSET]!));
  }
  // Elements in a canonical order: a hash set lists them in the order of its
  // (per-set random) hash seed, and replies split them at arbitrary points.
  for (const s of sets) {
    const els: string[] = [];
    for (const m of sock.dump(request(MSG.GETSETELEM, family, [t, attr(2, str(s))]))) {
      for (const le of new Attrs(m.payload, 4).nested(3)?.entries ?? []) {
        const text = render(le.value, 2, []).join('\n');
        // nft adds an interval end at 0 when it adds an interval to a named
        // interval map that its cache holds elements of (the start at 0, if
        // any, still wins the lookup; `nft list` does not show it). It is an
        // artifact of nft's cache state, not of the rules: not compared.
        if (!s.startsWith('__') && text === ZERO_END) continue;
        els.push(text);
      }
    }
    lines.push(`elements of ${s}`, ...els.sort());
  }
  section(MSG.GETRULE, 'rule');
  return lines.join('\n');
}
