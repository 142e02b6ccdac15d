// A rule as data: the matches and statements our renderers write, in order.
// Two printers read it: ruleText() below (the `nft -f` text, which the Fake,
// the tracer, diff and explain also read) and the netlink compiler
// (src/platform/nftables/nlrule.ts), so nothing we write is parsed back.
// The union is exactly the grammar the renderers use (static.ts,
// serviceport.ts, the userspace mode's rules.ts); a new kind of match needs
// a case in both printers, which the compiler's exhaustive switch enforces.
import { joinHostPort } from '../../core/ip.js';
import type { NftFamily } from './names.js';
import type { Rule } from './objects.js';

/** A field of a concatenation (`ip daddr . meta l4proto . th dport`). */
export type Field = 'ip saddr' | 'ip daddr' | 'ip6 saddr' | 'ip6 daddr' | 'meta l4proto' | 'th dport';
export type Dir = 'saddr' | 'daddr';

export type Item =
  // matches
  | { readonly k: 'ctStateNew' }
  | { readonly k: 'ctDirOriginal' }
  | { readonly k: 'ctStatusDnat' }
  | { readonly k: 'fibLocal'; readonly dir: Dir }
  /** `ip daddr [!=] X`, or `{ X<sep>Y }` when `sep` is set (one element still in braces then). */
  | {
      readonly k: 'addr';
      readonly fam: NftFamily;
      readonly dir: Dir;
      readonly neq: boolean;
      readonly addrs: readonly string[];
      readonly sep?: ', ' | ',';
    }
  /** `ip daddr [!=] @set` */
  | { readonly k: 'addrIn'; readonly fam: NftFamily; readonly dir: Dir; readonly neq: boolean; readonly set: string }
  /** `FIELD . FIELD ... @set` or `... vmap @map` */
  | { readonly k: 'lookup'; readonly fields: readonly Field[]; readonly set: string; readonly vmap: boolean }
  /** `meta l4proto tcp`, or `meta l4proto { tcp, udp }` for more than one. */
  | { readonly k: 'l4proto'; readonly protos: readonly string[] }
  /** `iifname [!=] "name"`, `"prefix*"` when prefix. */
  | { readonly k: 'iifname'; readonly neq: boolean; readonly name: string; readonly prefix: boolean }
  /** `mark and MASK != VALUE` */
  | { readonly k: 'markAnd'; readonly mask: number; readonly value: number }
  /** `numgen random mod MOD VALUE` */
  | { readonly k: 'numgen'; readonly mod: number; readonly value: number }
  // statements
  | { readonly k: 'markSet'; readonly op: 'or' | 'xor'; readonly mark: number }
  | { readonly k: 'masquerade'; readonly fullyRandom: boolean }
  | { readonly k: 'reject' }
  | { readonly k: 'drop' }
  | { readonly k: 'jump' | 'goto'; readonly chain: string }
  /** `dnat to ADDR:PORT` */
  | { readonly k: 'dnat'; readonly addr: string; readonly port: number }
  /** `update @set { ip saddr }` */
  | { readonly k: 'updateSaddr'; readonly fam: NftFamily; readonly set: string }
  /** `dnat ip addr . port to numgen random mod MOD map @map` */
  | { readonly k: 'dnatNumgenMap'; readonly fam: NftFamily; readonly mod: number; readonly map: string }
  /** `dnat ip addr . port to PICK map { K : ADDR . PORT , ... }` (PICK: numgen random mod MOD unless `pick`) */
  | {
      readonly k: 'dnatNumgenList';
      readonly fam: NftFamily;
      readonly mod: number;
      readonly pick?: Pick;
      readonly entries: ReadonlyArray<{ readonly key: number; readonly addr: string; readonly port: number }>;
    }
  /** `PICK vmap { K : goto CHAIN , ... }` (PICK: numgen random mod MOD unless `pick`) */
  | {
      readonly k: 'numgenVmap';
      readonly mod: number;
      readonly pick?: Pick;
      readonly entries: ReadonlyArray<{
        readonly key: number;
        readonly verdict: 'goto' | 'jump';
        readonly chain: string;
      }>;
    }
  /** `redirect to : FIELD . ... map @map` */
  | { readonly k: 'redirectMap'; readonly fields: readonly Field[]; readonly map: string }
  /** `dnat to ip saddr : FIELD . ... map @map` */
  | { readonly k: 'dnatSaddrMap'; readonly fam: NftFamily; readonly fields: readonly Field[]; readonly map: string };

export type RuleBody = readonly Item[];

/**
 * What picks the entry of an endpoint choice: `numgen random mod N`
 * (upstream's), `numgen inc mod N` (round-robin: one counter per rule,
 * advanced atomically) or `jhash FAM saddr [. th sport] mod N seed S`
 * (Maglev and source hashing: the client decides, the same on every node).
 */
export type Pick =
  | { readonly k: 'random' }
  | { readonly k: 'inc' }
  | { readonly k: 'jhash'; readonly fam: NftFamily; readonly sport: boolean; readonly seed: number };

export const PICK_RANDOM: Pick = { k: 'random' };

export function pickText(p: Pick | undefined, mod: number): string {
  if (p === undefined || p.k === 'random') return `numgen random mod ${mod}`;
  if (p.k === 'inc') return `numgen inc mod ${mod}`;
  return `jhash ${p.fam} saddr${p.sport ? ' . th sport' : ''} mod ${mod} seed ${markText(p.seed)}`;
}

/** A mark as the renderers have always written it: 0x and eight hex digits. */
export function markText(m: number): string {
  return `0x${(m >>> 0).toString(16).padStart(8, '0')}`;
}

function itemText(i: Item): string {
  switch (i.k) {
    case 'ctDirOriginal':
      return 'ct direction original';
    case 'ctStateNew':
      return 'ct state new';
    case 'ctStatusDnat':
      return 'ct status dnat';
    case 'fibLocal':
      return `fib ${i.dir} type local`;
    case 'addr': {
      const v = i.sep === undefined ? i.addrs[0]! : `{ ${i.addrs.join(i.sep)} }`;
      return `${i.fam} ${i.dir} ${i.neq ? '!= ' : ''}${v}`;
    }
    case 'addrIn':
      return `${i.fam} ${i.dir} ${i.neq ? '!= ' : ''}@${i.set}`;
    case 'lookup':
      return `${i.fields.join(' . ')} ${i.vmap ? 'vmap ' : ''}@${i.set}`;
    case 'l4proto':
      return i.protos.length === 1 ? `meta l4proto ${i.protos[0]!}` : `meta l4proto { ${i.protos.join(', ')} }`;
    case 'iifname':
      return `iifname ${i.neq ? '!= ' : ''}${JSON.stringify(i.prefix ? `${i.name}*` : i.name)}`;
    case 'markAnd':
      return `mark and ${markText(i.mask)} != ${i.value}`;
    case 'numgen':
      return `numgen random mod ${i.mod} ${i.value}`;
    case 'markSet':
      return `mark set mark ${i.op} ${markText(i.mark)}`;
    case 'masquerade':
      return i.fullyRandom ? 'masquerade fully-random' : 'masquerade';
    case 'reject':
    case 'drop':
      return i.k;
    case 'jump':
    case 'goto':
      return `${i.k} ${i.chain}`;
    case 'dnat':
      return `dnat to ${joinHostPort(i.addr, i.port)}`;
    case 'updateSaddr':
      return `update @${i.set} { ${i.fam} saddr }`;
    case 'dnatNumgenMap':
      return `dnat ${i.fam} addr . port to numgen random mod ${i.mod} map @${i.map}`;
    case 'dnatNumgenList': {
      const entries = i.entries.map((e) => `${e.key} : ${e.addr} . ${e.port}`).join(' , ');
      return `dnat ${i.fam} addr . port to ${pickText(i.pick, i.mod)} map { ${entries} }`;
    }
    case 'numgenVmap': {
      const entries = i.entries.map((e) => `${e.key} : ${e.verdict} ${e.chain}`).join(' , ');
      return `${pickText(i.pick, i.mod)} vmap { ${entries} }`;
    }
    case 'redirectMap':
      return `redirect to : ${i.fields.join(' . ')} map @${i.map}`;
    case 'dnatSaddrMap':
      return `dnat to ${i.fam} saddr : ${i.fields.join(' . ')} map @${i.map}`;
  }
}

/** The rule's `nft -f` text (without chain and comment). */
export function ruleText(body: RuleBody): string {
  if (body.length === 0) return '';
  let s = itemText(body[0]!);
  for (let n = 1; n < body.length; n++) s += ` ${itemText(body[n]!)}`;
  return s;
}

/**
 * A rendered rule: its body, and its text printed when read. The text is not
 * kept: a full sync holds every rule until its batch is written, and the
 * netlink path reads only the body (the driver's chain memory, `nft -f`, the
 * Fake and the tracer print it when they need it).
 */
class BodyRule implements Rule {
  readonly kind = 'rule';
  declare readonly comment?: string;
  constructor(
    readonly chain: string,
    readonly body: RuleBody,
    comment: string | undefined,
  ) {
    if (comment !== undefined) this.comment = comment;
  }
  get rule(): string {
    return ruleText(this.body);
  }
}

/** A rule object of a body (its `rule` text printed on demand). */
export function rule(chain: string, body: RuleBody, comment?: string): Rule {
  return new BodyRule(chain, body, comment);
}

// Constructors: the renderers read as the text they produce.
export const ctStateNew: Item = { k: 'ctStateNew' };
/** Only the traffic counters' table matches it; that table is written with `nft -f`. */
export const ctDirectionOriginal: Item = { k: 'ctDirOriginal' };
export const ctStatusDnat: Item = { k: 'ctStatusDnat' };
export const reject: Item = { k: 'reject' };
export const drop: Item = { k: 'drop' };
const FIB_LOCAL: Readonly<Record<Dir, Item>> = {
  saddr: { k: 'fibLocal', dir: 'saddr' },
  daddr: { k: 'fibLocal', dir: 'daddr' },
};
export const fibLocal = (dir: Dir): Item => FIB_LOCAL[dir];
/** One address or prefix (no braces). */
export const addr = (fam: NftFamily, dir: Dir, a: string, neq = false): Item => ({
  k: 'addr',
  fam,
  dir,
  neq,
  addrs: [a],
});
/** A braced list of addresses or prefixes, joined with `sep`. */
export const addrList = (
  fam: NftFamily,
  dir: Dir,
  addrs: readonly string[],
  neq = false,
  sep: ', ' | ',' = ', ',
): Item => ({
  k: 'addr',
  fam,
  dir,
  neq,
  addrs,
  sep,
});
export const addrIn = (fam: NftFamily, dir: Dir, set: string, neq = false): Item => ({
  k: 'addrIn',
  fam,
  dir,
  neq,
  set,
});
export const lookup = (fields: readonly Field[], set: string): Item => ({ k: 'lookup', fields, set, vmap: false });
export const vmap = (fields: readonly Field[], map: string): Item => ({ k: 'lookup', fields, set: map, vmap: true });
// A full sync holds every rule's body until its batch is written, so the
// items that recur in thousands of rules are shared constants, not copies.
const L4PROTO: Readonly<Record<string, Item>> = Object.fromEntries(
  ['tcp', 'udp', 'sctp'].map((p) => [p, { k: 'l4proto', protos: [p] }]),
);
/** `meta l4proto P` */
export const l4proto = (p: string): Item => L4PROTO[p] ?? { k: 'l4proto', protos: [p] };
/** `meta l4proto { P, ... }` */
export const l4protos = (protos: readonly string[]): Item => ({ k: 'l4proto', protos });
export const iifname = (name: string, prefix: boolean, neq = false): Item => ({ k: 'iifname', neq, name, prefix });
export const markAnd = (mask: number, value: number): Item => ({ k: 'markAnd', mask, value });
/** The cascade's `numgen random mod K 0` for the endpoint counts most Services have. */
const NUMGEN_0: readonly Item[] = Array.from({ length: 33 }, (_, mod) => ({ k: 'numgen', mod, value: 0 }));
export const numgen = (mod: number, value: number): Item =>
  value === 0 && mod < NUMGEN_0.length ? NUMGEN_0[mod]! : { k: 'numgen', mod, value };
export const markSet = (op: 'or' | 'xor', mark: number): Item => ({ k: 'markSet', op, mark });
export const masquerade = (fullyRandom: boolean): Item => ({ k: 'masquerade', fullyRandom });
/** Masquerade (fully-random) what carries the masquerade mark, clearing the mark: upstream's masquerading rule. */
export const masqueradeMarked = (mark: number): RuleBody => [markAnd(mark, 0), markSet('xor', mark), masquerade(true)];
export const jump = (chain: string): Item => ({ k: 'jump', chain });
export const goto = (chain: string): Item => ({ k: 'goto', chain });
export const dnat = (a: string, port: number): Item => ({ k: 'dnat', addr: a, port });
export const updateSaddr = (fam: NftFamily, set: string): Item => ({ k: 'updateSaddr', fam, set });
export const dnatNumgenMap = (fam: NftFamily, mod: number, map: string): Item => ({
  k: 'dnatNumgenMap',
  fam,
  mod,
  map,
});
export const dnatNumgenList = (
  fam: NftFamily,
  mod: number,
  entries: ReadonlyArray<{ readonly key: number; readonly addr: string; readonly port: number }>,
  pick: Pick = PICK_RANDOM,
): Item => ({ k: 'dnatNumgenList', fam, mod, entries, ...(pick.k === 'random' ? {} : { pick }) });
export const numgenVmap = (
  mod: number,
  entries: ReadonlyArray<{ readonly key: number; readonly verdict: 'goto' | 'jump'; readonly chain: string }>,
  pick: Pick = PICK_RANDOM,
): Item => ({ k: 'numgenVmap', mod, entries, ...(pick.k === 'random' ? {} : { pick }) });
export const redirectMap = (fields: readonly Field[], map: string): Item => ({ k: 'redirectMap', fields, map });
export const dnatSaddrMap = (fam: NftFamily, fields: readonly Field[], map: string): Item => ({
  k: 'dnatSaddrMap',
  fam,
  fields,
  map,
});

/** `ip daddr . meta l4proto . th dport` for this family. */
export const daddrProtoPort = (fam: NftFamily): readonly Field[] =>
  fam === 'ip' ? IP_DADDR_PROTO_PORT : IP6_DADDR_PROTO_PORT;
export const PROTO_PORT: readonly Field[] = ['meta l4proto', 'th dport'];
const IP_DADDR_PROTO_PORT: readonly Field[] = ['ip daddr', 'meta l4proto', 'th dport'];
const IP6_DADDR_PROTO_PORT: readonly Field[] = ['ip6 daddr', 'meta l4proto', 'th dport'];
