// A reflector (client-go tools/cache/reflector.go, reduced): list a
// collection, then watch it from the list's resourceVersion, and keep a local
// copy of what the server holds. Contracts:
// - The sink sees changes, never states: a (re)list is delivered as the DIFF
//   against the local copy (add / update / delete), never as delete-all + add;
//   an unchanged object (same resourceVersion) produces no call.
// - synced() is called after each complete list, never from a half list.
// - A watch that ends is resumed from the last resourceVersion seen (events
//   and BOOKMARKs); a 410 Gone (HTTP or ERROR event) makes it relist.
// - Failures back off exponentially (injected clock); while the server is
//   away the local copy stays as it was: nothing is deleted.
// - A watch that outlives its timeoutSeconds plus a grace period is treated
//   as stalled (a dead peer without FIN) and is reconnected.
// - With `optional`, a 404 for the resource (an older server) ends the
//   reflector quietly instead of retrying forever.

import type { Clock } from '../../engine/clock.js';
import type { SourceEvent } from './events.js';
import { type ListWatchTransport, type Query, fromStatus, statusCodeOf } from './transport.js';

export interface K8sObject {
  metadata: { name?: string; namespace?: string; resourceVersion?: string };
}

export interface ReflectorSink<T> {
  add(obj: T): void;
  update(oldObj: T, obj: T): void;
  delete(obj: T): void;
  synced(): void;
}

export interface BackoffOptions {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly factor?: number;
}

export interface ReflectorOptions<T> {
  /** Short name for events, e.g. "services". */
  readonly resource: string;
  /** Collection path, e.g. /api/v1/services. */
  readonly path: string;
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  readonly optional?: boolean;
  readonly transport: ListWatchTransport;
  readonly clock: Clock;
  readonly backoff: BackoffOptions;
  /** Server-side watch timeout (seconds); the watch is then resumed. */
  readonly watchTimeoutSeconds: number;
  readonly sink: ReflectorSink<T>;
  readonly onEvent?: (ev: SourceEvent) => void;
}

/** The outcome of one watch: resume it, relist, or back off and resume. */
type WatchOutcome = 'resume' | 'relist' | 'error';

const STALL_GRACE_MS = 30_000;

export function objectKey(o: K8sObject): string {
  const m = o.metadata ?? {};
  return m.namespace ? `${m.namespace}/${m.name ?? ''}` : (m.name ?? '');
}

export class Reflector<T extends K8sObject> {
  private readonly items = new Map<string, T>();
  private rv = '';
  private failures = 0;
  private relisting = false;

  constructor(private readonly o: ReflectorOptions<T>) {}

  /** The local copy, in key order. */
  snapshot(): T[] {
    return [...this.items.keys()].sort().map((k) => this.items.get(k)!);
  }
  /** True while a list's diff is being delivered (before its synced()). */
  get listing(): boolean {
    return this.relisting;
  }
  get resourceVersion(): string {
    return this.rv;
  }

  /** Run until signal aborts (or, when optional, the server lacks the resource). */
  async run(signal: AbortSignal): Promise<void> {
    let needList = true;
    while (!signal.aborted) {
      if (needList) {
        try {
          await this.list(signal);
          needList = false;
        } catch (err) {
          if (signal.aborted) break;
          if (this.o.optional && statusCodeOf(err) === 404) {
            this.emit({ type: 'unavailable', resource: this.o.resource });
            return;
          }
          this.emit({
            type: 'error',
            resource: this.o.resource,
            phase: 'list',
            error: errText(err),
            statusCode: statusCodeOf(err),
          });
          await this.backoff(signal);
          continue;
        }
      }
      const outcome = await this.watch(signal);
      if (outcome === 'relist') needList = true;
      else if (outcome === 'error') await this.backoff(signal);
    }
    this.emit({ type: 'stopped', resource: this.o.resource });
  }

  private query(extra: Record<string, string>): Query {
    const q: Record<string, string> = { ...extra };
    if (this.o.labelSelector) q.labelSelector = this.o.labelSelector;
    if (this.o.fieldSelector) q.fieldSelector = this.o.fieldSelector;
    return q;
  }

  /** List and deliver the diff against the local copy, then synced(). */
  private async list(signal: AbortSignal): Promise<void> {
    const res = await this.o.transport.list(this.o.path, this.query({}), signal);
    if (signal.aborted) return;
    const fresh = new Map<string, T>();
    for (const item of res.items) {
      if (!isObject(item)) {
        this.emit({ type: 'skipped', resource: this.o.resource, reason: 'list item is not an object with metadata' });
        continue;
      }
      fresh.set(objectKey(item as T), item as T);
    }
    let added = 0,
      updated = 0,
      deleted = 0;
    this.relisting = true;
    try {
      for (const [key, obj] of fresh) {
        const old = this.items.get(key);
        this.items.set(key, obj);
        if (!old) {
          added++;
          this.call(() => this.o.sink.add(obj));
        } else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) {
          updated++;
          this.call(() => this.o.sink.update(old, obj));
        }
      }
      for (const [key, old] of [...this.items]) {
        if (fresh.has(key)) continue;
        this.items.delete(key);
        deleted++;
        this.call(() => this.o.sink.delete(old));
      }
    } finally {
      this.relisting = false;
    }
    this.rv = res.resourceVersion;
    this.failures = 0;
    this.emit({
      type: 'listed',
      resource: this.o.resource,
      resourceVersion: this.rv,
      items: fresh.size,
      added,
      updated,
      deleted,
    });
    this.call(() => this.o.sink.synced());
  }

  /** One watch from this.rv until it ends; events go to the sink as they come. */
  private async watch(signal: AbortSignal): Promise<WatchOutcome> {
    const local = new AbortController();
    const stop = (): void => local.abort();
    signal.addEventListener('abort', stop);
    let stalled = false;
    const watchdog = this.o.clock.setTimer(this.o.watchTimeoutSeconds * 1000 + STALL_GRACE_MS, () => {
      stalled = true;
      local.abort();
    });
    let outcome: WatchOutcome | undefined;
    let events = 0;
    const query = this.query({
      watch: 'true',
      resourceVersion: this.rv,
      allowWatchBookmarks: 'true',
      timeoutSeconds: String(this.o.watchTimeoutSeconds),
    });
    try {
      await this.o.transport.watch(
        this.o.path,
        query,
        () => this.emit({ type: 'watching', resource: this.o.resource, resourceVersion: this.rv }),
        (type, obj) => {
          if (outcome) return;
          events++;
          outcome = this.onWatchEvent(type, obj);
          if (outcome) local.abort();
        },
        local.signal,
      );
    } catch (err) {
      if (statusCodeOf(err) === 410) outcome = this.expired();
      else if (!signal.aborted) {
        this.emit({
          type: 'error',
          resource: this.o.resource,
          phase: 'watch',
          error: errText(err),
          statusCode: statusCodeOf(err),
        });
        outcome = 'error';
      }
    } finally {
      watchdog.cancel();
      signal.removeEventListener('abort', stop);
    }
    if (signal.aborted) return 'resume';
    if (stalled && !outcome) {
      this.emit({ type: 'error', resource: this.o.resource, phase: 'watch', error: 'watch stalled past its timeout' });
      return 'error';
    }
    if (outcome) return outcome;
    this.emit({ type: 'watchClosed', resource: this.o.resource, resourceVersion: this.rv, events });
    // A watch that closed without a single event counts as a failure, so a
    // server that accepts and drops watches cannot make us spin.
    if (events === 0) return 'error';
    this.failures = 0;
    return 'resume';
  }

  /** Apply one watch event; returns an outcome if the watch must end. */
  private onWatchEvent(type: string, obj: unknown): WatchOutcome | undefined {
    if (type === 'ERROR') {
      const err = fromStatus(500, obj);
      if (err.statusCode === 410) return this.expired();
      this.emit({
        type: 'error',
        resource: this.o.resource,
        phase: 'watch',
        error: err.message,
        statusCode: err.statusCode,
      });
      return 'error';
    }
    if (!isObject(obj)) {
      this.emit({
        type: 'skipped',
        resource: this.o.resource,
        reason: `${type} event without an object with metadata`,
      });
      return undefined;
    }
    const o = obj as T;
    const rv = o.metadata.resourceVersion;
    if (type === 'BOOKMARK') {
      if (rv) this.rv = rv;
      return undefined;
    }
    const key = objectKey(o);
    const old = this.items.get(key);
    if (type === 'ADDED' || type === 'MODIFIED') {
      this.items.set(key, o);
      this.call(() => (old ? this.o.sink.update(old, o) : this.o.sink.add(o)));
    } else if (type === 'DELETED') {
      if (old) {
        this.items.delete(key);
        this.call(() => this.o.sink.delete(o));
      }
    } else {
      this.emit({
        type: 'error',
        resource: this.o.resource,
        phase: 'watch',
        error: `unknown watch event type ${type}`,
      });
      return undefined;
    }
    if (rv) this.rv = rv;
    return undefined;
  }

  private expired(): WatchOutcome {
    this.emit({ type: 'expired', resource: this.o.resource, resourceVersion: this.rv });
    return 'relist';
  }

  /** Wait the next backoff step (or until aborted). */
  private backoff(signal: AbortSignal): Promise<void> {
    const { initialMs, maxMs, factor = 2 } = this.o.backoff;
    const delayMs = Math.min(maxMs, initialMs * factor ** this.failures);
    this.failures++;
    this.emit({ type: 'backoff', resource: this.o.resource, delayMs, attempt: this.failures });
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const done = (): void => {
        timer.cancel();
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = this.o.clock.setTimer(delayMs, done);
      signal.addEventListener('abort', done);
    });
  }

  /** Handlers must not throw; if one does, report it and go on with the next event. */
  private call(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.emit({ type: 'handlerError', resource: this.o.resource, error: errText(err) });
    }
  }

  private emit(ev: SourceEvent): void {
    try {
      this.o.onEvent?.(ev);
    } catch {
      // An observer failure must not break the watch.
    }
  }
}

function isObject(v: unknown): v is K8sObject {
  return (
    v !== null &&
    typeof v === 'object' &&
    typeof (v as K8sObject).metadata === 'object' &&
    (v as K8sObject).metadata !== null
  );
}

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
