// Reading a live kube-proxy table into the Fake, for `explain` and `diff`.
// Two kernel outputs are combined, each for what it gives reliably:
//   - `nft list table <family> kube-proxy` (text): chains with their hook,
//     priority and rules, set/map definitions. Rule text is what nft prints,
//     which is our renderer's syntax except for a few spellings undone by
//     normalizeNftRule (`meta mark set meta mark | 0x00004000` for
//     `mark set mark or 0x00004000`, ...). The JSON form has no rule text.
//     `typeof` maps (the 'maps' endpoint layout) get their field types
//     derived from the expressions, as the renderer writes them.
//   - `nft -j list table` (JSON): the elements of every set and map,
//     turned into the renderer's form by parseElementsJSON (ranges as
//     "lo-hi", concatenations as fields, verdicts as "goto X").
// Dynamic sets (session affinity) are loaded empty: their contents are
// per-client state, not configuration.
//
// The userspace mode's table (`kube-proxy-userspace`) is read the same way,
// but from the text alone (its `explain --from` file is `nft list ruleset`):
// parseNftListing(text, true) also reads the `elements = { ... }` lines.
// Pure.

import { ProxyError } from '../../core/errors.js';
import { normalizeIP } from '../../core/ip.js';
import type { NftFamily } from './names.js';
import { TABLE_NAME } from './names.js';
import { Fake } from './fake.js';
import type { Chain, ChainHook, ChainType, Element, NftMap, NftSet, Rule } from './objects.js';
import { Transaction } from './transaction.js';

export interface NftListing {
  readonly tableComment: string | null;
  readonly chains: Chain[];
  readonly sets: Array<NftSet | NftMap>;
  readonly rules: Rule[];
  /** The elements the text lists, by set or map; only when asked for (parseNftListing). */
  readonly elements?: Map<string, Element[]>;
}

/** The `table <fam> <table> { ... }` block of an nft listing (`nft list table` or `nft list ruleset`), or null. */
export function tableBlock(text: string, fam: NftFamily, table: string = TABLE_NAME): string | null {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.trim() === `table ${fam} ${table} {`);
  if (start < 0) return null;
  const end = lines.findIndex((l, i) => i > start && l === '}');
  return end < 0 ? null : lines.slice(start, end + 1).join('\n');
}

/** nft's named priorities (netfilter hooks of the ip/ip6 families). */
export const PRIORITIES: Record<string, number> = {
  raw: -300,
  mangle: -150,
  dstnat: -100,
  filter: 0,
  security: 50,
  srcnat: 100,
};

function priorityValue(expr: string): number {
  const m = /^([a-z]+|-?\d+)(?:\s*([+-])\s*(\d+))?$/.exec(expr.trim());
  if (!m) throw new ProxyError('KPT_INPUT_INVALID', `nft listing: priority ${expr}`);
  const base = /^-?\d+$/.test(m[1]!) ? Number(m[1]) : PRIORITIES[m[1]!];
  if (base === undefined) throw new ProxyError('KPT_INPUT_INVALID', `nft listing: priority ${expr}`);
  return base + (m[2] === '-' ? -Number(m[3]) : m[2] === '+' ? Number(m[3]) : 0);
}

/** "3h", "10800s", "1d2h" -> seconds. */
function durationSeconds(s: string): number {
  let total = 0;
  for (const m of s.matchAll(/(\d+)(d|h|m|s|ms)/g))
    total += Number(m[1]) * ({ d: 86400, h: 3600, m: 60, s: 1, ms: 0.001 }[m[2] as 'd'] ?? 0);
  return total;
}

/** The kernel's spelling of a rule -> the renderer's. */
export function normalizeNftRule(text: string): string {
  return (
    text
      .replace(/\bmeta mark set meta mark \| /g, 'mark set mark or ')
      .replace(/\bmeta mark set meta mark \^ /g, 'mark set mark xor ')
      .replace(/\bmeta mark & /g, 'mark and ')
      // nft prints `dnat ip addr . port to numgen ...` as `dnat ip to numgen ...`.
      // A Maglev DNAT: nft folds `meta l4proto tcp` into the hashed port, printed `tcp sport`.
      .replace(
        /^dnat (ip6?) to jhash (ip6?) saddr \. (tcp|udp|sctp) sport /,
        'meta l4proto $3 dnat $1 addr . port to jhash $2 saddr . th sport ',
      )
      .replace(/\bdnat (ip6?) to (numgen|jhash) /g, 'dnat $1 addr . port to $2 ')
      // The userspace table's port maps: `redirect to :ip daddr ...`, `dnat to ip saddr:ip daddr ...`.
      .replace(/\bredirect to :(?=\S)/g, 'redirect to : ')
      .replace(/\b(dnat to ip6? saddr):(?=\S)/g, '$1 : ')
      .replace(/\s+/g, ' ')
      .trim()
  );
}

/** Split a trailing `comment "..."` off a rule. */
export function splitComment(text: string): { rule: string; comment?: string } {
  const m = /^(.*?)\s+comment\s+"((?:[^"\\]|\\.)*)"\s*$/.exec(text);
  return m ? { rule: m[1]!, comment: m[2]!.replace(/\\(.)/g, '$1') } : { rule: text };
}

const unquote = (s: string) => (s.startsWith('"') ? s.slice(1, -1).replace(/\\(.)/g, '$1') : s);

interface Block {
  kind: 'chain' | 'set' | 'map';
  name: string;
  props: Record<string, string>;
  rules: string[];
  /** The text between `elements = {` and its `}`. */
  elements: string;
}

/**
 * Parse `nft list table` text. Elements are ignored unless `withElements`
 * (the kube-proxy table's come from JSON, see loadNftTable). Throws
 * KPT_INPUT_INVALID on a shape it does not know.
 */
export function parseNftListing(text: string, withElements = false): NftListing {
  const out: NftListing = {
    tableComment: null,
    chains: [],
    sets: [],
    rules: [],
    ...(withElements ? { elements: new Map<string, Element[]>() } : {}),
  };
  let block: Block | null = null;
  let inElements = false;
  let tableComment: string | null = null;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || /^table\s/.test(line)) continue;
    if (inElements) {
      if (withElements) block!.elements += ` ${line}`;
      if (line.endsWith('}')) inElements = false;
      continue;
    }
    if (block === null) {
      const m = /^(chain|set|map)\s+(\S+)\s*\{$/.exec(line);
      if (m) {
        block = { kind: m[1] as 'chain', name: m[2]!, props: {}, rules: [], elements: '' };
        continue;
      }
      if (line.startsWith('comment ')) {
        tableComment = unquote(line.slice(8).trim());
        continue;
      }
      if (line === '}') continue;
      throw new ProxyError('KPT_INPUT_INVALID', `nft listing: unexpected line: ${line}`);
    }
    if (line === '}') {
      finish(out, block);
      block = null;
      continue;
    }
    if (block.kind !== 'chain') {
      if (line.startsWith('elements = {')) {
        if (withElements) block.elements = line.slice('elements ='.length);
        inElements = !line.endsWith('}');
        continue;
      }
      const m = /^(\S+)\s+(.*)$/.exec(line);
      if (m) block.props[m[1]!] = m[2]!;
      continue;
    }
    if (line.startsWith('type ') && line.includes(' hook ')) {
      block.props['base'] = line;
      continue;
    }
    if (line.startsWith('comment "') && block.rules.length === 0 && block.props['comment'] === undefined) {
      block.props['comment'] = unquote(line.slice(8).trim());
      continue;
    }
    if (line.startsWith('policy ')) continue;
    block.rules.push(line);
  }
  if (block !== null)
    throw new ProxyError('KPT_INPUT_INVALID', `nft listing: unterminated ${block.kind} ${block.name}`);
  return { ...out, tableComment };
}

function finish(out: NftListing, b: Block): void {
  const comment = b.props['comment'] !== undefined ? { comment: unquote(b.props['comment']) } : {};
  if (b.kind === 'chain') {
    const base = b.props['base'];
    let props = {};
    if (base !== undefined) {
      const m = /^type (\S+) hook (\S+)(?: device \S+)? priority ([^;]+);/.exec(base);
      if (!m) throw new ProxyError('KPT_INPUT_INVALID', `nft listing: chain ${b.name}: ${base}`);
      props = { type: m[1] as ChainType, hook: m[2] as ChainHook, priority: priorityValue(m[3]!) };
    }
    out.chains.push({ kind: 'chain', name: b.name, ...props, ...comment });
    for (const r of b.rules) {
      const { rule, comment: rc } = splitComment(normalizeNftRule(r));
      out.rules.push({ kind: 'rule', chain: b.name, rule, ...(rc !== undefined ? { comment: rc } : {}) });
    }
    return;
  }
  const typeOf = b.props['typeof'];
  const type = b.props['type'] ?? (typeOf !== undefined ? typeFromTypeof(typeOf) : undefined);
  if (type === undefined) throw new ProxyError('KPT_INPUT_INVALID', `nft listing: ${b.kind} ${b.name} without type`);
  const flags = b.props['flags']?.split(',').map((f) => f.trim());
  if (out.elements) out.elements.set(b.name, listedElements(b.name, b.kind === 'map', b.elements));
  if (b.kind === 'map') {
    out.sets.push({
      kind: 'map',
      name: b.name,
      type,
      ...(typeOf !== undefined ? { typeOf } : {}),
      ...(flags ? { flags } : {}),
      ...comment,
    });
    return;
  }
  const timeout = b.props['timeout'];
  out.sets.push({
    kind: 'set',
    name: b.name,
    type,
    ...(flags ? { flags } : {}),
    ...(timeout !== undefined ? { timeoutSeconds: durationSeconds(timeout) } : {}),
    ...comment,
  });
}

/**
 * `{ k . k : v, k comment "c" : v, ... }` as nft lists a set's or map's
 * elements -> the renderer's elements (keys as fields, the value as one).
 */
function listedElements(set: string, isMap: boolean, text: string): Element[] {
  const body = text.trim().replace(/^\{\s*|\s*\}$/g, '');
  if (body === '') return [];
  const out: Element[] = [];
  for (const item of body.match(/(?:"(?:[^"\\]|\\.)*"|[^,"])+/g) ?? []) {
    const m = /^(.*?)(?:\s+comment\s+("(?:[^"\\]|\\.)*"))?(?:\s+:\s+(.*))?$/.exec(item.trim())!;
    const [, key = '', comment, value] = m;
    if (key === '' || isMap !== (value !== undefined))
      throw new ProxyError('KPT_INPUT_INVALID', `nft listing: element ${item.trim()} of ${set}`);
    out.push({
      kind: 'element',
      set,
      key: key.split(' . ').map((f) => normalizeIP(f) ?? f),
      ...(value !== undefined ? { value: [value] } : {}),
      ...(comment !== undefined ? { comment: unquote(comment) } : {}),
    });
  }
  return out;
}

const EXPR_TYPES: Record<string, string> = {
  'ip daddr': 'ipv4_addr',
  'ip saddr': 'ipv4_addr',
  'ip6 daddr': 'ipv6_addr',
  'ip6 saddr': 'ipv6_addr',
  'th dport': 'inet_service',
  'th sport': 'inet_service',
  'tcp dport': 'inet_service',
  'udp dport': 'inet_service',
  'meta l4proto': 'inet_proto',
  'meta mark': 'mark',
};

/** "numgen random mod 720720 : ip daddr . th dport" -> "integer : ipv4_addr . inet_service". */
function typeFromTypeof(typeOf: string): string {
  const side = (expr: string) =>
    expr
      .split(' . ')
      .map((e) => {
        const x = e.trim();
        return x.startsWith('numgen ') ? 'integer' : (EXPR_TYPES[x] ?? fail(`typeof ${typeOf}`));
      })
      .join(' . ');
  const fail = (m: string): never => {
    throw new ProxyError('KPT_INPUT_INVALID', `nft listing: ${m}`);
  };
  return typeOf.split(' : ').map(side).join(' : ');
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
const isObj = (v: Json | undefined): v is { [k: string]: Json } =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** One element key (or data value) of nft JSON as the renderer's fields. */
function fieldsOf(v: Json): string[] {
  if (typeof v === 'number') return [String(v)];
  if (typeof v === 'string') return [normalizeIP(v) ?? v];
  if (isObj(v) && Array.isArray(v.concat)) return v.concat.flatMap(fieldsOf);
  if (isObj(v) && Array.isArray(v.range) && v.range.length === 2)
    return [`${fieldsOf(v.range[0]!)[0]}-${fieldsOf(v.range[1]!)[0]}`];
  if (isObj(v) && isObj(v.prefix)) return [`${fieldsOf(v.prefix.addr ?? null)[0]}/${String(v.prefix.len)}`];
  throw new ProxyError('KPT_INPUT_INVALID', `nft JSON: element ${JSON.stringify(v)}`);
}

function valueOf(v: Json): string[] {
  if (isObj(v) && !Array.isArray(v.concat) && !Array.isArray(v.range) && !isObj(v.prefix)) {
    const [verdict] = Object.keys(v);
    const body = verdict === undefined ? undefined : v[verdict];
    if (verdict === undefined) throw new ProxyError('KPT_INPUT_INVALID', 'nft JSON: empty verdict');
    return [isObj(body) && typeof body.target === 'string' ? `${verdict} ${body.target}` : verdict];
  }
  return fieldsOf(v);
}

/**
 * Elements of every non-dynamic set and map of `table` in `nft -j list
 * table` output, in the renderer's form. Throws KPT_INPUT_INVALID on shapes
 * it does not know.
 */
export function parseElementsJSON(text: string, table: string): Map<string, Element[]> {
  const doc = JSON.parse(text) as Json;
  if (!isObj(doc) || !Array.isArray(doc.nftables)) throw new ProxyError('KPT_INPUT_INVALID', 'not nft JSON output');
  const out = new Map<string, Element[]>();
  for (const item of doc.nftables) {
    const s = isObj(item) ? (isObj(item.set) ? item.set : isObj(item.map) ? item.map : null) : null;
    if (!s || s.table !== table || typeof s.name !== 'string') continue;
    if (Array.isArray(s.flags) && s.flags.includes('dynamic')) continue;
    const name = s.name;
    const isMap = isObj(item) && isObj(item.map);
    const els: Element[] = [];
    for (const raw of Array.isArray(s.elem) ? s.elem : []) {
      const [k, v] = isMap && Array.isArray(raw) ? [raw[0]!, raw[1]!] : [raw, undefined];
      const inner = isObj(k) && isObj(k.elem) ? k.elem : null;
      const key = fieldsOf(inner ? (inner.val ?? null) : k);
      const comment = inner && typeof inner.comment === 'string' ? { comment: inner.comment } : {};
      els.push({ kind: 'element', set: name, key, ...(v !== undefined ? { value: valueOf(v) } : {}), ...comment });
    }
    out.set(name, els);
  }
  return out;
}

/**
 * A Fake holding the live table: the listing's chains, sets and rules and
 * the given elements (parseElementsJSON's).
 */
export function loadNftTable(
  family: NftFamily,
  listing: NftListing,
  elements: ReadonlyMap<string, readonly Element[]>,
  table: string = TABLE_NAME,
): Fake {
  const tx = new Transaction(family, table);
  tx.add({ kind: 'table', ...(listing.tableComment !== null ? { comment: listing.tableComment } : {}) });
  for (const c of listing.chains) tx.add(c);
  for (const s of listing.sets) tx.add(s);
  for (const r of listing.rules) tx.add(r);
  for (const [set, els] of elements) if (listing.sets.some((s) => s.name === set)) for (const e of els) tx.add(e);
  const fake = new Fake(family, table);
  fake.run(tx);
  return fake;
}
