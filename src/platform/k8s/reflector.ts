// A reflector (client-go tools/cache/reflector.go, reduced): list a
// collection, then watch it from the list's resourceVersion, and keep a local
// copy of what the server holds. Contracts:
// - The sink sees changes, never states: a (re)list is delivered as the DIFF
//   against the local copy (add / update / delete), never as delete-all + add;
//   an unchanged object (same resourceVersion) produces no call.
// - synced() is called after each complete list, never from a half list.
//   A complete state reaches the handlers REPLACE_CHUNK objects per turn of
//   the event loop; nothing else is delivered until it is all there (with
//   firstStateAsItComes, the very first watch-list's objects also as they come).
// - A watch that ends is resumed from the last resourceVersion seen (events
//   and BOOKMARKs); a 410 Gone (HTTP or ERROR event) makes it relist.
// - Lists ask what client-go's reflector asks (tools/cache/reflector.go,
//   relistResourceVersion), because a relist by every node at once is the
//   API server's worst moment:
//     the first list:        resourceVersion=0 (served by the watch cache,
//                            which ignores `limit`: one reply),
//     a relist after a 410:  resourceVersion=<last seen>, no `limit` (served
//                            by the watch cache as "not older than", one reply),
//     if that list gets 410: resourceVersion="" (a consistent read), paginated,
//   `limit` 500 and `continue` as client-go's pager. A first list that came
//   back paginated says the server has no watch cache: later lists keep
//   pages. A continue token that expired (410) restarts the list. Each object
//   is transformed (transform.ts) as it arrives, so a 10k list never sits in
//   memory as raw JSON.
// - Failures back off exponentially with jitter (backoff.ts; injected clock and random);
//   a connection-level outage ends the wait early when the transport reports
//   the server reachable again. A server that answered with Retry-After is
//   waited for at least that long (capped at MAX_RETRY_AFTER_MS), and the
//   reachability shortcut does not apply then. While the server is away the
//   local copy stays as it was: nothing is deleted. A watch the server
//   answered ends the count: a second outage right after the first starts
//   from the first step again (except after a very short watch, below).
// - With resyncMs, every object of the local copy is re-delivered as
//   update(obj, obj) that often (client-go's resync; configSyncPeriod).
// - With `keep`, the local copy holds only what keep() returns of each
//   object (enough to tell versions apart and to name what is deleted), and
//   the sink gets that form as the old object of update() and delete() after
//   a relist: a consumer that keeps its own copy of the rest (the
//   EndpointSliceCache) does not pay for two. Such a copy cannot be
//   re-delivered, so `keep` and resyncMs do not go together.
// - A watch that outlives its timeoutSeconds plus a grace period is treated
//   as stalled (a dead peer without FIN) and is reconnected.
// - With `optional`, a 404 for the resource (an older server) ends the
//   reflector quietly instead of retrying forever.
// - With `watchList` (client-go's WatchListClient, on by default since
//   1.35), the state comes as the first events of a watch instead of a list
//   (reflector.go watchList): sendInitialEvents=true,
//   resourceVersionMatch=NotOlderThan, allowWatchBookmarks=true, from the last
//   resourceVersion seen ("" at first and after a 410: a consistent read).
//   The objects up to the BOOKMARK annotated k8s.io/initial-events-end are
//   kept apart and delivered as one diff, exactly as a list's; the same
//   stream then goes on as the watch. A 410 or a 504 "Too large resource
//   version" during the initial events starts over at once from "";
//   connection failures and 429 back off and try again; any other refusal
//   (a server without the feature answers 422 Invalid) falls back to a list
//   at once, as client-go does, and the next relist tries the stream again.
// - A 504 "Too large resource version" on a list (the watch cache of the API
//   server we reached is behind the version we saw on another) lists again
//   at once from "", as client-go does, instead of backing off.

import type { Clock } from '../../core/clock.js';
import { BugError } from '../../core/errors.js';
import type { SourceEvent } from './events.js';
import { loopTurn } from '../slices.js';
import { Backoff, type BackoffOptions } from './backoff.js';
import {
  type ListWatchTransport,
  type Query,
  fromStatus,
  isTooLargeResourceVersion,
  retryAfterOf,
  statusCodeOf,
} from './transport.js';

export interface K8sObject {
  metadata: { name?: string; namespace?: string; resourceVersion?: string };
}

export interface ReflectorSink<T> {
  add(obj: T): void;
  update(oldObj: T, obj: T): void;
  delete(obj: T): void;
  synced(): void;
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
  /** Keep only what the proxy reads of each object (transform.ts); default: keep all. */
  readonly transform?: (obj: Record<string, unknown>) => Record<string, unknown>;
  /** Objects per list page; default 500. */
  readonly pageSize?: number;
  /** Re-deliver the local copy as updates this often; 0 or unset = never. Not with `keep`. */
  readonly resyncMs?: number;
  /**
   * What the local copy keeps of each object once the sink has it (default:
   * all of it). Must keep metadata.name, namespace and resourceVersion.
   */
  readonly keep?: (obj: T) => T;
  /** Random source for the backoff jitter; default Math.random. */
  readonly random?: () => number;
  /** Get the state as a watch's initial events where the server offers it (client-go's WatchListClient); default off. */
  readonly watchList?: boolean;
  /**
   * The very first state of a watch-list (the local copy empty, never
   * synced) reaches the sink as it arrives, each object as an add, instead of
   * at the end bookmark; synced() still waits for the end, where the state is
   * delivered as the usual diff (which then finds those objects unchanged,
   * and deletes what a stream started over no longer had). For the proxy's
   * early syncs (src/engine/earlystart.ts). Relists keep the whole-state diff.
   */
  readonly firstStateAsItComes?: boolean;
}

/**
 * The outcome of one watch: resume it, relist, or back off and resume; for
 * a watch-list, 'fallback' (the server will not stream the state: list it)
 * or 'absent' (an optional resource the server does not serve).
 */
type WatchOutcome = 'resume' | 'relist' | 'error' | 'fallback' | 'absent';

/** The annotation of the BOOKMARK that ends a watch-list's initial events (metav1.InitialEventsAnnotationKey). */
export const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

const STALL_GRACE_MS = 30_000;
/** A watch that ends without events sooner than this is a failure (client-go's watchHandler: 1 s). */
const VERY_SHORT_WATCH_MS = 1000;
const DEFAULT_PAGE_SIZE = 500;
/** Objects of a (re)list handed to the handlers between two turns of the event loop. */
const REPLACE_CHUNK = 250;

export function objectKey(o: K8sObject): string {
  const m = o.metadata ?? {};
  return m.namespace ? `${m.namespace}/${m.name ?? ''}` : (m.name ?? '');
}

export class Reflector<T extends K8sObject> {
  private readonly items = new Map<string, T>();
  private rv = '';
  private readonly retry: Backoff;
  private relisting = false;
  /**
   * Objects of the state being streamed that reached the sink before its end (counted as added). Kept
   * when that stream breaks: the state that completes next finds them in the local copy (unchanged, so
   * not counted again), and its `listed` event still reports them as added since the last one.
   */
  private deliveredEarly = 0;
  /** The last list's version was refused (410): list from "" (a consistent read) next. */
  private rvUnavailable = false;
  /** A list from "0" came back in pages: the server has no watch cache, keep paginating. */
  private paginatedResult = false;
  /** A list has completed at least once (resync waits for it). */
  private synced = false;
  /** Complete states delivered (lists and watch-lists). */
  private replaced = 0;

  constructor(private readonly o: ReflectorOptions<T>) {
    if (o.keep && (o.resyncMs ?? 0) > 0) throw new BugError(`reflector ${o.resource}: keep and resyncMs together`);
    this.retry = new Backoff(o.backoff, o.clock, o.random);
  }

  /** One object of the first state, to the sink before the state is complete (firstStateAsItComes). */
  private deliverEarly(obj: T): void {
    if (this.deliver(obj, objectKey(obj)) === 'added') this.deliveredEarly++;
  }

  /** Into the local copy and to the sink, unless the copy holds this version already (then nothing). */
  private deliver(obj: T, key: string): 'added' | 'updated' | null {
    const old = this.items.get(key);
    if (old && old.metadata.resourceVersion === obj.metadata.resourceVersion) return null;
    this.items.set(key, this.kept(obj));
    if (old) this.call(() => this.o.sink.update(old, obj));
    else this.call(() => this.o.sink.add(obj));
    return old ? 'updated' : 'added';
  }

  /** The form the local copy holds of an object the sink was given. */
  private kept(obj: T): T {
    return this.o.keep ? this.o.keep(obj) : obj;
  }

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
    const resync = this.startResync(signal);
    try {
      await this.loop(signal);
    } finally {
      resync.cancel();
    }
    this.emit({ type: 'stopped', resource: this.o.resource });
  }

  private async loop(signal: AbortSignal): Promise<void> {
    let needList = true;
    while (!signal.aborted) {
      if (needList && this.o.watchList) {
        const before = this.replaced;
        const outcome = await this.watch(signal, true);
        if (outcome === 'absent') {
          this.emit({ type: 'unavailable', resource: this.o.resource });
          return;
        }
        if (outcome !== 'fallback') {
          // The state came with the stream (which then ran as the watch), or try the stream again.
          needList = outcome === 'relist' || this.replaced === before;
          if (outcome === 'error') await this.backoff(signal);
          continue;
        }
      }
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
          this.failed('list', err);
          await this.backoff(signal);
          continue;
        }
      }
      const outcome = await this.watch(signal);
      if (outcome === 'relist') needList = true;
      else if (outcome === 'error') await this.backoff(signal);
    }
  }

  /** client-go resync: re-deliver every object as an update to itself, never during a list. */
  private startResync(signal: AbortSignal): { cancel(): void } {
    const period = this.o.resyncMs ?? 0;
    let timer: { cancel(): void } | null = null;
    const tick = (): void => {
      if (signal.aborted) return;
      if (!this.relisting && this.synced) {
        for (const obj of this.items.values()) this.call(() => this.o.sink.update(obj, obj));
        this.emit({ type: 'resynced', resource: this.o.resource, items: this.items.size });
      }
      timer = this.o.clock.setTimer(period, tick);
    };
    if (period > 0) timer = this.o.clock.setTimer(period, tick);
    return { cancel: () => timer?.cancel() };
  }

  private query(extra: Record<string, string>): Query {
    const q: Record<string, string> = { ...extra };
    if (this.o.labelSelector) q.labelSelector = this.o.labelSelector;
    if (this.o.fieldSelector) q.fieldSelector = this.o.fieldSelector;
    return q;
  }

  /** List and deliver the diff against the local copy, then synced(). */
  private async list(signal: AbortSignal): Promise<void> {
    const res = await this.listPages(signal);
    if (!res || signal.aborted) return;
    await this.replace(res.items, res.resourceVersion, false);
  }

  /**
   * Deliver a complete state (a list's, or a watch-list's initial events) as
   * the diff against the local copy, then synced(). Every REPLACE_CHUNK
   * objects the event loop gets a turn: handing 10k objects to the handlers
   * in one go would hold it for hundreds of milliseconds (/healthz and
   * /metrics unanswered meanwhile). Nothing else changes the local copy
   * until it is done (a list is not watched yet; a watch-list's later
   * events wait, see watch()).
   */
  private async replace(fresh: Map<string, T>, resourceVersion: string, streamed: boolean): Promise<void> {
    let added = 0,
      updated = 0,
      deleted = 0,
      seen = 0;
    this.relisting = true;
    try {
      for (const [key, obj] of fresh) {
        if (++seen % REPLACE_CHUNK === 0) await loopTurn();
        // Unchanged: keep the object the handlers already hold; the fresh copy is garbage.
        const r = this.deliver(obj, key);
        if (r === 'added') added++;
        else if (r === 'updated') updated++;
      }
      for (const [key, old] of [...this.items]) {
        if (fresh.has(key)) continue;
        if (++seen % REPLACE_CHUNK === 0) await loopTurn();
        this.items.delete(key);
        deleted++;
        this.call(() => this.o.sink.delete(old));
      }
    } finally {
      this.relisting = false;
    }
    added += this.deliveredEarly;
    this.deliveredEarly = 0;
    this.rv = resourceVersion;
    this.rvUnavailable = false;
    this.retry.succeeded();
    this.synced = true;
    this.replaced++;
    this.emit({
      type: 'listed',
      resource: this.o.resource,
      resourceVersion: this.rv,
      items: fresh.size,
      added,
      updated,
      deleted,
      ...(streamed ? { streamed: true } : {}),
    });
    this.call(() => this.o.sink.synced());
  }

  /**
   * Fetch every page into a fresh map of transformed objects, from the
   * resourceVersion client-go would ask for. A 410 on the first request
   * (that version is gone) lists again at once from "" (a consistent read);
   * one on a continue token (the snapshot was compacted meanwhile) starts over.
   */
  private async listPages(signal: AbortSignal): Promise<{ resourceVersion: string; items: Map<string, T> } | null> {
    for (;;) {
      const fromRV = this.rvUnavailable ? '' : this.rv === '' ? '0' : this.rv;
      // From a version the watch cache can serve ("not older than"), no pages:
      // with a limit the server would read that exact version from etcd.
      const paged = fromRV === '' || fromRV === '0' || this.paginatedResult;
      const limit = String(this.o.pageSize ?? DEFAULT_PAGE_SIZE);
      const fresh = new Map<string, T>();
      let cont: string | undefined;
      let rv = '';
      try {
        do {
          // The server refuses a resourceVersion beside a continue token: the token carries it.
          const q: Record<string, string> = cont
            ? { limit, continue: cont }
            : { resourceVersion: fromRV, ...(paged ? { limit } : {}) };
          const page = await this.o.transport.list(this.o.path, this.query(q), signal);
          if (signal.aborted) return null;
          if (!cont) rv = page.resourceVersion;
          for (const item of page.items) {
            const obj = this.accept(item, 'list item');
            if (obj) fresh.set(objectKey(obj), obj);
          }
          if (fromRV === '0' && !cont && page.continue) this.paginatedResult = true;
          cont = page.continue;
        } while (cont);
      } catch (err) {
        if (statusCodeOf(err) === 410 && (cont || fromRV !== '')) {
          this.emit({ type: 'expired', resource: this.o.resource, resourceVersion: cont ? rv : fromRV });
          if (!cont) this.rvUnavailable = true;
          continue;
        }
        // The server we reached is behind the version we saw (client-go: list from "" at once).
        if (isTooLargeResourceVersion(err) && !cont && fromRV !== '') {
          this.emit({ type: 'behind', resource: this.o.resource, resourceVersion: fromRV });
          this.rvUnavailable = true;
          continue;
        }
        throw err;
      }
      this.rvUnavailable = false;
      return { resourceVersion: rv, items: fresh };
    }
  }

  /** An object as the sink will see it (transformed), or null when it is not an object with metadata. */
  private accept(item: unknown, what: string): T | null {
    if (!isObject(item)) {
      this.emit({ type: 'skipped', resource: this.o.resource, reason: `${what} is not an object with metadata` });
      return null;
    }
    return (this.o.transform ? this.o.transform(item as unknown as Record<string, unknown>) : item) as T;
  }

  /**
   * One watch from this.rv until it ends; events go to the sink as they
   * come. With initial (a watch-list), the events up to the end bookmark are
   * the state, delivered as one diff; the stream then goes on as the watch.
   */
  private async watch(signal: AbortSignal, initial = false): Promise<WatchOutcome> {
    // Aborted during the list: the listener below would never fire, and the watch would outlive run().
    if (signal.aborted) return 'resume';
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
    let opened = false;
    const startedAt = this.o.clock.monotonic();
    // A watch-list's state until its end bookmark, kept apart (client-go's temporary store).
    let fresh: Map<string, T> | undefined = initial ? new Map() : undefined;
    // The first state ever: each object goes to the sink as it comes as well (firstStateAsItComes).
    const asItComes =
      initial && this.o.firstStateAsItComes === true && !this.synced && this.items.size === 0
        ? (o: T): void => this.deliverEarly(o)
        : undefined;
    // While that state is being delivered (in chunks), the events after the
    // bookmark wait here, in order; undefined when none is being delivered.
    let held: Array<[string, unknown]> | undefined;
    let delivering: Promise<void> | undefined;
    const query = this.query({
      watch: 'true',
      ...(initial ? { sendInitialEvents: 'true', resourceVersionMatch: 'NotOlderThan' } : {}),
      resourceVersion: initial && this.rvUnavailable ? '' : this.rv,
      allowWatchBookmarks: 'true',
      timeoutSeconds: String(this.o.watchTimeoutSeconds),
    });
    const watching = (): void => this.emit({ type: 'watching', resource: this.o.resource, resourceVersion: this.rv });
    try {
      await this.o.transport.watch(
        this.o.path,
        query,
        () => {
          opened = true;
          this.retry.answered();
          if (!fresh) watching();
        },
        (type, obj) => {
          if (outcome) return;
          events++;
          if (held) held.push([type, obj]);
          else if (!fresh) outcome = this.onWatchEvent(type, obj);
          else {
            const state = this.onInitialEvent(fresh, type, obj, (o) => (outcome = o), asItComes);
            if (state) {
              fresh = undefined;
              const pending: Array<[string, unknown]> = (held = []);
              delivering = this.replace(state.items, state.resourceVersion, true).then(() => {
                held = undefined;
                watching();
                for (const [t, o] of pending) {
                  if (outcome) break;
                  outcome = this.onWatchEvent(t, o);
                }
                if (outcome) local.abort();
              });
            }
          }
          if (outcome) local.abort();
        },
        local.signal,
      );
    } catch (err) {
      if (signal.aborted) {
        // Shutting down: nothing to report.
      } else if (fresh) outcome = this.initialFailed(err);
      else if (statusCodeOf(err) === 410) outcome = this.expired();
      else {
        this.failed('watch', err);
        outcome = 'error';
      }
    } finally {
      watchdog.cancel();
      signal.removeEventListener('abort', stop);
    }
    // The state and the events after it are delivered before the watch is over.
    await delivering;
    if (signal.aborted) return 'resume';
    const short = events === 0 && this.o.clock.monotonic() - startedAt < VERY_SHORT_WATCH_MS;
    this.retry.watchEnded(opened, short);
    if (stalled && !outcome) {
      this.emit({ type: 'error', resource: this.o.resource, phase: 'watch', error: 'watch stalled past its timeout' });
      return 'error';
    }
    if (outcome) return outcome;
    this.emit({ type: 'watchClosed', resource: this.o.resource, resourceVersion: this.rv, events });
    if (fresh) {
      // Ended before its initial events did. Without any event within a second
      // it is client-go's "very short watch", an error that falls back to a list.
      if (short) return this.fallback(undefined, 'the watch-list ended at once without any event');
      this.emit({
        type: 'error',
        resource: this.o.resource,
        phase: 'watch',
        error: 'the watch-list ended before its initial events were complete',
      });
      return 'error';
    }
    // A watch that closed within a second without a single event counts as a
    // failure, so a server that accepts and drops watches cannot make us spin
    // (client-go's "very short watch"). A longer quiet one (bookmarks off, a
    // server ending its watches at shutdown) is resumed at once, as client-go does.
    if (short) return 'error';
    this.retry.succeeded();
    return 'resume';
  }

  /**
   * One event of a watch-list's initial state: objects go into fresh, an
   * ERROR ends the watch (end(outcome)). At the end bookmark, the complete
   * state and its version, for the caller to deliver as one diff.
   */
  private onInitialEvent(
    fresh: Map<string, T>,
    type: string,
    obj: unknown,
    end: (o: WatchOutcome) => void,
    asItComes?: (o: T) => void,
  ): { items: Map<string, T>; resourceVersion: string } | undefined {
    if (type === 'ERROR') {
      end(this.initialFailed(fromStatus(500, obj)));
      return undefined;
    }
    if (type === 'BOOKMARK') {
      const meta = isObject(obj) ? (obj.metadata as { resourceVersion?: string; annotations?: unknown }) : undefined;
      const annotations = meta?.annotations as Record<string, unknown> | undefined;
      if (annotations?.[INITIAL_EVENTS_END] !== 'true') return undefined;
      return { items: fresh, resourceVersion: meta?.resourceVersion ?? '' };
    }
    const o = this.accept(obj, `${type} event object`);
    if (!o) return undefined;
    if (type === 'ADDED' || type === 'MODIFIED') {
      fresh.set(objectKey(o), o);
      asItComes?.(o);
    } else if (type === 'DELETED') fresh.delete(objectKey(o));
    else this.unknownEventType(type);
    return undefined;
  }

  /**
   * A watch-list refused or broken before its state was complete, as
   * client-go's watchList sorts it: the version is gone or ahead of the
   * server (410, 504 "Too large resource version"): again at once from "";
   * the server unreachable or overloaded (a connection failure, 429): back
   * off and try again; anything else (422 Invalid from a server without the
   * feature, 5xx): list instead, at once.
   */
  private initialFailed(err: unknown): WatchOutcome {
    const code = statusCodeOf(err);
    if (code === 410 || isTooLargeResourceVersion(err)) {
      const fromScratch = this.rvUnavailable || this.rv === '';
      this.emit({
        type: code === 410 ? 'expired' : 'behind',
        resource: this.o.resource,
        resourceVersion: fromScratch ? '' : this.rv,
      });
      this.rvUnavailable = true;
      // Already asked from "" (client-go would ask again at once): a server
      // answering that so is not caught up, and is not asked in a tight loop.
      if (fromScratch) {
        this.failed('watch', err);
        return 'error';
      }
      return 'relist';
    }
    if (code === undefined || code === 429) {
      this.failed('watch', err);
      return 'error';
    }
    // The resource is not served at all: a list would get the same 404.
    if (code === 404 && this.o.optional) return 'absent';
    return this.fallback(err, errText(err));
  }

  private fallback(err: unknown, error: string): WatchOutcome {
    const statusCode = statusCodeOf(err);
    this.emit({
      type: 'watchListUnavailable',
      resource: this.o.resource,
      error,
      ...(statusCode === undefined ? {} : { statusCode }),
    });
    return 'fallback';
  }

  /** Apply one watch event; returns an outcome if the watch must end. */
  private onWatchEvent(type: string, obj: unknown): WatchOutcome | undefined {
    if (type === 'ERROR') {
      const err = fromStatus(500, obj);
      if (err.statusCode === 410) return this.expired();
      this.failed('watch', err);
      return 'error';
    }
    if (type === 'BOOKMARK') {
      const rv = isObject(obj) ? obj.metadata.resourceVersion : undefined;
      if (rv) this.rv = rv;
      return undefined;
    }
    const o = this.accept(obj, `${type} event object`);
    if (!o) return undefined;
    const rv = o.metadata.resourceVersion;
    const key = objectKey(o);
    const old = this.items.get(key);
    if (type === 'ADDED' || type === 'MODIFIED') {
      this.items.set(key, this.kept(o));
      this.call(() => (old ? this.o.sink.update(old, o) : this.o.sink.add(o)));
    } else if (type === 'DELETED') {
      if (old) {
        this.items.delete(key);
        this.call(() => this.o.sink.delete(o));
      }
    } else {
      this.unknownEventType(type);
      return undefined;
    }
    if (rv) this.rv = rv;
    return undefined;
  }

  private unknownEventType(type: string): void {
    this.emit({ type: 'error', resource: this.o.resource, phase: 'watch', error: `unknown watch event type ${type}` });
  }

  /** Report a failed list or watch and remember its Retry-After for the backoff that follows. */
  private failed(phase: 'list' | 'watch', err: unknown): void {
    const retryAfter = retryAfterOf(err);
    this.retry.failed(retryAfter);
    this.emit({
      type: 'error',
      resource: this.o.resource,
      phase,
      error: errText(err),
      statusCode: statusCodeOf(err),
      ...(retryAfter === undefined ? {} : { retryAfterSeconds: retryAfter }),
    });
  }

  private expired(): WatchOutcome {
    this.emit({ type: 'expired', resource: this.o.resource, resourceVersion: this.rv });
    return 'relist';
  }

  /**
   * Wait the next backoff step, or less: until aborted, or until the
   * transport reports that a server which refused connections accepts them again.
   */
  private backoff(signal: AbortSignal): Promise<void> {
    const { delayMs, attempt, serverAsked } = this.retry.next();
    this.emit({ type: 'backoff', resource: this.o.resource, delayMs, attempt });
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const local = new AbortController();
      const done = (): void => {
        timer.cancel();
        signal.removeEventListener('abort', done);
        local.abort();
        resolve();
      };
      const timer = this.o.clock.setTimer(delayMs, done);
      signal.addEventListener('abort', done);
      // The server answered and asked us to wait: do not cut that short.
      if (serverAsked) return;
      this.o.transport.untilReachable?.(local.signal).then(() => {
        if (local.signal.aborted) return;
        this.emit({ type: 'reachable', resource: this.o.resource });
        done();
      }, done);
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
