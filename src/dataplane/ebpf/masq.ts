// The nftables table through which versions before masquerade moved into the
// BPF programs (src/bpf/snat.h) masqueraded: the programs set the mark, and
// this table turned it into `masquerade fully-random`, as upstream's
// masquerading chain does. Still written on kernels without BPF_FIB_LOOKUP_SRC, where the
// programs cannot ask a route's source (platform/ebpf/kernel.ts) and mark
// instead; kept as well to remove it where an older proxy left it
// (platform/ebpf/cleanup.ts), and for bench/ebpf.ts's `directnat` floor (what
// a node pays with any NAT table loaded).
//
// Built of the nftables mode's objects and rule bodies (its masquerading rule
// is the same one), so the nftables Fake, tracer and writer read it too.
import type { IPFamily } from '../../core/types.js';
import { nftFamily } from '../nftables/names.js';
import * as R from '../nftables/rule.js';
import { Transaction } from '../nftables/transaction.js';

export const MASQ_TABLE = 'kube-proxy-ebpf';
export const MASQ_CHAIN = 'masquerading';

/**
 * The transaction that (re)creates the table atomically: adding and deleting
 * first makes it work whether or not the table exists.
 */
export function masqueradeTable(family: IPFamily, mark: number): Transaction {
  const tx = deleteMasqueradeTable(family);
  tx.add({ kind: 'table', comment: 'kube-proxy-ts ebpf mode: masquerade what the BPF programs marked' });
  tx.add({ kind: 'chain', name: MASQ_CHAIN, type: 'nat', hook: 'postrouting', priority: 100 });
  tx.add(R.rule(MASQ_CHAIN, R.masqueradeMarked(mark >>> 0), 'kubernetes service traffic requiring SNAT'));
  return tx;
}

/** The transaction that removes the table, present or not. */
export function deleteMasqueradeTable(family: IPFamily): Transaction {
  return new Transaction(nftFamily(family), MASQ_TABLE).add({ kind: 'table' }).delete({ kind: 'table' });
}
