// The object store behind the test API server: one global resourceVersion
// counter (as etcd's revision), an ordered event history that compact() can
// drop, and synchronous listeners so watchers see events in commit order.
//
// Invariants: every write bumps `rv` by one and appends exactly one event;
// history holds every event with rv > compactedRV, in order. A watch from
// version R can be served iff R >= compactedRV; otherwise it is 410 Expired.

import { randomUUID } from 'node:crypto';
import type { ResourceDef } from './resources.js';

export type Obj = Record<string, unknown> & { metadata: Meta };
export interface Meta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  [k: string]: unknown;
}

export interface StoreEvent {
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly rv: number;
  readonly resource: string;
  /** The object after the change (for DELETED: the last state, with the deletion's rv). */
  readonly object: Obj;
  /** The object before the change (MODIFIED and DELETED). */
  readonly prev?: Obj;
}

/** A failure with the HTTP status and Status reason the real server would answer. */
export class StoreError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    /** The Status's details (causes, retryAfterSeconds), when the real server sends them. */
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'StoreError';
  }
}

export function objectKey(ns: string | undefined, name: string): string {
  return ns ? `${ns}/${name}` : name;
}

export class Store {
  private rv: number;
  private compactedRV: number;
  private readonly objects = new Map<string, Map<string, Obj>>();
  private history: StoreEvent[] = [];
  private readonly listeners = new Set<(ev: StoreEvent) => void>();

  constructor(startRV = 100) {
    this.rv = startRV;
    this.compactedRV = startRV;
  }

  get resourceVersion(): number {
    return this.rv;
  }
  get oldestWatchableRV(): number {
    return this.compactedRV;
  }

  private bucket(resource: string): Map<string, Obj> {
    let b = this.objects.get(resource);
    if (!b) this.objects.set(resource, (b = new Map()));
    return b;
  }

  get(def: ResourceDef, ns: string | undefined, name: string): Obj {
    const o = this.bucket(def.plural).get(objectKey(ns, name));
    if (!o) throw new StoreError(404, 'NotFound', `${def.plural} "${name}" not found`);
    return structuredClone(o);
  }

  /** All objects of a resource (optionally in one namespace), sorted by key, with the list's rv. */
  list(def: ResourceDef, ns?: string): { rv: number; items: Obj[] } {
    return { rv: this.rv, ...this.select(def, { ns }) };
  }

  /**
   * The stored objects of a resource (optionally in one namespace), sorted by
   * key, NOT copied: read them, never change them. A write replaces the
   * stored object with a new one and never changes one in place, so the
   * list stays the state as of now even while later writes happen.
   */
  current(def: ResourceDef, ns?: string): Obj[] {
    const b = this.bucket(def.plural);
    const out: Obj[] = [];
    for (const k of [...b.keys()].sort()) {
      const o = b.get(k)!;
      if (ns === undefined || o.metadata.namespace === ns) out.push(o);
    }
    return out;
  }

  /**
   * A page of a list as etcd serves it: the objects as they were at version
   * `atRV` (default now; 410 Expired if history no longer reaches back), in
   * key order, after key `after`, that `match` accepts, at most `limit` of
   * them. `more` counts the matching objects left after the page.
   */
  select(
    def: ResourceDef,
    q: { ns?: string; atRV?: number; after?: string; limit?: number; match?: (o: Obj) => boolean },
  ): { items: Obj[]; lastKey: string | undefined; more: number } {
    const objects = q.atRV === undefined || q.atRV === this.rv ? this.bucket(def.plural) : this.snapshotAt(def, q.atRV);
    const keys = [...objects.keys()].filter((k) => q.after === undefined || k > q.after).sort();
    const items: Obj[] = [];
    let lastKey: string | undefined;
    let more = 0;
    for (const k of keys) {
      const o = objects.get(k)!;
      if (q.ns !== undefined && o.metadata.namespace !== q.ns) continue;
      if (q.match && !q.match(o)) continue;
      if (q.limit !== undefined && items.length >= q.limit) {
        more++;
        continue;
      }
      items.push(structuredClone(o));
      lastKey = k;
    }
    return { items, lastKey, more };
  }

  /** The objects of one resource as they were at `rv`, by rolling the history back. */
  private snapshotAt(def: ResourceDef, rv: number): Map<string, Obj> {
    if (rv < this.compactedRV) {
      throw new StoreError(410, 'Expired', `too old resource version: ${rv} (${this.compactedRV})`);
    }
    const out = new Map(this.bucket(def.plural));
    for (let i = this.history.length - 1; i >= 0 && this.history[i]!.rv > rv; i--) {
      const ev = this.history[i]!;
      if (ev.resource !== def.plural) continue;
      const key = objectKey(def.namespaced ? ev.object.metadata.namespace : undefined, String(ev.object.metadata.name));
      if (ev.type === 'ADDED') out.delete(key);
      else out.set(key, ev.prev!);
    }
    return out;
  }

  create(def: ResourceDef, input: Obj): Obj {
    const meta = { ...(input.metadata ?? {}) };
    // The real server completes generateName with five random characters.
    if ((meta.name === undefined || meta.name === '') && typeof meta['generateName'] === 'string') {
      meta.name = `${meta['generateName']}${randomUUID().replace(/-/g, '').slice(0, 5)}`;
      input = { ...input, metadata: meta };
    }
    if (typeof meta.name !== 'string' || meta.name === '')
      throw new StoreError(422, 'Invalid', 'metadata.name: Required value');
    if (def.namespaced && !meta.namespace) throw new StoreError(422, 'Invalid', 'metadata.namespace: Required value');
    const key = objectKey(def.namespaced ? meta.namespace : undefined, meta.name);
    const b = this.bucket(def.plural);
    if (b.has(key)) throw new StoreError(409, 'AlreadyExists', `${def.plural} "${meta.name}" already exists`);
    const obj = structuredClone(input);
    if (!def.namespaced) delete obj.metadata.namespace;
    obj.metadata.uid = randomUUID();
    obj.metadata.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    return this.commit(def, 'ADDED', key, obj, undefined);
  }

  /**
   * Replace an object. A non-empty metadata.resourceVersion must match the
   * stored one (optimistic concurrency, 409 Conflict). With a status
   * subresource, `part` picks what the write may change, as upstream's
   * PrepareForUpdate does.
   */
  update(def: ResourceDef, input: Obj, part: 'main' | 'status' = 'main'): Obj {
    const meta = input.metadata ?? {};
    const key = objectKey(def.namespaced ? meta.namespace : undefined, String(meta.name ?? ''));
    const old = this.bucket(def.plural).get(key);
    if (!old) throw new StoreError(404, 'NotFound', `${def.plural} "${meta.name}" not found`);
    if (meta.resourceVersion && meta.resourceVersion !== old.metadata.resourceVersion) {
      throw new StoreError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${def.plural} "${meta.name}": the object has been modified`,
      );
    }
    let obj: Obj;
    if (def.statusSubresource && part === 'status') {
      obj = { ...structuredClone(old), status: structuredClone(input.status) };
    } else {
      obj = structuredClone(input);
      if (def.statusSubresource && 'status' in old) obj.status = structuredClone(old.status);
      else if (def.statusSubresource) delete obj.status;
    }
    obj.metadata = { ...obj.metadata, uid: old.metadata.uid, creationTimestamp: old.metadata.creationTimestamp };
    if (!def.namespaced) delete obj.metadata.namespace;
    return this.commit(def, 'MODIFIED', key, obj, old);
  }

  delete(def: ResourceDef, ns: string | undefined, name: string): Obj {
    const key = objectKey(def.namespaced ? ns : undefined, name);
    const old = this.bucket(def.plural).get(key);
    if (!old) throw new StoreError(404, 'NotFound', `${def.plural} "${name}" not found`);
    return this.commit(def, 'DELETED', key, structuredClone(old), old);
  }

  private commit(def: ResourceDef, type: StoreEvent['type'], key: string, obj: Obj, prev: Obj | undefined): Obj {
    this.rv++;
    obj.metadata.resourceVersion = String(this.rv);
    const b = this.bucket(def.plural);
    if (type === 'DELETED') b.delete(key);
    else b.set(key, obj);
    const ev: StoreEvent = { type, rv: this.rv, resource: def.plural, object: obj, prev };
    this.history.push(ev);
    for (const l of [...this.listeners]) l(ev);
    return structuredClone(obj);
  }

  /** Events after `rv`, in order; throws 410 Expired if history no longer reaches back that far. */
  eventsSince(rv: number): StoreEvent[] {
    if (rv < this.compactedRV) {
      throw new StoreError(410, 'Expired', `too old resource version: ${rv} (${this.compactedRV})`);
    }
    return this.history.filter((e) => e.rv > rv);
  }

  /** Drop all history: any watch or list from an older version now gets 410 Gone. */
  compact(): void {
    this.compactedRV = this.rv;
    this.history = [];
  }

  subscribe(fn: (ev: StoreEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
}
