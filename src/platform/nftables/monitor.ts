// Noticing when another actor changes our nftables tables (`nft delete table
// ip kube-proxy`, a deleted or flushed chain, an element removed by hand), so
// the proxy repairs them at once instead of at the next full sync, which may
// be an hour away: partial syncs only rewrite what changed in the cluster.
//
// One socket per process and network namespace joins the nf_tables
// notification group (NFNLGRP_NFTABLES) and is read without blocking a few
// times a second. Any notification that names table `ip kube-proxy` or `ip6
// kube-proxy` tells that family's listeners; other tables (and the `inet`
// family) are not ours and are ignored.
//
// Our own commits must not count. The socket leaves the group while we
// apply a batch (so the kernel does not even build the notifications of a
// 10k-Service sync), and the nf_tables generation id, which each commit
// raises by one, says whether anyone else committed meanwhile:
//   gen(before leaving) + our commits == gen(after joining again) -> nobody.
// Otherwise someone did, to some table, and we cannot know which: every
// listener is told (a full sync of a healthy table rewrites nothing). A
// receive-buffer overrun (events lost) is treated the same way.
import type { NftFamily } from '../../dataplane/nftables/names.js';
import { TABLE_NAME } from '../../dataplane/nftables/names.js';
import { Attrs, encodeMessage, NLM_F } from '../netlink/index.js';
import { openNetlink, NETLINK_PROTOCOL, type NetlinkSocket } from '../netlink/socket.js';
import type { NetlinkMessage } from '../netlink/message.js';
import { ProxyError } from '../../core/errors.js';

/** nfnetlink multicast group of nf_tables change notifications. */
const NFNLGRP_NFTABLES = 7;
const NFNL_SUBSYS_NFTABLES = 10;
const NFT_MSG_NEWGEN = 15;
const NFT_MSG_GETGEN = 16;
const NFTA_GEN_ID = 1;
/** NFTA_{TABLE_NAME,CHAIN_TABLE,RULE_TABLE,SET_TABLE,SET_ELEM_LIST_TABLE,OBJ_TABLE}: attribute 1 everywhere. */
const ATTR_TABLE = 1;
/** The object's own name: chain (NFTA_CHAIN_NAME), rule's chain, set, element list's set. */
const OBJECT_NAME: Record<number, number> = { 3: 3, 5: 3, 6: 2, 8: 2, 9: 2, 11: 2, 12: 2, 14: 2 };
const MSG_NAMES: Record<number, string> = {
  0: 'add table',
  2: 'delete table',
  3: 'add chain',
  5: 'delete chain',
  6: 'add rule',
  8: 'delete rule',
  9: 'add set',
  11: 'delete set',
  12: 'add element',
  14: 'delete element',
};
const FAMILIES: Record<number, NftFamily> = { 2: 'ip', 10: 'ip6' };
/** How often queued notifications are read: the repair starts at most this late. */
export const MONITOR_POLL_MS = 200;

/** Told why the table may no longer be what we wrote. */
export type TamperListener = (reason: string) => void;

export class NftMonitor {
  private static readonly shared = new Map<string, Promise<NftMonitor | null>>();
  private readonly listeners = new Map<NftFamily, Set<TamperListener>>();
  private timer: ReturnType<typeof setInterval> | null = null;
  /** Own changes in progress; while > 0 the socket is out of the group. */
  private own = 0;
  private genBefore = 0;
  private ownCommits = 0;
  /** Per family, the foreign changes seen since the last report: count and first description. */
  private pending = new Map<NftFamily, { n: number; first: string }>();
  private reopening = false;

  private constructor(
    private sock: NetlinkSocket,
    private readonly netns: string | undefined,
  ) {}

  /** The monitor of this process in `netns` (default: our own), or null where netlink is unavailable. */
  static open(netns?: string): Promise<NftMonitor | null> {
    const key = netns ?? '';
    let m = NftMonitor.shared.get(key);
    if (!m) {
      m = (async () => {
        const sock = await openNetlink(NETLINK_PROTOCOL.NETFILTER, netns === undefined ? {} : { netns });
        if (!sock) return null;
        try {
          sock.setMembership(NFNLGRP_NFTABLES, true);
        } catch {
          sock.close();
          return null;
        }
        return new NftMonitor(sock, netns);
      })();
      NftMonitor.shared.set(key, m);
      void m.then((x) => {
        if (!x) NftMonitor.shared.delete(key);
      });
    }
    return m;
  }

  /** Listen for changes by others to `family kube-proxy`; returns the unsubscribe function. */
  subscribe(family: NftFamily, listener: TamperListener): () => void {
    let set = this.listeners.get(family);
    if (!set) this.listeners.set(family, (set = new Set()));
    set.add(listener);
    if (!this.timer) {
      this.timer = setInterval(() => this.poll(), MONITOR_POLL_MS);
      this.timer.unref();
    }
    return () => {
      set.delete(listener);
      if ([...this.listeners.values()].every((s) => s.size === 0)) this.close();
    };
  }

  /**
   * Run one of our own commits (`fn` applies exactly one batch): its
   * notifications are not reported, anyone else's meanwhile are (see above).
   */
  async ownChange<T>(fn: () => T | Promise<T>): Promise<T> {
    if (this.own === 0) {
      this.poll(); // queued before our change: someone else's
      try {
        this.sock.setMembership(NFNLGRP_NFTABLES, false);
        this.genBefore = this.generation();
      } catch (err) {
        // Nothing of ours was sent: fail the caller's sync (the next one is
        // full), and listen again, suspecting the worst for the gap.
        this.ownCommits = Number.NaN;
        this.rejoin();
        throw err;
      }
      this.ownCommits = 0;
    }
    this.own++;
    let committed = false;
    try {
      const out = await fn();
      committed = true;
      return out;
    } finally {
      if (committed) this.ownCommits++;
      // A failed batch may or may not have committed (a timeout): the counts
      // cannot tell, so the check below reports (the next sync is full anyway).
      else this.ownCommits = Number.NaN;
      if (--this.own === 0) this.rejoin();
    }
  }

  /** Read what is queued and tell the listeners; never throws (a broken socket is replaced). */
  poll(): void {
    if (this.reopening) return;
    try {
      const r = this.sock.receivePending((m) => this.onMessage(m));
      if (r === 'overrun') this.suspectAll('nf_tables events were lost (receive buffer overrun)');
    } catch (err) {
      this.suspectAll(`nf_tables monitor failed: ${(err as Error).message}`);
      void this.reopen();
    }
    this.report();
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.sock.close();
    NftMonitor.shared.delete(this.netns ?? '');
  }

  private rejoin(): void {
    try {
      // Join first: a commit after this point is seen as an event, and may
      // also be counted in the generation (reported twice, harmlessly).
      this.sock.setMembership(NFNLGRP_NFTABLES, true);
      const gen = this.generation();
      const foreign = (gen - this.genBefore) >>> 0;
      if (foreign !== this.ownCommits)
        this.suspectAll(
          Number.isNaN(this.ownCommits)
            ? 'our batch failed; any nf_tables commit meanwhile is unaccounted for'
            : `${foreign - this.ownCommits} nf_tables commit(s) by others while we applied ours`,
        );
    } catch (err) {
      this.suspectAll(`nf_tables monitor failed: ${(err as Error).message}`);
      void this.reopen();
    }
    this.report();
  }

  /** The current nf_tables generation id (GETGEN); notifications read meanwhile are handled. */
  private generation(): number {
    const seq = this.sock.nextSeq();
    const req = encodeMessage(
      (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETGEN,
      NLM_F.REQUEST,
      seq,
      Buffer.from([0, 0, 0, 0]),
      [],
    );
    let gen: number | undefined;
    this.sock.send(req);
    this.sock.receive((m) => {
      if (m.seq === seq && (m.type & 0xff) === NFT_MSG_NEWGEN) {
        gen = new Attrs(m.payload, 4).u32be(NFTA_GEN_ID);
        return true;
      }
      this.onMessage(m);
      return false;
    });
    if (gen === undefined) throw new ProxyError('KPT_LIVE_STATE_UNREADABLE', 'GETGEN reply without a generation id');
    return gen;
  }

  private onMessage(m: NetlinkMessage): void {
    if (m.type >> 8 !== NFNL_SUBSYS_NFTABLES || m.payload.length < 4) return;
    const msg = m.type & 0xff;
    const family = FAMILIES[m.payload[0]!];
    if (msg === NFT_MSG_NEWGEN || !family || !this.listeners.get(family)?.size) return;
    const attrs = new Attrs(m.payload, 4);
    if (attrs.str(ATTR_TABLE) !== TABLE_NAME) return;
    const nameAttr = OBJECT_NAME[msg];
    const name = nameAttr === undefined ? undefined : attrs.str(nameAttr);
    const what = `${MSG_NAMES[msg] ?? `message ${msg}`}${name ? ` ${name}` : ''}`;
    const p = this.pending.get(family);
    if (p) {
      p.n++;
      if (msg === 2) p.first = what; // the table itself is the headline
    } else this.pending.set(family, { n: 1, first: what });
  }

  private suspectAll(reason: string): void {
    for (const family of this.listeners.keys()) this.pending.set(family, { n: 0, first: reason });
  }

  private report(): void {
    if (this.pending.size === 0) return;
    const pending = this.pending;
    this.pending = new Map();
    for (const [family, p] of pending) {
      const reason =
        p.n === 0 ? p.first : `${p.n} change(s) by another actor to table ${family} ${TABLE_NAME}, e.g. ${p.first}`;
      for (const l of this.listeners.get(family) ?? []) l(reason);
    }
  }

  private async reopen(): Promise<void> {
    if (this.reopening) return;
    this.reopening = true;
    try {
      await this.replaceSocket();
    } finally {
      this.reopening = false;
    }
  }

  private async replaceSocket(): Promise<void> {
    const sock = await openNetlink(NETLINK_PROTOCOL.NETFILTER, this.netns === undefined ? {} : { netns: this.netns });
    if (!sock) return;
    try {
      sock.setMembership(NFNLGRP_NFTABLES, this.own === 0);
    } catch {
      sock.close();
      return;
    }
    this.sock.close();
    this.sock = sock;
  }
}
