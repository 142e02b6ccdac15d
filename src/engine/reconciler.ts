// The one reconciler every datapath mode goes through (docs/architecture.md,
// "one reconciler, a driver per mode"). A mode's driver says, per owner (a
// service, a service port, the node), which keyed objects it wants; the
// reconciler remembers what was applied and who wants what, and answers
// with the ordered operations that take the datapath from what it holds to
// what is wanted.
//
// It owns, for every mode:
// - ownership: an object stays while any owner wants it (an element two
//   Services share, an address several ports use); its value is the owners'
//   merged value (ObjectSpec.merge), by default the latest owner's;
// - full versus partial: a partial plan touches only the owners it is given;
//   a full plan also withdraws every owner it is not given and deletes what
//   nobody owns (including whatever was adopted from the live datapath);
// - the diff: an object whose value is unchanged produces no operation;
// - the order: puts by kind in ObjectSpec.order, then deletes in reverse;
// - the failure rule: memory advances when a plan is made, so after an apply
//   fails the caller calls failed(); everything is forgotten, needsLive()
//   turns true and the next plan is full, against what adopt() read back.
import { BugError } from '../core/errors.js';
import type { Keyed, ObjectOp, ObjectSpec } from '../core/objects.js';

/** An object as the datapath holds it; `value` null when its content is unknown. */
export interface LiveObject<K extends string, V> {
  readonly kind: K;
  readonly key: string;
  readonly value: V | null;
}

export interface Plan<K extends string, V> {
  readonly ops: ObjectOp<K, V>[];
  /** Whether this plan was full (asked for, or forced by an earlier failure). */
  readonly full: boolean;
}

interface Entry<K extends string, V> {
  readonly kind: K;
  readonly key: string;
  /** The kind's place in ObjectSpec.order. */
  readonly rank: number;
  /** undefined: not in the datapath; null: there, content unknown. */
  applied: V | null | undefined;
  /** Who wants it: nobody, one owner (whose value is `want`), or several with their values. */
  owners: null | string | Map<string, V>;
  want: V | undefined;
}

const NONE: readonly string[] = Object.freeze([]);

export class Reconciler<K extends string, V> {
  private readonly entries = new Map<string, Entry<K, V>>();
  /** Owner -> the ids (kind + key) of the objects it wants. */
  private readonly owned = new Map<string, readonly string[]>();
  private readonly rank: ReadonlyMap<K, number>;
  private known = false;

  constructor(private readonly spec: ObjectSpec<K, V>) {
    this.rank = new Map(spec.order.map((k, i) => [k, i]));
  }

  /** True until the first plan and after failed(): the next plan is full and wants adopt() first. */
  needsLive(): boolean {
    return !this.known;
  }

  /**
   * Start from what the datapath holds now: every earlier memory is dropped
   * and each live object is kept as applied, owned by nobody, so the next
   * (full) plan deletes what no owner asks for again.
   */
  adopt(live: Iterable<LiveObject<K, V>>): void {
    this.entries.clear();
    this.owned.clear();
    for (const o of live) {
      this.entries.set(idOf(o.kind, o.key), {
        kind: o.kind,
        key: o.key,
        rank: this.rankOf(o.kind),
        applied: o.value,
        owners: null,
        want: undefined,
      });
    }
    this.known = true;
  }

  /** After an apply failed: forget everything; the next plan is full. */
  failed(): void {
    this.entries.clear();
    this.owned.clear();
    this.known = false;
  }

  /**
   * The operations for these owners' wanted objects (an owner mapped to no
   * objects is withdrawn). `full`: the given owners are all there are.
   * Memory advances now; if applying the operations fails, call failed().
   */
  plan(changes: Iterable<readonly [string, readonly Keyed<K, V>[]]>, full: boolean): Plan<K, V> {
    full ||= !this.known;
    const touched = new Set<Entry<K, V>>();
    const listed = full ? new Set<string>() : null;
    for (const [owner, objects] of changes) {
      listed?.add(owner);
      this.want(owner, objects, touched);
    }
    if (listed !== null) {
      for (const owner of [...this.owned.keys()]) if (!listed.has(owner)) this.want(owner, [], touched);
      for (const e of this.entries.values()) if (e.owners === null) touched.add(e);
    }
    this.known = true;
    return { ops: this.diff(touched), full };
  }

  /** What the datapath holds for an object as far as we know (undefined: absent; null: unknown content). */
  applied(kind: K, key: string): V | null | undefined {
    return this.entries.get(idOf(kind, key))?.applied;
  }

  /** Whether some owner wants this object now. */
  wanted(kind: K, key: string): boolean {
    const e = this.entries.get(idOf(kind, key));
    return e !== undefined && e.owners !== null;
  }

  /** The objects one owner wants, as kind and key. */
  *ownedBy(owner: string): IterableIterator<readonly [K, string]> {
    for (const id of this.owned.get(owner) ?? NONE) {
      const e = this.entries.get(id);
      if (e) yield [e.kind, e.key];
    }
  }

  /** Owners that want at least one object. */
  owners(): IterableIterator<string> {
    return this.owned.keys();
  }

  /** Objects remembered (applied or wanted). */
  get size(): number {
    return this.entries.size;
  }

  /** Replace what one owner wants, recording every object whose owners changed. */
  private want(owner: string, objects: readonly Keyed<K, V>[], touched: Set<Entry<K, V>>): void {
    const old = this.owned.get(owner);
    const ids: string[] = [];
    for (const o of objects) {
      const id = idOf(o.kind, o.key);
      let e = this.entries.get(id);
      if (!e) {
        e = { kind: o.kind, key: o.key, rank: this.rankOf(o.kind), applied: undefined, owners: null, want: undefined };
        this.entries.set(id, e);
      } else if (e.owners === owner && e.applied != null && this.spec.same(e.applied, o.value)) {
        // Its only owner asks again for what is applied: what diff() would conclude (no operation, the
        // new value remembered), without queueing it there. The bulk of a full plan over valid memory.
        e.want = o.value;
        e.applied = o.value;
        ids.push(id);
        continue;
      }
      addOwner(e, owner, o.value);
      ids.push(id);
      touched.add(e);
    }
    if (old !== undefined && sameIds(old, ids)) return;
    if (old !== undefined) {
      const keep = ids.length > 0 ? new Set(ids) : null;
      for (const id of old) {
        if (keep?.has(id)) continue;
        const e = this.entries.get(id);
        if (!e) continue;
        removeOwner(e, owner);
        touched.add(e);
      }
    }
    if (ids.length > 0) this.owned.set(owner, ids);
    else this.owned.delete(owner);
  }

  private diff(touched: Set<Entry<K, V>>): ObjectOp<K, V>[] {
    const n = this.spec.order.length;
    const puts: ObjectOp<K, V>[][] = Array.from({ length: n }, () => []);
    const deletes: ObjectOp<K, V>[][] = Array.from({ length: n }, () => []);
    for (const e of touched) {
      const r = e.rank;
      const value = this.valueOf(e);
      if (value === undefined) {
        if (e.applied !== undefined) deletes[r]!.push({ op: 'delete', kind: e.kind, key: e.key, before: e.applied });
        this.entries.delete(idOf(e.kind, e.key));
        continue;
      }
      if (e.applied === undefined) puts[r]!.push({ op: 'put', kind: e.kind, key: e.key, value });
      else if (e.applied === null || !this.spec.same(e.applied, value))
        puts[r]!.push({ op: 'put', kind: e.kind, key: e.key, value, before: e.applied });
      e.applied = value;
    }
    const ops: ObjectOp<K, V>[] = [];
    for (const list of puts) for (const op of list) ops.push(op);
    for (let r = n - 1; r >= 0; r--) for (const op of deletes[r]!) ops.push(op);
    return ops;
  }

  private valueOf(e: Entry<K, V>): V | undefined {
    if (e.owners === null || typeof e.owners === 'string') return e.want;
    const values = [...e.owners.values()];
    return this.spec.merge ? this.spec.merge(e.kind, values) : values[values.length - 1];
  }

  private rankOf(kind: K): number {
    const r = this.rank.get(kind);
    if (r === undefined) throw new BugError(`object kind ${kind} is not in the driver's order`);
    return r;
  }
}

/** Whether an owner asks for the same objects in the same order as before (the common case: nothing to withdraw). */
function sameIds(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function idOf(kind: string, key: string): string {
  return `${kind}\u0000${key}`;
}

function addOwner<K extends string, V>(e: Entry<K, V>, owner: string, value: V): void {
  if (e.owners === null || e.owners === owner) {
    e.owners = owner;
    e.want = value;
    return;
  }
  if (typeof e.owners === 'string') e.owners = new Map([[e.owners, e.want as V]]);
  // Re-inserted so the latest owner's value is last (the default merge).
  e.owners.delete(owner);
  e.owners.set(owner, value);
  e.want = undefined;
}

function removeOwner<K extends string, V>(e: Entry<K, V>, owner: string): void {
  if (e.owners === null) return;
  if (typeof e.owners === 'string') {
    if (e.owners === owner) {
      e.owners = null;
      e.want = undefined;
    }
    return;
  }
  e.owners.delete(owner);
  if (e.owners.size === 1) {
    const [only, v] = e.owners.entries().next().value!;
    e.owners = only;
    e.want = v;
  } else if (e.owners.size === 0) {
    e.owners = null;
    e.want = undefined;
  }
}
