// The nf_tables fast path: applies one nf_tables batch over a NETLINK_NETFILTER
// socket (the shared one in ../netlink) and reports the first error. Used for
// incremental syncs: a one-endpoint change is a few messages, and skipping the
// `nft` process (which re-reads the whole table into its cache on every run)
// is what makes it milliseconds at 20k Services.
//
// Completion: after the batch we send GETGEN on the same socket; the kernel
// handles netlink requests in order, so its reply arrives after every ack or
// error of the batch.
import type { NftFamily } from '../../dataplane/nftables/names.js';
import { errorCode, NLMSG_ERROR } from '../netlink/message.js';
import { extAckMessage, NETLINK_PROTOCOL, NetlinkError, openNetlink, type NetlinkSocket } from '../netlink/socket.js';
import { encodeBatch, nlMessage, NFNL_SUBSYS_NFTABLES, NFT_MSG, NLM_F, type EncodedOp } from './nlencode.js';

export { NetlinkError };

/**
 * The fast path, or null when it is unavailable here (no koffi package, no
 * libc, or the socket cannot be opened); callers then use `nft -f` only.
 */
export async function openNftNetlink(netns?: string): Promise<NftNetlink | null> {
  const sock = await openNetlink(NETLINK_PROTOCOL.NETFILTER, netns === undefined ? {} : { netns });
  return sock ? new NftNetlink(sock) : null;
}

export class NftNetlink {
  constructor(private readonly sock: NetlinkSocket) {}

  /** Apply the operations as one atomic batch; throws NetlinkError with the first failure. */
  apply(ops: readonly EncodedOp[], family: NftFamily): void {
    const start = this.sock.nextSeq(ops.length + 3);
    const { buf, seqs } = encodeBatch(ops, family, start);
    const genSeq = start + ops.length + 2;
    const gen = nlMessage((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG.GETGEN, NLM_F.REQUEST, genSeq, 0, 0, []);
    // Two sends: nfnetlink ignores whatever follows BATCH_END in the same datagram.
    this.sock.send(buf);
    this.sock.send(gen);
    let firstError: NetlinkError | null = null;
    this.sock.receive((m) => {
      if (m.type === NLMSG_ERROR) {
        const err = errorCode(m);
        if (err !== 0 && firstError === null) {
          const idx = seqs.indexOf(m.seq);
          const why = extAckMessage(m);
          firstError = new NetlinkError(
            err,
            idx,
            `nf_tables batch rejected: errno ${err} at operation ${idx}${why ? ` (${why})` : ''}`,
          );
        }
        return false;
      }
      return m.seq === genSeq;
    });
    if (firstError) throw firstError;
  }

  close(): void {
    this.sock.close();
  }
}
