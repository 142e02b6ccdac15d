// Noticing when another actor changes nf_tables state a datapath wrote
// (`nft delete table ip kube-proxy`, a deleted or flushed chain, an element
// removed by hand, `iptables -F KUBE-SERVICES` on the nf_tables backend), so
// the proxy repairs it at once instead of at the next full sync, which may be
// an hour away: partial syncs only rewrite what changed in the cluster.
//
// One socket per process and network namespace joins the nf_tables
// notification group (NFNLGRP_NFTABLES) and is read without blocking a few
// times a second. Each subscriber names a family (`ip` or `ip6`) and says
// which changes are its own business (nftables mode: anything in table
// `kube-proxy`; iptables mode: its KUBE-* chains in nat, filter and mangle,
// and rules elsewhere that jump to them; userspace: its redirect table); the
// rest (other tables, the `inet` family) is ignored.
//
// Our own commits must not count. The socket leaves the group while we
// apply a batch (so the kernel does not even build the notifications of a
// 10k-Service sync), and the nf_tables generation id, which each commit
// raises by one, says whether anyone else committed meanwhile:
//   gen(after joining again) - gen(before leaving) > our commits -> someone did.
// Then someone did, to some table, and we cannot know which: every
// subscriber is told (a full sync of a healthy table rewrites nothing). A
// receive-buffer overrun (events lost) is treated the same way. An
// nftables batch is exactly one commit; an iptables-restore commits once per
// table section that changes something, so its count is an upper bound, and
// a commit by others that lands during a restore whose sections did not all
// change anything goes unseen here (the iptables sync's own drift check,
// natDrift, reads the table at its next sync).
//
// A netlink socket receives multicast only once it is bound: open() sends
// one GETGEN request, which binds it, before anyone subscribes.
import { ProxyError } from '../../core/errors.js';
import type { Drift } from '../../core/types.js';
import type { NftFamily } from '../../dataplane/nftables/names.js';
import { Attrs, encodeMessage, NLM_F } from '../netlink/index.js';
import { openNetlink, NETLINK_PROTOCOL, type NetlinkSocket } from '../netlink/socket.js';
import type { NetlinkMessage } from '../netlink/message.js';

/** nfnetlink multicast group of nf_tables change notifications. */
const NFNLGRP_NFTABLES = 7;
const NFNL_SUBSYS_NFTABLES = 10;
const NFT_MSG_NEWGEN = 15;
const NFT_MSG_GETGEN = 16;
const NFT_MSG_DELTABLE = 2;
const NFT_MSG_DELRULE = 8;
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
/** Rule attributes down to a jump's target: expressions, list element, expression name and data, verdict. */
const NFTA_RULE_EXPRESSIONS = 4;
const NFTA_EXPR_NAME = 1;
const NFTA_EXPR_DATA = 2;
const NFTA_IMMEDIATE_DATA = 2;
const NFTA_DATA_VERDICT = 2;
const NFTA_VERDICT_CHAIN = 2;
/** How often queued notifications are read: the repair starts at most this late. */
export const MONITOR_POLL_MS = 200;

/** One change notification, as much of it as subscribers look at. */
export interface NftChange {
  readonly family: NftFamily;
  readonly table: string;
  /** E.g. "delete rule". */
  readonly what: string;
  /** The chain of a chain or rule message, the set of a set or element message; '' for a table. */
  readonly name: string;
  readonly deleted: boolean;
  readonly tableDeleted: boolean;
  /** For a rule: the chains it jumps or goes to (decoded on demand). */
  jumpTargets(): string[];
}

/** Which changes a subscriber owns. */
export type ChangeFilter = (c: NftChange) => boolean;
/** Told why the state may no longer be what we wrote. */
export type DriftListener = (drift: Drift) => void;

interface Subscription {
  readonly family: NftFamily;
  readonly filter: ChangeFilter;
  readonly listener: DriftListener;
}

export class NftMonitor {
  private static readonly shared = new Map<string, Promise<NftMonitor | null>>();
  private readonly subs = new Set<Subscription>();
  private timer: ReturnType<typeof setInterval> | null = null;
  /** Own changes in progress; while > 0 the socket is out of the group. */
  private own = 0;
  private genBefore = 0;
  /** Upper bound of the commits our changes in progress made; NaN when unknown. */
  private ownCommits = 0;
  /** Per subscription, what was seen since the last report: count and first description; n = 0 is a suspicion. */
  private pending = new Map<Subscription, { n: number; first: string }>();
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
        const mon = new NftMonitor(sock, netns);
        try {
          sock.setMembership(NFNLGRP_NFTABLES, true);
          mon.generation(); // binds the socket: unbound, it receives nothing
        } catch {
          sock.close();
          return null;
        }
        return mon;
      })();
      NftMonitor.shared.set(key, m);
      void m.then((x) => {
        if (!x) NftMonitor.shared.delete(key);
      });
    }
    return m;
  }

  /**
   * Listen for changes by others in `family` that `filter` says are the
   * subscriber's; returns the unsubscribe function.
   */
  subscribe(family: NftFamily, filter: ChangeFilter, listener: DriftListener): () => void {
    const sub: Subscription = { family, filter, listener };
    this.subs.add(sub);
    if (!this.timer) {
      this.timer = setInterval(() => this.poll(), MONITOR_POLL_MS);
      this.timer.unref();
    }
    return () => {
      this.subs.delete(sub);
      this.pending.delete(sub);
      if (this.subs.size === 0) this.close();
    };
  }

  /**
   * Run one of our own changes: `fn` commits at most `commits` nf_tables
   * transactions (an nftables batch: exactly one). Its notifications are not
   * reported; anyone else's meanwhile are, when the generation count shows
   * them (see above).
   */
  async ownChange<T>(fn: () => T | Promise<T>, commits = 1): Promise<T> {
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
    let done = false;
    try {
      const out = await fn();
      done = true;
      return out;
    } finally {
      if (done) this.ownCommits += commits;
      // A failed change may or may not have committed (a timeout): the counts
      // cannot tell, so the check below reports (the next sync is full anyway).
      else this.ownCommits = Number.NaN;
      if (--this.own === 0) this.rejoin();
    }
  }

  /** Read what is queued and tell the subscribers; never throws (a broken socket is replaced). */
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
      const commits = (gen - this.genBefore) >>> 0;
      if (Number.isNaN(this.ownCommits))
        this.suspectAll('our change failed; any nf_tables commit meanwhile is unaccounted for');
      else if (commits > this.ownCommits)
        this.suspectAll(`${commits - this.ownCommits} nf_tables commit(s) by others while we applied ours`);
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
    if (m.type >> 8 !== NFNL_SUBSYS_NFTABLES || m.payload.length < 4 || this.subs.size === 0) return;
    const msg = m.type & 0xff;
    const family = FAMILIES[m.payload[0]!];
    if (msg === NFT_MSG_NEWGEN || !family) return;
    const attrs = new Attrs(m.payload, 4);
    const nameAttr = OBJECT_NAME[msg];
    const name = (nameAttr === undefined ? undefined : attrs.str(nameAttr)) ?? '';
    const what = MSG_NAMES[msg] ?? `message ${msg}`;
    const change: NftChange = {
      family,
      table: attrs.str(ATTR_TABLE) ?? '',
      what,
      name,
      deleted: what.startsWith('delete'),
      tableDeleted: msg === NFT_MSG_DELTABLE,
      jumpTargets: () => (msg === 6 || msg === NFT_MSG_DELRULE ? jumpTargets(attrs) : []),
    };
    for (const sub of this.subs) {
      if (sub.family !== family || !sub.filter(change)) continue;
      const text = `${what} ${change.table}${name ? ` ${name}` : ''}`;
      const p = this.pending.get(sub);
      if (p) {
        p.n++;
        if (change.tableDeleted) p.first = text; // the table itself is the headline
      } else this.pending.set(sub, { n: 1, first: text });
    }
  }

  private suspectAll(reason: string): void {
    for (const sub of this.subs) this.pending.set(sub, { n: 0, first: reason });
  }

  private report(): void {
    if (this.pending.size === 0) return;
    const pending = this.pending;
    this.pending = new Map();
    for (const [sub, p] of pending) {
      sub.listener(
        p.n === 0
          ? { reason: 'changes_unaccounted', detail: p.first }
          : {
              reason: 'rules_changed',
              detail: `${p.n} change(s) by another actor in family ${sub.family}, e.g. ${p.first}`,
            },
      );
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
    const old = this.sock;
    this.sock = sock;
    try {
      sock.setMembership(NFNLGRP_NFTABLES, this.own === 0);
      this.generation(); // binds it
    } catch {
      this.sock = old;
      sock.close();
      return;
    }
    old.close();
  }
}

/** The chains a rule's immediate verdicts jump or go to (how both nft and iptables-nft encode `-j CHAIN`). */
function jumpTargets(rule: Attrs): string[] {
  const out: string[] = [];
  for (const el of rule.nested(NFTA_RULE_EXPRESSIONS)?.entries ?? []) {
    const expr = new Attrs(el.value);
    if (expr.str(NFTA_EXPR_NAME) !== 'immediate') continue;
    const chain = expr
      .nested(NFTA_EXPR_DATA)
      ?.nested(NFTA_IMMEDIATE_DATA)
      ?.nested(NFTA_DATA_VERDICT)
      ?.str(NFTA_VERDICT_CHAIN);
    if (chain) out.push(chain);
  }
  return out;
}
