// The nftables mode's kernel channel: one NETLINK_NETFILTER socket (the
// shared one in ../netlink) that applies whole batches (nlencode.ts) and
// reads the table back (nlreadback.ts). No `nft` process: nft re-reads the
// ruleset into its cache on every run, which in a large cluster costs more
// than the change itself, and nft 1.1.3+ crashes on upstream's rules
// (kubernetes #136786).
//
// Completion: after the batch we send GETGEN on the same socket; the kernel
// handles netlink requests in order, so its reply arrives after every error
// of the batch (messages carry no ACK flag; failures are reported anyway).
import type { NftFamily } from '../../dataplane/nftables/names.js';
import type { KernelSnapshot } from '../../dataplane/nftables/driver.js';
import { TABLE_NAME } from '../../dataplane/nftables/names.js';
import { errorCode, errnoName, NLMSG_ERROR } from '../netlink/message.js';
import { extAckMessage, NETLINK_PROTOCOL, NetlinkError, openNetlink, type NetlinkSocket } from '../netlink/socket.js';
import { NFNL_SUBSYS_NFTABLES, NFT_MSG, NLM_F, type EncodedBatch } from './nlencode.js';
import { readSnapshotNetlink, tableExistsNetlink } from './nlreadback.js';
import { NlWriter } from './nlwriter.js';

export { NetlinkError };

/**
 * The channel, or null when netlink is unavailable here (no koffi package, no
 * libc, or the socket cannot be opened); callers then use `nft`.
 */
export async function openNftNetlink(netns?: string): Promise<NftNetlink | null> {
  const sock = await openNetlink(NETLINK_PROTOCOL.NETFILTER, netns === undefined ? {} : { netns });
  return sock ? new NftNetlink(sock) : null;
}

export class NftNetlink {
  constructor(private readonly sock: NetlinkSocket) {}

  /** The sequence number the next batch should start at. */
  nextSeq(): number {
    return this.sock.nextSeq(0);
  }

  /**
   * Apply an encoded batch atomically; rejects with NetlinkError with the
   * first failure (errno, the failing operation's index, the kernel's
   * reason). The batch is sent from libuv's thread pool (the kernel commits
   * it inside the send), so the event loop runs while a large one commits.
   */
  async apply(batch: EncodedBatch): Promise<void> {
    this.sock.nextSeq(batch.lastSeq - batch.firstSeq + 1);
    const genSeq = this.sock.nextSeq();
    const w = new NlWriter(64);
    w.begin((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG.GETGEN, NLM_F.REQUEST, genSeq, 0, 0).end();
    this.sock.reserveSendBuffer(batch.bytes);
    // Two sends: nfnetlink ignores whatever follows BATCH_END in the same datagram.
    await this.sock.sendvOffThread(batch.chunks, batch.bytes);
    this.sock.send(w.view());
    let firstError: NetlinkError | null = null;
    this.sock.receive((m) => {
      if (m.type === NLMSG_ERROR && m.seq !== genSeq) {
        const err = errorCode(m);
        if (err !== 0 && firstError === null && m.seq >= batch.firstSeq && m.seq <= batch.lastSeq) {
          const idx = batch.opOf(m.seq);
          const why = extAckMessage(m);
          firstError = new NetlinkError(
            err,
            idx,
            `nf_tables batch rejected: ${errnoName(err)} at operation ${idx}${why ? ` (${why})` : ''}`,
          );
        }
        return false;
      }
      return m.seq === genSeq;
    });
    if (firstError) throw firstError;
  }

  /** Whether our table exists in the family. */
  hasTable(family: NftFamily): boolean {
    return tableExistsNetlink(this.sock, family, TABLE_NAME);
  }

  /** What the reconciler needs to know of our table (see nlreadback.ts). */
  readSnapshot(family: NftFamily): KernelSnapshot {
    return readSnapshotNetlink(this.sock, family, TABLE_NAME);
  }

  close(): void {
    this.sock.close();
  }
}
