// Makes conntrack entries without traffic (tests, benchmarks): ctnetlink
// CT_NEW requests with both tuples given, so a reply tuple can look NATed as
// a Service's does. Entry i: client 10.64+.x.y:40000 -> 172.30.p.p:53,
// answered by 10.250.p.p:5354, where p = i % pairs.
import { attr, encodeMessage, nested, NLM_F, u16be, u32be, u8 } from '../../src/platform/netlink/index.js';

const IPCTNL_MSG_CT_NEW = 0;
const CTA_TIMEOUT = 7;

export const benchVIP = (p: number) => `172.30.${(p >> 8) & 255}.${p & 255}`;
export const benchEndpoint = (p: number) => `10.250.${(p >> 8) & 255}.${p & 255}`;

export function newEntryRequest(i: number, pairs: number, timeoutSec = 120): Buffer {
  const p = i % pairs;
  const bytes = (ip: string) => Buffer.from(ip.split('.').map(Number));
  const client = Buffer.from([10, 64 + ((i >> 16) & 63), (i >> 8) & 255, i & 255]);
  const tuple = (type: number, src: Buffer, dst: Buffer, sport: number, dport: number) =>
    nested(type, [
      nested(1, [attr(1, src), attr(2, dst)]),
      nested(2, [attr(1, u8(17)), attr(2, u16be(sport)), attr(3, u16be(dport))]),
    ]);
  return encodeMessage(
    (1 << 8) | IPCTNL_MSG_CT_NEW,
    NLM_F.REQUEST | NLM_F.ACK | NLM_F.CREATE,
    0,
    Buffer.from([2, 0, 0, 0]),
    [
      tuple(1, client, bytes(benchVIP(p)), 40000, 53),
      tuple(2, bytes(benchEndpoint(p)), client, 5354, 40000),
      attr(CTA_TIMEOUT, u32be(timeoutSec)),
    ],
  );
}
