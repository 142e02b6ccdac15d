// The reconciler's operations on the nftables objects (driver.ts) as one
// Transaction, ordered so that every reference resolves inside one kernel
// batch: sets and maps exist before rules name them, every chain exists
// before any rule (rules jump to chains), elements come after the chains they
// point at; flushes of deleted chains and element deletes follow, and
// affinity sets and endpoint maps are deleted last, once no rule names them.
//
// A deleted service chain is only flushed; it is deleted by a later
// transaction at least STALE_CHAIN_DELAY_MS afterwards (before kernel 6.2 a
// deleted map element can still reference its chain for a moment), unless it
// is wanted again first.
import { BugError } from '../../core/errors.js';
import type { ObjectOp } from '../../core/objects.js';
import type { NftKind, NftValue } from './driver.js';
import type { Chain, Element, NftObject, NftSet, Rule, Verb } from './objects.js';
import type { EndpointMapContent } from './serviceport.js';
import type { Transaction } from './transaction.js';
import { finish, type Steps } from '../../core/steps.js';

export const STALE_CHAIN_DELAY_MS = 1000;

export type NftOp = ObjectOp<NftKind, NftValue>;

export interface TranslateContext {
  /** Rules of the chains this sync rendered. */
  readonly rules: ReadonlyMap<string, readonly Rule[]>;
  /** Endpoint maps this sync rendered. */
  readonly maps: ReadonlyMap<string, EndpointMapContent>;
  /** Flushed chains waiting for deletion (chain -> when flushed); updated here. */
  readonly stale: Map<string, number>;
  readonly now: number;
  /** A set the static part deleted in this transaction: its elements went with it. */
  readonly deletedSet: string | null;
}

type Section = 'sets' | 'chains' | 'rules' | 'elements' | 'stale' | 'late';
const ORDER: readonly Section[] = ['sets', 'chains', 'rules', 'elements', 'stale', 'late'];

class OpList {
  private readonly sections = new Map<Section, Array<[Verb, NftObject]>>(ORDER.map((s) => [s, []]));

  push(section: Section, verb: Verb, o: NftObject): this {
    this.sections.get(section)!.push([verb, o]);
    return this;
  }

  flushInto(tx: Transaction): void {
    for (const s of ORDER) {
      for (const [verb, o] of this.sections.get(s)!) {
        if (verb === 'add') tx.add(o);
        else if (verb === 'delete') tx.delete(o);
        else tx.flush(o);
      }
    }
  }
}

/** Append the operations to `tx`, then delete the stale chains old enough. */
export function translateOps(tx: Transaction, ops: readonly NftOp[], c: TranslateContext): void {
  finish(translateOpsSteps(tx, ops, c));
}

/** Operations translated per step of translateOpsSteps(). */
const STEP_OPERATIONS = 1024;

/** translateOps() as resumable steps (src/core/steps.ts). */
export function* translateOpsSteps(tx: Transaction, ops: readonly NftOp[], c: TranslateContext): Steps<void> {
  const list = new OpList();
  let n = 0;
  for (const op of ops) {
    if (++n % STEP_OPERATIONS === 0) yield;
    if (op.op === 'put') put(list, op.kind, op.key, op.value, op.before, c);
    else remove(list, op.kind, op.key, op.before, c);
  }
  for (const [chain, since] of c.stale) {
    if (c.now - since < STALE_CHAIN_DELAY_MS) continue;
    c.stale.delete(chain);
    list.push('chains', 'delete', { kind: 'chain', name: chain });
  }
  list.flushInto(tx);
}

function put(
  list: OpList,
  kind: NftKind,
  key: string,
  value: NftValue,
  before: NftValue | null | undefined,
  c: TranslateContext,
): void {
  switch (kind) {
    case 'chain': {
      const rules = c.rules.get(key);
      if (rules === undefined) throw new BugError(`nftables: chain ${key} to write was not rendered in this sync`);
      // ensureChain as upstream: add (a no-op when present), then flush.
      const chain: Chain = { kind: 'chain', name: key };
      list.push('chains', 'add', chain).push('chains', 'flush', chain);
      for (const r of rules) list.push('rules', 'add', r);
      c.stale.delete(key);
      return;
    }
    case 'element': {
      const e = value as Element;
      if (before !== undefined) list.push('elements', 'delete', { kind: 'element', set: e.set, key: e.key });
      list.push('elements', 'add', e);
      return;
    }
    case 'set':
      list.push('sets', 'add', value as NftSet);
      return;
    case 'map': {
      // Replaced whole in one batch, so no packet sees it half-filled; no rule or chain is touched.
      const m = c.maps.get(key);
      if (m === undefined) throw new BugError(`nftables: endpoint map ${key} to write was not rendered in this sync`);
      list.push('sets', before === undefined ? 'add' : 'flush', m.map);
      for (const e of m.elements) list.push('elements', 'add', e);
      return;
    }
  }
}

function remove(list: OpList, kind: NftKind, key: string, before: NftValue | null, c: TranslateContext): void {
  switch (kind) {
    case 'chain':
      // Already flushed (read back while waiting for deletion): it keeps its time.
      if (c.stale.has(key)) return;
      list.push('stale', 'flush', { kind: 'chain', name: key });
      c.stale.set(key, c.now);
      return;
    case 'element': {
      const { set, elementKey } = elementOf(key, before);
      if (set === c.deletedSet) return;
      list.push('stale', 'delete', { kind: 'element', set, key: elementKey });
      return;
    }
    case 'set':
      list.push('late', 'delete', { kind: 'set', name: key, type: '' });
      return;
    case 'map':
      list.push('late', 'delete', { kind: 'map', name: key, type: '' });
      return;
  }
}

function elementOf(id: string, before: NftValue | null): { set: string; elementKey: readonly string[] } {
  if (before !== null && typeof before !== 'string' && before.kind === 'element')
    return { set: before.set, elementKey: before.key };
  const i = id.indexOf('\u0000');
  return { set: id.slice(0, i), elementKey: id.slice(i + 1).split(' . ') };
}
