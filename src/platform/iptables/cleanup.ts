// cleanupLeftovers: remove every jump rule and chain this proxy creates in
// filter, nat and mangle, and nothing else (upstream iptables
// cleanupLeftoversForFamily, newest version). Exactly:
//   - the jump rules of IPTABLES_JUMP_CHAINS, matched by their full rule
//     spec (-D), except the KUBE-FIREWALL jumps, which kubelet owns too;
//   - nat: KUBE-SERVICES, KUBE-NODEPORTS, KUBE-POSTROUTING, KUBE-MARK-MASQ,
//     KUBE-PROXY-CANARY and every KUBE-SVC/SVL/EXT/FW/SEP-* chain;
//   - filter: KUBE-SERVICES, KUBE-EXTERNAL-SERVICES, KUBE-FORWARD,
//     KUBE-NODEPORTS, KUBE-PROXY-FIREWALL, KUBE-PROXY-CANARY;
//   - mangle: KUBE-PROXY-CANARY.
// Chains with other names (KUBE-MARK-DROP, KUBE-FIREWALL, KUBE-KUBELET-CANARY,
// anything foreign) and rules in built-in chains other than our exact jumps
// survive. With `keep` (a handover to IPVS mode, which shares some of these
// names), IPVS mode's chains and jump rules survive too. Failures are collected, not thrown, so one bad table does not stop
// the others (upstream returns encounteredError).
import {
  IPTABLES_JUMP_CHAINS,
  chainsFromSave,
  jumpRuleArgs,
  sharedJump,
  type SharedRules,
} from '../../dataplane/iptables/jumps.js';
import { isServiceChainName } from '../../dataplane/iptables/names.js';
import { iptablesModeOnly } from './driftwatch.js';
import type { Iptables } from './iptables.js';
import { withWholeTableCache } from './restore.js';

export const CANARY_CHAIN = 'KUBE-PROXY-CANARY';
export const NAT_CHAINS_TO_REMOVE = [
  'KUBE-SERVICES',
  'KUBE-NODEPORTS',
  'KUBE-POSTROUTING',
  'KUBE-MARK-MASQ',
  CANARY_CHAIN,
] as const;
export const FILTER_CHAINS_TO_REMOVE = [
  'KUBE-SERVICES',
  'KUBE-EXTERNAL-SERVICES',
  'KUBE-FORWARD',
  'KUBE-NODEPORTS',
  'KUBE-PROXY-FIREWALL',
  CANARY_CHAIN,
] as const;

export interface CleanupResult {
  readonly jumpRulesDeleted: number;
  readonly chainsDeleted: number;
  readonly errors: readonly unknown[];
}

/** The restore input that flushes and deletes `chains` of `table` (chain lines first, then -X). */
export function deleteChainsInput(table: string, chains: readonly string[]): string {
  const lines = [`*${table}`, ...chains.map((c) => `:${c} - [0:0]`), ...chains.map((c) => `-X ${c}`), 'COMMIT', ''];
  return lines.join('\n');
}

/** Which chains of one table cleanup removes, given the table's existing chains. */
export function chainsToRemove(table: 'nat' | 'filter', existing: readonly string[], keep?: SharedRules): string[] {
  const kept = new Set(keep?.[table] ?? []);
  const have = new Set(existing.filter((c) => !kept.has(c)));
  if (table === 'filter') return FILTER_CHAINS_TO_REMOVE.filter((c) => have.has(c));
  const out: string[] = NAT_CHAINS_TO_REMOVE.filter((c) => have.has(c));
  for (const c of [...have].sort()) if (isServiceChainName(c)) out.push(c);
  return out;
}

/** iptables mode's own state (service chains, KUBE-NODEPORTS), which IPVS mode never creates. */
export function iptablesModeChains(natSave: string): boolean {
  return chainsFromSave(natSave, 'nat').some((c) => iptablesModeOnly('nat', c));
}

export async function cleanupLeftovers(
  ipt: Iptables,
  opts: { wholeTableCache: boolean; keep?: SharedRules },
): Promise<CleanupResult> {
  const errors: unknown[] = [];
  let jumpRulesDeleted = 0;
  let chainsDeleted = 0;
  for (const jc of IPTABLES_JUMP_CHAINS) {
    if (jc.onlyIfChainRendered) continue; // KUBE-FIREWALL: kubelet's too, upstream leaves it
    if (sharedJump(jc, opts.keep)) continue;
    try {
      if (await ipt.deleteRule(jc.table, jc.from, jumpRuleArgs(jc))) jumpRulesDeleted++;
    } catch (e) {
      errors.push(e);
    }
  }
  for (const table of ['nat', 'filter'] as const) {
    try {
      const chains = chainsToRemove(table, chainsFromSave(await ipt.save(table), table), opts.keep);
      if (chains.length === 0) continue;
      let input = deleteChainsInput(table, chains);
      // Deleting 60k chains hits the same iptables-nft list cost as creating them.
      if (opts.wholeTableCache && chains.length > 100) input = withWholeTableCache(input, [table]);
      await ipt.restore(input, { noflush: true, counters: true, discardStdout: true });
      chainsDeleted += chains.length;
    } catch (e) {
      errors.push(e);
    }
  }
  try {
    if (await ipt.deleteChain('mangle', CANARY_CHAIN)) chainsDeleted++;
  } catch {
    // upstream ignores this one: the chain may not exist
  }
  return { jumpRulesDeleted, chainsDeleted, errors };
}
