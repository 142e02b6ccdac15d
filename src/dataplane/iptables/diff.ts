// Chain-by-chain difference between two iptables states (for `diff`: the
// kernel now vs. the kernel after a sync, both as Fake). Rules are
// compared by their canonical form (canon.ts), so the renderer's spelling and
// iptables-save's spelling of one rule are equal. Pure.

import { canonicalRule } from './canon.js';
import type { Fake, IptablesTable } from './fake.js';
import { contextText, diffLines, type DiffLine } from '../textdiff.js';

export interface ChainDiff {
  readonly table: IptablesTable;
  readonly chain: string;
  readonly status: 'added' | 'removed' | 'changed';
  /** Every rule of the chain with its op (' ' = unchanged), in order. */
  readonly lines: readonly DiffLine[];
}

const TABLES: readonly IptablesTable[] = ['raw', 'mangle', 'filter', 'nat', 'security'];

/** Line diff of two rule lists; rules are equal when their `canon` forms are (default: iptables'). */
export function diffRules(
  before: readonly string[],
  after: readonly string[],
  canon: (rule: string) => string = canonicalRule,
): DiffLine[] {
  return diffLines(before, after, canon);
}

/** Every chain that differs between `before` and `after`, tables in restore order, chains by name. */
export function diffIptables(before: Fake, after: Fake): ChainDiff[] {
  const out: ChainDiff[] = [];
  for (const table of TABLES) {
    const names = [...new Set([...before.chains(table), ...after.chains(table)])].sort();
    for (const chain of names) {
      const had = before.hasChain(table, chain);
      const has = after.hasChain(table, chain);
      const lines = diffRules(had ? before.rules(table, chain) : [], has ? after.rules(table, chain) : []);
      if (had && has && lines.every((l) => l.op === ' ')) continue;
      out.push({ table, chain, status: !had ? 'added' : !has ? 'removed' : 'changed', lines });
    }
  }
  return out;
}

/**
 * Unified-diff style text: a header per chain, `+:CHAIN` / `-:CHAIN` for
 * chains created or deleted, and rules as `-A CHAIN ...` lines with their op,
 * keeping `context` unchanged rules around each change ("..." for the rest).
 */
export function diffText(diffs: readonly ChainDiff[], context = 2): string {
  let out = '';
  for (const d of diffs) {
    const mark = d.status === 'added' ? '+' : d.status === 'removed' ? '-' : ' ';
    out += `@@ ${d.table} ${d.chain} (${d.status}) @@\n`;
    if (d.status !== 'changed') out += `${mark}:${d.chain}\n`;
    out += contextText(d.lines, context, (rule) => `-A ${d.chain} ${rule}`);
  }
  return out;
}
