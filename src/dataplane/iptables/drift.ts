// Did someone else change our nat rules since the last successful restore?
// A partial sync rewrites only the top-level chains and the changed Services'
// chains, and the jump rules from the built-in chains are checked only on
// full syncs, so rules another actor removed (`iptables -t nat -F`, a
// firewall reload that drops "unknown" chains, an admin deleting
// KUBE-SERVICES) would stay missing until the next full sync. Upstream only
// notices a deleted canary chain, which a flush leaves in place.
//
// natDrift() reads the `iptables-save -t nat` output the dataplane already
// takes on every sync (for the stale-chain cleanup) and reports the first
// sign of such a change, so that this sync becomes full and repairs it:
//   - a nat jump rule from a built-in chain is missing;
//   - a chain the last restore left in place is gone;
//   - KUBE-POSTROUTING or KUBE-MARK-MASQ, which every restore fills, is empty;
//   - when given their count (large-cluster mode, where a partial sync may
//     leave them as they are: driver.ts), KUBE-SERVICES and KUBE-NODEPORTS do
//     not hold the rules the last restore left there.
// Not detected: an individual Service chain emptied in place (its rules are
// not remembered; the hourly full sync repairs it).

import { IPTABLES_JUMP_CHAINS } from './jumps.js';
import { KUBE_MARK_MASQ, KUBE_NODEPORTS, KUBE_SERVICES } from './servicerules.js';
import { KUBE_POSTROUTING } from './renderer.js';

const ALWAYS_FILLED = [KUBE_POSTROUTING, KUBE_MARK_MASQ];
const NAT_JUMPS = IPTABLES_JUMP_CHAINS.filter((j) => j.table === 'nat');

/**
 * What natDrift (and the sync's stale-chain cleanup and jump check) need of
 * one table of iptables-save output: its chains, rules per chain, and the
 * rules of chains that are not ours (the built-in chains' jumps).
 */
export interface SavedTable {
  readonly chains: Set<string>;
  readonly rules: Map<string, number>;
  readonly lines: string[];
}

/**
 * Builds a SavedTable from iptables-save output fed line by line, so that a
 * large cluster's save is never held as one string. Chain names are
 * copied out of the line (a substring would keep the whole chunk alive).
 */
export class SavedTableReader {
  readonly table: SavedTable = { chains: new Set(), rules: new Map(), lines: [] };
  private inTable = false;

  constructor(private readonly name: string) {}

  line(raw: string): void {
    if (raw.startsWith('*')) this.inTable = raw.slice(1).trim() === this.name;
    else if (!this.inTable) return;
    else if (raw.startsWith(':')) this.table.chains.add(flatCopy(raw.slice(1).split(' ', 1)[0]!));
    else if (raw.startsWith('-A ')) {
      const chain = raw.slice(3, raw.indexOf(' ', 3));
      const rules = this.table.rules;
      const n = rules.get(chain);
      if (n === undefined) rules.set(flatCopy(chain), 1);
      else rules.set(chain, n + 1);
      if (!chain.startsWith('KUBE-')) this.table.lines.push(flatCopy(raw));
    }
  }
}

/** A string that shares no memory with the one it was cut from. */
function flatCopy(s: string): string {
  return (' ' + s).slice(1);
}

/** Chains and their rule counts in one table of iptables-save text. */
export function savedTable(save: string, table: string): SavedTable {
  const r = new SavedTableReader(table);
  for (const raw of save.split('\n')) r.line(raw);
  return r.table;
}

/**
 * The first difference between the nat table in `save` and what the last
 * successful restore left (`expectedChains`: the service chains the
 * reconciler knows, or any chains; `topRules`, when given: the rules in
 * KUBE-SERVICES and KUBE-NODEPORTS together), as a sentence for the log;
 * null when nothing is missing.
 */
export function natDrift(
  save: string | SavedTable,
  expectedChains: Iterable<string>,
  topRules?: number,
): string | null {
  const nat = typeof save === 'string' ? savedTable(save, 'nat') : save;
  for (const j of NAT_JUMPS) {
    const found = nat.lines.some((l) => l.startsWith(`-A ${j.from} `) && l.endsWith(` -j ${j.to}`));
    if (!found) return `jump from ${j.from} to ${j.to} is missing`;
  }
  for (const c of ALWAYS_FILLED) if ((nat.rules.get(c) ?? 0) === 0) return `chain ${c} is empty`;
  if (topRules !== undefined) {
    const held = (nat.rules.get(KUBE_SERVICES) ?? 0) + (nat.rules.get(KUBE_NODEPORTS) ?? 0);
    if (held !== topRules)
      return `chains ${KUBE_SERVICES} and ${KUBE_NODEPORTS} hold ${held} rules, the last restore left ${topRules}`;
  }
  for (const c of expectedChains) if (!nat.chains.has(c)) return `chain ${c} is missing`;
  return null;
}
