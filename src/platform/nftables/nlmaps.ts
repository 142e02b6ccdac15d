// The 'maps' layout's endpoint maps as NEWSET attributes:
// `typeof numgen random mod M : ip daddr . tcp dport ; flags interval`
// (ip6, udp, sctp alike). The user data is what nft stores to print the
// typeof back: byte orders, then the key and data expressions.
import type { NftFamily } from '../../dataplane/nftables/names.js';
import { hostU32 } from './nlexpr.js';
import { tlv } from './nlset.js';
import type { NlWriter } from './nlwriter.js';

/** nft's proto_desc ids of the transport headers (udata of `tcp dport` etc.). */
const L4_DESC: Record<string, number> = { tcp: 8, udp: 6, sctp: 10 };
const u32 = hostU32;

const payloadUdata = (desc: number, field: number) =>
  Buffer.concat([tlv(0, u32(7 /* payload */)), tlv(1, Buffer.concat([tlv(0, u32(desc)), tlv(1, u32(field))]))]);

/** False when the map is not one of ours (the caller then refuses the batch). */
export function endpointsMapAttrs(
  w: NlWriter,
  family: NftFamily,
  name: string,
  typeOf: string,
  flags: readonly string[] | undefined,
  id: number,
): boolean {
  const m = /^numgen random mod (\d+) : (ip6?) daddr \. (tcp|udp|sctp) dport$/.exec(typeOf);
  if (!m || m[2] !== family || (flags ?? []).join(',') !== 'interval') return false;
  const keyTypeof = Buffer.concat([
    tlv(0, u32(0x17 /* numgen */)),
    tlv(1, Buffer.concat([tlv(0, u32(1)), tlv(1, u32(Number(m[1]))), tlv(2, u32(0))])),
  ]);
  const addr = family === 'ip' ? payloadUdata(12 /* ip */, 12 /* daddr */) : payloadUdata(13 /* ip6 */, 9 /* daddr */);
  const dataTypeof = Buffer.concat([
    tlv(0, u32(13 /* concat */)),
    tlv(1, Buffer.concat([tlv(0, addr), tlv(1, payloadUdata(L4_DESC[m[3]!]!, 2 /* dport */))])),
  ]);
  const udata = Buffer.concat([tlv(0, u32(1)), tlv(1, u32(0)), tlv(3, keyTypeof), tlv(4, dataTypeof), tlv(6, u32(0))]);
  const addrType = family === 'ip' ? 7 : 8;
  w.str(2, name)
    .u32be(3, 0x4 | 0x8 /* NFT_SET_INTERVAL | NFT_SET_MAP */)
    .u32be(4, 4 /* integer */)
    .u32be(5, 4)
    .u32be(6, (addrType << 6) | 13 /* inet_service */)
    .u32be(7, family === 'ip' ? 8 : 20)
    .u32be(10, id)
    .bytes(13, udata);
  return true;
}
