// Did someone else change our nat rules since the last successful restore?
// A partial sync rewrites only the top-level chains and the changed Services'
// chains, and the jump rules from the built-in chains are checked only on
// full syncs, so rules another actor removed (`iptables -t nat -F`, a
// firewall reload that drops "unknown" chains, an admin deleting
// KUBE-SERVICES) would stay missing until the next full sync. Upstream only
// notices a deleted canary chain, which a flush leaves in place.
//
// natDrift() reads the `iptables-save -t nat` text the dataplane already
// takes on every sync (for the stale-chain cleanup) and reports the first
// sign of such a change, so that this sync becomes full and repairs it:
//   - a nat jump rule from a built-in chain is missing;
//   - a chain the last restore left in place is gone;
//   - KUBE-POSTROUTING or KUBE-MARK-MASQ, which every restore fills, is empty.
// Not detected: an individual Service chain emptied in place (its rules are
// not remembered; the hourly full sync repairs it).

import { IPTABLES_JUMP_CHAINS } from './jumps.js';
import { KUBE_MARK_MASQ } from './servicerules.js';
import { KUBE_POSTROUTING } from './renderer.js';

const ALWAYS_FILLED = [KUBE_POSTROUTING, KUBE_MARK_MASQ];
const NAT_JUMPS = IPTABLES_JUMP_CHAINS.filter((j) => j.table === 'nat');

/** Chains and their rule counts in one table of iptables-save text. */
function tableContents(
  save: string,
  table: string,
): { chains: Set<string>; rules: Map<string, number>; lines: string[] } {
  const chains = new Set<string>();
  const rules = new Map<string, number>();
  const lines: string[] = [];
  let inTable = false;
  for (const raw of save.split('\n')) {
    if (raw.startsWith('*')) inTable = raw.slice(1).trim() === table;
    else if (!inTable) continue;
    else if (raw.startsWith(':')) chains.add(raw.slice(1).split(' ', 1)[0]!);
    else if (raw.startsWith('-A ')) {
      const chain = raw.slice(3, raw.indexOf(' ', 3));
      rules.set(chain, (rules.get(chain) ?? 0) + 1);
      if (!chain.startsWith('KUBE-')) lines.push(raw);
    }
  }
  return { chains, rules, lines };
}

/**
 * The first difference between the nat table in `save` and what the last
 * successful restore left (`expectedChains`: its natChainsActive), as a
 * sentence for the log; null when nothing is missing.
 */
export function natDrift(save: string, expectedChains: ReadonlySet<string>): string | null {
  const nat = tableContents(save, 'nat');
  for (const j of NAT_JUMPS) {
    const found = nat.lines.some((l) => l.startsWith(`-A ${j.from} `) && l.endsWith(` -j ${j.to}`));
    if (!found) return `jump from ${j.from} to ${j.to} is missing`;
  }
  for (const c of ALWAYS_FILLED) if ((nat.rules.get(c) ?? 0) === 0) return `chain ${c} is empty`;
  for (const c of expectedChains) if (!nat.chains.has(c)) return `chain ${c} is missing`;
  return null;
}
