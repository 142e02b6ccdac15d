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
import { finish, type Steps } from '../core/steps.js';

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

interface Entry<V> {
  readonly key: string;
  /** The kind's index in ObjectSpec.order (the kind itself is spec.order[rank]). */
  readonly rank: number;
  /** undefined: not in the datapath; null: there, content unknown. */
  applied: V | null | undefined;
  /** Who wants it: nobody, one owner (whose value is `want`), or several with their values. */
  owners: null | string | Map<string, V>;
  want: V | undefined;
  /**
   * The stamp of the last want() that listed or released it: above the
   * current plan's base means already in its touched list, equal to the
   * running want()'s stamp means that owner still wants it. Marks instead
   * of per-plan and per-owner Sets keep a plan of many objects cheap.
   */
  mark: number;
}

const NONE: readonly Entry<never>[] = Object.freeze([]);
/** Objects handled per step of planSteps(). */
const STEP_WORK = 4096;
const NO_OWNERS: readonly string[] = Object.freeze([]);

export class Reconciler<K extends string, V> {
  /** Per kind (by rank): key -> entry. One map per kind, so lookups need no composed id. */
  private readonly entries: Map<string, Entry<V>>[];
  /** Owner -> the objects it wants. */
  private readonly owned = new Map<string, readonly Entry<V>[]>();
  private readonly rank: ReadonlyMap<K, number>;
  /** Per kind (by rank): how many objects some owner wants. */
  private readonly wantedCount: number[];
  private known = false;
  private stamp = 0;

  constructor(private readonly spec: ObjectSpec<K, V>) {
    this.rank = new Map(spec.order.map((k, i) => [k, i]));
    this.wantedCount = spec.order.map(() => 0);
    this.entries = spec.order.map(() => new Map());
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
    this.owned.clear();
    this.wantedCount.fill(0);
    // Entries still remembered are reused (a periodic full sync adopts what it already knows): no
    // garbage, and the maps keep their size; those the datapath no longer holds are dropped below.
    const s = ++this.stamp;
    let kind: K | undefined;
    let r = -1;
    let map: Map<string, Entry<V>> | undefined;
    for (const o of live) {
      if (o.kind !== kind) {
        r = this.rankOf((kind = o.kind));
        map = this.entries[r]!;
      }
      const e = map!.get(o.key);
      if (e) {
        e.applied = o.value;
        e.owners = null;
        e.want = undefined;
        e.mark = s;
      } else map!.set(o.key, { key: o.key, rank: r, applied: o.value, owners: null, want: undefined, mark: s });
    }
    for (const m of this.entries) for (const [key, e] of m) if (e.mark !== s) m.delete(key);
    this.known = true;
  }

  /** After an apply failed: forget everything; the next plan is full. */
  failed(): void {
    this.forget();
    this.known = false;
  }

  /**
   * The operations for these owners' wanted objects (an owner mapped to no
   * objects is withdrawn). `full`: the given owners are all there are.
   * Memory advances now; if applying the operations fails, call failed().
   */
  plan(changes: Iterable<readonly [string, readonly Keyed<K, V>[]]>, full: boolean): Plan<K, V> {
    return finish(this.planSteps(changes, full));
  }

  /**
   * plan() as resumable steps (src/core/steps.ts), each about STEP_WORK
   * objects. Between two steps the memory is half advanced: nothing may ask
   * this reconciler anything until the plan is returned.
   */
  *planSteps(changes: Iterable<readonly [string, readonly Keyed<K, V>[]]>, full: boolean): Steps<Plan<K, V>> {
    full ||= !this.known;
    const base = this.stamp;
    const touched: Entry<V>[] = [];
    const listed = full ? new Set<string>() : null;
    let work = 0;
    for (const [owner, objects] of changes) {
      listed?.add(owner);
      this.want(owner, objects, base, touched);
      if ((work += objects.length + 1) >= STEP_WORK) {
        work = 0;
        yield;
      }
    }
    if (listed !== null) {
      for (const owner of [...this.owned.keys()]) {
        if (listed.has(owner)) continue;
        this.want(owner, [], base, touched);
        if (++work >= STEP_WORK) {
          work = 0;
          yield;
        }
      }
      for (const m of this.entries)
        for (const e of m.values()) {
          if (e.owners === null && e.mark <= base) {
            e.mark = base + 1;
            touched.push(e);
          }
          if (++work >= STEP_WORK) {
            work = 0;
            yield;
          }
        }
    }
    this.stamp++;
    this.known = true;
    return { ops: yield* this.diff(touched), full };
  }

  /** What the datapath holds for an object as far as we know (undefined: absent; null: unknown content). */
  applied(kind: K, key: string): V | null | undefined {
    return this.entryOf(kind, key)?.applied;
  }

  /** Whether some owner wants this object now. */
  wanted(kind: K, key: string): boolean {
    const e = this.entryOf(kind, key);
    return e !== undefined && e.owners !== null;
  }

  /**
   * The owners that want an object, in the order they asked: without a
   * merge the last one's value is the object's. A driver that lets one
   * owner take an object from another reads here whose it was.
   */
  ownersOf(kind: K, key: string): readonly string[] {
    const o = this.entryOf(kind, key)?.owners;
    if (o === undefined || o === null) return NO_OWNERS;
    return typeof o === 'string' ? [o] : [...o.keys()];
  }

  /** The objects one owner wants, as kind and key. */
  *ownedBy(owner: string): IterableIterator<readonly [K, string]> {
    for (const e of this.owned.get(owner) ?? NONE) yield [this.spec.order[e.rank]!, e.key];
  }

  /** How many objects of this kind some owner wants (kept as owners come and go, so it costs nothing to ask). */
  countOf(kind: K): number {
    return this.wantedCount[this.rankOf(kind)]!;
  }

  /**
   * Every object of this kind that some owner wants, with its (merged)
   * value. A walk over the kind's objects: for what is asked rarely (a
   * check, a summary), not for each object of a plan.
   */
  *wantedOf(kind: K): IterableIterator<Keyed<K, V>> {
    for (const e of this.entries[this.rankOf(kind)]!.values())
      if (e.owners !== null) yield { kind, key: e.key, value: this.valueOf(e)! };
  }

  /** Owners that want at least one object. */
  owners(): IterableIterator<string> {
    return this.owned.keys();
  }

  /** Objects remembered (applied or wanted). */
  get size(): number {
    let n = 0;
    for (const m of this.entries) n += m.size;
    return n;
  }

  private forget(): void {
    for (const m of this.entries) m.clear();
    this.owned.clear();
    this.wantedCount.fill(0);
  }

  private entryOf(kind: K, key: string): Entry<V> | undefined {
    const r = this.rank.get(kind);
    return r === undefined ? undefined : this.entries[r]!.get(key);
  }

  /** Replace what one owner wants, recording in `touched` every object whose owners changed. */
  private want(owner: string, objects: readonly Keyed<K, V>[], base: number, touched: Entry<V>[]): void {
    const old = this.owned.get(owner);
    const s = ++this.stamp;
    // The old list is kept while the owner asks for the same objects in the same order (every owner
    // of a full plan over valid memory); a new one is stored trimmed, as it lives as long as the owner.
    let list: Entry<V>[] | undefined = old !== undefined && old.length === objects.length ? undefined : [];
    let kind: K | undefined;
    let r = -1;
    let map: Map<string, Entry<V>> | undefined;
    for (let i = 0; i < objects.length; i++) {
      const o = objects[i]!;
      if (o.kind !== kind) {
        r = this.rankOf((kind = o.kind));
        map = this.entries[r]!;
      }
      let e = map!.get(o.key);
      if (!e) {
        e = { key: o.key, rank: r, applied: undefined, owners: null, want: undefined, mark: 0 };
        map!.set(o.key, e);
      } else if (e.owners === owner && e.mark <= base && e.applied != null && this.spec.same(e.applied, o.value)) {
        // Its only owner asks again for what is applied: what diff() would conclude (no operation,
        // the newer value remembered), settled here instead of queued for it.
        e.want = e.applied = o.value;
        e.mark = s;
        if (list !== undefined) list.push(e);
        else if (old![i] !== e) list = [...old!.slice(0, i), e];
        continue;
      }
      if (e.owners === null) this.wantedCount[r]!++;
      addOwner(e, owner, o.value);
      if (e.mark <= base) touched.push(e);
      e.mark = s;
      if (list !== undefined) list.push(e);
      else if (old![i] !== e) list = [...old!.slice(0, i), e];
    }
    if (list === undefined) return;
    if (old !== undefined) {
      for (const e of old) {
        if (e.mark === s) continue;
        if (e.owners !== null) {
          removeOwner(e, owner);
          if (e.owners === null) this.wantedCount[e.rank]!--;
        }
        if (e.mark <= base) touched.push(e);
        e.mark = s;
      }
    }
    if (list.length > 0) this.owned.set(owner, list.slice());
    else this.owned.delete(owner);
  }

  private *diff(touched: readonly Entry<V>[]): Steps<ObjectOp<K, V>[]> {
    const order = this.spec.order;
    const n = order.length;
    const puts: ObjectOp<K, V>[][] = Array.from({ length: n }, () => []);
    const deletes: ObjectOp<K, V>[][] = Array.from({ length: n }, () => []);
    let work = 0;
    for (const e of touched) {
      if (++work >= STEP_WORK) {
        work = 0;
        yield;
      }
      const r = e.rank;
      const kind = order[r]!;
      const value = this.valueOf(e);
      if (value === undefined) {
        if (e.applied !== undefined) deletes[r]!.push({ op: 'delete', kind, key: e.key, before: e.applied });
        this.entries[r]!.delete(e.key);
        continue;
      }
      if (e.applied === undefined) puts[r]!.push({ op: 'put', kind, key: e.key, value });
      else if (e.applied === null || !this.spec.same(e.applied, value))
        puts[r]!.push({ op: 'put', kind, key: e.key, value, before: e.applied });
      e.applied = value;
    }
    const ops: ObjectOp<K, V>[] = [];
    for (const list of puts) for (const op of list) ops.push(op);
    for (let r = n - 1; r >= 0; r--) for (const op of deletes[r]!) ops.push(op);
    return ops;
  }

  private valueOf(e: Entry<V>): V | undefined {
    if (e.owners === null || typeof e.owners === 'string') return e.want;
    const values = [...e.owners.values()];
    return this.spec.merge ? this.spec.merge(this.spec.order[e.rank]!, values) : values[values.length - 1];
  }

  private rankOf(kind: K): number {
    const r = this.rank.get(kind);
    if (r === undefined) throw new BugError(`object kind ${kind} is not in the driver's order`);
    return r;
  }
}

function addOwner<V>(e: Entry<V>, owner: string, value: V): void {
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

function removeOwner<V>(e: Entry<V>, owner: string): void {
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
