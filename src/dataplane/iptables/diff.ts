// Chain-by-chain difference between two iptables states (for `diff`: the
// kernel now vs. the kernel after a sync, both as Fake). Rules are
// compared by their canonical form (canon.ts), so the renderer's spelling and
// iptables-save's spelling of one rule are equal. Pure.

import { canonicalRule } from './canon.js';
import type { Fake, IptablesTable } from './fake.js';

export type DiffOp = ' ' | '+' | '-';

export interface DiffLine {
  readonly op: DiffOp;
  /** Rule text (after `-A CHAIN `): the kernel's spelling for ' ' and '-', the new text for '+'. */
  readonly rule: string;
}

export interface ChainDiff {
  readonly table: IptablesTable;
  readonly chain: string;
  readonly status: 'added' | 'removed' | 'changed';
  /** Every rule of the chain with its op (' ' = unchanged), in order. */
  readonly lines: readonly DiffLine[];
}

const TABLES: readonly IptablesTable[] = ['raw', 'mangle', 'filter', 'nat', 'security'];
/** Above this many cells the middle part of a chain is not aligned (shown as removed + added). */
const MAX_LCS_CELLS = 4_000_000;

/**
 * Line diff of two rule lists: common prefix/suffix, then an LCS of the
 * middle. Rules are equal when their `canon` forms are (default: iptables').
 */
export function diffRules(
  before: readonly string[],
  after: readonly string[],
  canon: (rule: string) => string = canonicalRule,
): DiffLine[] {
  const a = before.map(canon);
  const b = after.map(canon);
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
  const out: DiffLine[] = before.slice(0, pre).map((rule) => ({ op: ' ', rule }));
  const am = a.slice(pre, a.length - suf);
  const bm = b.slice(pre, b.length - suf);
  out.push(...middle(am, bm, before.slice(pre, before.length - suf), after.slice(pre, after.length - suf)));
  out.push(...before.slice(before.length - suf).map((rule): DiffLine => ({ op: ' ', rule })));
  return out;
}

function middle(a: string[], b: string[], aText: readonly string[], bText: readonly string[]): DiffLine[] {
  const n = a.length,
    m = b.length;
  if (n * m > MAX_LCS_CELLS) {
    return [
      ...aText.map((rule): DiffLine => ({ op: '-', rule })),
      ...bText.map((rule): DiffLine => ({ op: '+', rule })),
    ];
  }
  // lcs[i][j] = LCS length of a[i..] and b[j..], one row per i.
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
    }
  }
  const out: DiffLine[] = [];
  let i = 0,
    j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push({ op: ' ', rule: aText[i]! });
      i++;
      j++;
    } else if (j < m && (i === n || lcs[i]![j + 1]! >= lcs[i + 1]![j]!)) {
      out.push({ op: '+', rule: bText[j]! });
      j++;
    } else {
      out.push({ op: '-', rule: aText[i]! });
      i++;
    }
  }
  return out;
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
    const keep = d.lines.map(
      (l, i) => l.op !== ' ' || d.lines.slice(Math.max(0, i - context), i + context + 1).some((x) => x.op !== ' '),
    );
    let skipped = false;
    d.lines.forEach((l, i) => {
      if (!keep[i]) {
        if (!skipped) out += ' ...\n';
        skipped = true;
        return;
      }
      skipped = false;
      out += `${l.op}-A ${d.chain} ${l.rule}\n`;
    });
  }
  return out;
}
