// The ebpf mode's only netfilter state: one small nftables table per family
// that turns the masquerade mark into `masquerade fully-random`, exactly as
// upstream's masquerading chain does. The programs decide which connections
// are masqueraded (the same decisions as upstream's KUBE-MARK-MASQ rules)
// and set the mark on their packets; source NAT itself, its port choice and
// the translation of replies stay with the kernel's connection tracker.
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
