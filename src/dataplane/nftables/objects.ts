// nftables objects as readonly tagged-union data (knftables types.go), and
// their exact text in an `nft -f` script. The same text is what Fake.dump()
// prints, so a dump is itself a loadable script.
import type { NftFamily } from './names.js';
import type { RuleBody } from './rule.js';

export type ChainType = 'filter' | 'nat' | 'route';
export type ChainHook = 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting';

export interface Table {
  readonly kind: 'table';
  readonly comment?: string;
}

/** A chain; base chains have type, hook and priority (all three or none). */
export interface Chain {
  readonly kind: 'chain';
  readonly name: string;
  readonly type?: ChainType;
  readonly hook?: ChainHook;
  readonly priority?: number;
  readonly comment?: string;
}

export interface NftSet {
  readonly kind: 'set';
  readonly name: string;
  /** e.g. "ipv4_addr" or "ipv4_addr . inet_proto . inet_service". */
  readonly type: string;
  readonly flags?: readonly string[];
  readonly timeoutSeconds?: number;
  /** Each element counts the packets and bytes that match it (the traffic counters' sets). */
  readonly counter?: boolean;
  readonly comment?: string;
}

export interface NftMap {
  readonly kind: 'map';
  readonly name: string;
  /** "<key type> : <value type>", e.g. "inet_proto . inet_service : verdict". */
  readonly type: string;
  /**
   * Written as `typeof <typeOf>` instead of `type <type>` when nft cannot
   * name the key type (numgen's plain integer); `type` then still describes
   * the fields for the fake's key checks.
   */
  readonly typeOf?: string;
  readonly flags?: readonly string[];
  readonly comment?: string;
}

/**
 * A rule. `rule` is its text, opaque to the transaction and the fake (as in
 * knftables). The renderers' rules have a `body` (rule.ts), which the netlink
 * encoder compiles, and print their text from it when read. Rules read back
 * from the kernel (listing.ts) and hand-written ones carry text only.
 */
export interface Rule {
  readonly kind: 'rule';
  readonly chain: string;
  readonly rule: string;
  readonly body?: RuleBody;
  readonly comment?: string;
}

/** An element of a set (no value) or a map (value, e.g. ["goto service-..."]). */
export interface Element {
  readonly kind: 'element';
  /** Name of the set or map. */
  readonly set: string;
  readonly key: readonly string[];
  readonly value?: readonly string[];
  readonly comment?: string;
}

export type NftObject = Table | Chain | NftSet | NftMap | Rule | Element;
export type Verb = 'add' | 'delete' | 'flush';

export interface Operation {
  readonly verb: Verb;
  readonly object: NftObject;
}

/** Go's %q for the plain ASCII comments we write. */
export function quote(s: string): string {
  return JSON.stringify(s);
}

export function elementKeyText(key: readonly string[]): string {
  return key.join(' . ');
}

/** Number of concatenated fields in a set type or a map's key type. */
export function keyArity(setOrMap: NftSet | NftMap): number {
  const keyType = setOrMap.kind === 'map' ? setOrMap.type.split(' : ')[0]! : setOrMap.type;
  return keyType.split(' . ').length;
}

function chainProps(c: Chain): string {
  let props = '';
  if (c.type !== undefined) props += ` type ${c.type} hook ${c.hook ?? ''} priority ${c.priority ?? 0} ;`;
  if (c.comment !== undefined) props += ` comment ${quote(c.comment)} ;`;
  return props === '' ? '' : ` {${props} }`;
}

function setProps(s: NftSet | NftMap): string {
  let props = s.kind === 'map' && s.typeOf !== undefined ? ` typeof ${s.typeOf} ;` : ` type ${s.type} ;`;
  if (s.flags && s.flags.length > 0) props += ` flags ${s.flags.join(',')} ;`;
  if (s.kind === 'set' && s.timeoutSeconds !== undefined) props += ` timeout ${s.timeoutSeconds}s ;`;
  if (s.kind === 'set' && s.counter === true) props += ' counter ;';
  if (s.comment !== undefined) props += ` comment ${quote(s.comment)} ;`;
  return ` {${props} }`;
}

/**
 * One line of an `nft -f` script (knftables writeOperation). Deletes and
 * flushes name the object only; element deletes carry only the key.
 */
export function operationText(op: Operation, family: NftFamily, table: string): string {
  const { verb, object: o } = op;
  const full = verb === 'add';
  switch (o.kind) {
    case 'table':
      return `${verb} table ${family} ${table}${full && o.comment !== undefined ? ` { comment ${quote(o.comment)} ; }` : ''}`;
    case 'chain':
      return `${verb} chain ${family} ${table} ${o.name}${full ? chainProps(o) : ''}`;
    case 'set':
    case 'map':
      return `${verb} ${o.kind} ${family} ${table} ${o.name}${full ? setProps(o) : ''}`;
    case 'rule':
      return `${verb} rule ${family} ${table} ${o.chain} ${o.rule}${o.comment !== undefined ? ` comment ${quote(o.comment)}` : ''}`;
    case 'element': {
      let body = elementKeyText(o.key);
      if (full && o.comment !== undefined) body += ` comment ${quote(o.comment)}`;
      if (full && o.value && o.value.length > 0) body += ` : ${o.value.join(' . ')}`;
      return `${verb} element ${family} ${table} ${o.set} { ${body} }`;
    }
  }
}
