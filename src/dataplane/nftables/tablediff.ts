// Difference between two states of the kube-proxy nftables table (for
// `diff`: the kernel now, read by listing.ts, vs. the same after the
// renderer's full-sync transaction ran on it in the Fake). Chains are
// compared rule by rule in a canonical spelling (the kernel's and the
// renderer's differ, listing.ts), sets and maps element by element. Pure.

import { contextText, diffLines, type DiffLine } from '../textdiff.js';
import type { Fake } from './fake.js';
import { normalizeNftRule, splitComment } from './listing.js';
import { elementKeyText, type Element, type Rule } from './objects.js';

export interface NftChainDiff {
  readonly kind: 'chain';
  readonly name: string;
  readonly status: 'added' | 'removed' | 'changed';
  readonly lines: readonly DiffLine[];
}

export interface NftSetDiff {
  readonly kind: 'set' | 'map';
  readonly name: string;
  readonly status: 'added' | 'removed' | 'changed';
  /** Elements as `key : value` text, with '+' or '-'. */
  readonly lines: readonly DiffLine[];
}

export type NftTableDiff = NftChainDiff | NftSetDiff;

/** One spelling for a rule: the renderer's words, decimal numbers, `{ x }` as x, comment last. */
export function canonicalNftRule(text: string): string {
  const { rule, comment } = splitComment(normalizeNftRule(text));
  const body = rule
    .replace(/\b0x[0-9a-f]+\b/gi, (h) => String(parseInt(h, 16)))
    .replace(/\{ ([^{},\s]+) \}/g, '$1')
    // The renderer separates inline map entries with " , ", nft lists them with ", ".
    .replace(/ , /g, ', ');
  return comment === undefined ? body : `${body} comment ${JSON.stringify(comment)}`;
}

const ruleText = (r: Rule) => (r.comment === undefined ? r.rule : `${r.rule} comment ${JSON.stringify(r.comment)}`);

function elementText(e: Element): string {
  const key = elementKeyText(e.key);
  return e.value && e.value.length > 0 ? `${key} : ${e.value.join(' . ')}` : key;
}

function diffElements(before: readonly Element[], after: readonly Element[]): DiffLine[] {
  const a = new Set(before.map(elementText));
  const b = new Set(after.map(elementText));
  return [
    ...[...a]
      .filter((x) => !b.has(x))
      .sort()
      .map((rule): DiffLine => ({ op: '-', rule })),
    ...[...b]
      .filter((x) => !a.has(x))
      .sort()
      .map((rule): DiffLine => ({ op: '+', rule })),
  ];
}

export function diffNftTables(before: Fake, after: Fake): NftTableDiff[] {
  const out: NftTableDiff[] = [];
  for (const name of [...new Set([...before.chains.keys(), ...after.chains.keys()])].sort()) {
    const had = before.chains.get(name);
    const has = after.chains.get(name);
    const lines = diffLines((had?.rules ?? []).map(ruleText), (has?.rules ?? []).map(ruleText), canonicalNftRule);
    if (had && has && lines.every((l) => l.op === ' ')) continue;
    out.push({ kind: 'chain', name, status: !had ? 'added' : !has ? 'removed' : 'changed', lines });
  }
  for (const name of [...new Set([...before.sets.keys(), ...after.sets.keys()])].sort()) {
    const had = before.sets.get(name);
    const has = after.sets.get(name);
    const lines = diffElements([...(had?.elements.values() ?? [])], [...(has?.elements.values() ?? [])]);
    if (had && has && lines.length === 0) continue;
    out.push({ kind: (has ?? had)!.def.kind, name, status: !had ? 'added' : !has ? 'removed' : 'changed', lines });
  }
  return out;
}

/** Readable text: a header per chain/set, then its rules (with context) or elements. */
export function nftDiffText(diffs: readonly NftTableDiff[], context = 2): string {
  let out = '';
  for (const d of diffs) {
    out += `@@ ${d.kind} ${d.name} (${d.status}) @@\n`;
    if (d.status !== 'changed') out += `${d.status === 'added' ? '+' : '-'}${d.kind} ${d.name}\n`;
    out += contextText(d.lines, context, (text) => `${d.kind === 'chain' ? 'rule' : 'element'} ${text}`);
  }
  return out;
}
