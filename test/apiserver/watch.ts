// One watch stream, served as the real API server's watch cache does
// (apiserver pkg/storage/cacher/cache_watcher.go):
// - resourceVersion "" or "0": synthetic ADDED for every matching object, then live events;
// - resourceVersion N: every event after N from history, then live events; if
//   history was compacted past N: a 200 reply carrying one ERROR event with a
//   410 "Expired" Status, then the stream ends;
// - with selectors, an object that starts matching arrives as ADDED, one that
//   stops matching as DELETED (its previous state with the event's rv);
// - sendInitialEvents=true (a watch-list, resourceVersionMatch=NotOlderThan):
//   ADDED for every matching object of the current state (in key order, as
//   the cache's store), then, with allowWatchBookmarks, a BOOKMARK at that
//   state's version annotated k8s.io/initial-events-end, then live events.
//   The state is the current one whatever the version asked for, so a
//   compacted version is no 410 here; a version the server has not reached
//   is an ERROR event with the 504 "Too large resource version" (the real
//   cache waits up to 3 s for it first; this one answers at once);
// - sendInitialEvents=false: no initial events; from N as above, from ""/"0" from now;
// - allowWatchBookmarks=true: BOOKMARK events every bookmark interval;
// - timeoutSeconds: the stream ends cleanly after that long.
// Events are written synchronously from the store's commit, so order is commit order.
// With `paceChunk` (TestApiServer's paceInitialEvents), a watch-list's initial
// events go out that many at a time, each batch after the socket drained or
// the event loop turned (or `paceDelayMs` passed), as the real cache streams a large state while the
// client reads it; events committed meanwhile are held and follow the
// initial-events-end BOOKMARK in commit order; the watch counts as open (and
// closeWatches() reaches it) once they are out. Without it they are written
// in one go (a 100k state then occupies the server for seconds before the
// client can read much of it).

import type { ServerResponse } from 'node:http';
import { statusBody, withKind } from './http.js';
import { INITIAL_EVENTS_END, tooLargeResourceVersion } from './listoptions.js';
import type { ResourceDef } from './resources.js';
import type { FieldSelector, LabelSelector } from './selectors.js';
import { type Obj, type Store, type StoreEvent, StoreError } from './store.js';

export interface WatchRequest {
  readonly def: ResourceDef;
  readonly namespace: string | undefined;
  readonly labels: LabelSelector;
  readonly fields: FieldSelector;
  readonly resourceVersion: string | null;
  readonly bookmarks: boolean;
  readonly timeoutSeconds: number | undefined;
  /** The request's sendInitialEvents (undefined: not asked, or not known to the server). */
  readonly sendInitialEvents?: boolean | undefined;
  /** A fault (faults.ts `expire`): after this many initial events, an ERROR 410 ends the watch. */
  readonly expireAfter?: number;
}

/** A running watch; close() ends it from the server side (abort: drop the connection, like a crash). */
export interface ServedWatch {
  close(abort: boolean): void;
}

/** The message of a watch whose version etcd compacted under it. */
const EXPIRED = 'The resourceVersion for the provided watch is too old.';

/** A watch the server accepted and ends at once with one ERROR event (as the cacher's error watcher). */
export function sendWatchError(res: ServerResponse, err: StoreError): void {
  res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
  res.end(JSON.stringify({ type: 'ERROR', object: statusBody(err.code, err.reason, err.message, err.details) }) + '\n');
}

/** Serve a watch on res; it stays in `open` until it ends, however it ends. */
export function serveWatch(
  store: Store,
  res: ServerResponse,
  w: WatchRequest,
  bookmarkIntervalMs: number,
  open: Set<ServedWatch>,
  onBookmark?: (rv: number) => void,
  paceChunk?: number,
  paceDelayMs = 0,
): void {
  const matches = (o: Obj | undefined): boolean =>
    o !== undefined &&
    (w.namespace === undefined || o.metadata.namespace === w.namespace) &&
    w.labels(o.metadata.labels) &&
    w.fields(o);
  const send = (type: string, object: unknown): void => {
    if (!res.writableEnded) res.write(JSON.stringify({ type, object }) + '\n');
  };
  const deliver = (ev: StoreEvent): void => {
    if (ev.resource !== w.def.plural) return;
    const now = ev.type !== 'DELETED' && matches(ev.object);
    const before = ev.type !== 'ADDED' && matches(ev.prev);
    if (ev.type === 'DELETED') {
      if (before) send('DELETED', withKind(w.def, ev.object));
    } else if (now && before) send('MODIFIED', withKind(w.def, ev.object));
    else if (now) send('ADDED', withKind(w.def, ev.object));
    else if (before) {
      const gone = structuredClone(ev.prev!);
      gone.metadata.resourceVersion = String(ev.rv);
      send('DELETED', withKind(w.def, gone));
    }
  };

  let backlog: StoreEvent[] = [];
  const rvParam = w.resourceVersion;
  const fromNow = rvParam === null || rvParam === '' || rvParam === '0';
  res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
  // The real server flushes the headers at once, so a client knows its watch is open before any event.
  res.flushHeaders();
  const fail = (err: StoreError): void => {
    send('ERROR', statusBody(err.code, err.reason, err.message, err.details));
    res.end();
  };
  let initial = 0;
  /** The initial events; with the expire fault, at most expireAfter of them, then the 410 (false: the watch is over). */
  const sendInitial = (): boolean => {
    for (const o of store.list(w.def, w.namespace).items) {
      if (!matches(o)) continue;
      if (initial++ === w.expireAfter) break;
      send('ADDED', withKind(w.def, o));
    }
    if (w.expireAfter === undefined) return true;
    fail(new StoreError(410, 'Expired', EXPIRED));
    return false;
  };
  if (w.sendInitialEvents !== undefined) {
    if (!fromNow && Number(rvParam) > store.resourceVersion) {
      return fail(tooLargeResourceVersion(Number(rvParam), store.resourceVersion));
    }
    if (w.sendInitialEvents) {
      if (paceChunk !== undefined && paceChunk > 0 && w.expireAfter === undefined) return paced(paceChunk);
      if (!sendInitial()) return;
      const end = { resourceVersion: String(store.resourceVersion), annotations: { [INITIAL_EVENTS_END]: 'true' } };
      if (w.bookmarks) send('BOOKMARK', { kind: w.def.kind, apiVersion: w.def.apiVersion, metadata: end });
    } else if (!fromNow) {
      if (w.expireAfter !== undefined) return fail(new StoreError(410, 'Expired', EXPIRED));
      try {
        backlog = store.eventsSince(Number(rvParam));
      } catch (err) {
        if (!(err instanceof StoreError)) throw err;
        return fail(err);
      }
    }
  } else if (fromNow) {
    if (!sendInitial()) return;
  } else {
    if (w.expireAfter !== undefined) return fail(new StoreError(410, 'Expired', EXPIRED));
    try {
      backlog = store.eventsSince(Number(rvParam));
    } catch (err) {
      if (!(err instanceof StoreError)) throw err;
      send('ERROR', statusBody(err.code, err.reason, err.message));
      res.end();
      return;
    }
  }
  goLive(backlog);

  /** The initial events `chunk` at a time (see the header); then live. */
  function paced(chunk: number): void {
    const items = store.current(w.def, w.namespace);
    const end = { resourceVersion: String(store.resourceVersion), annotations: { [INITIAL_EVENTS_END]: 'true' } };
    const held: StoreEvent[] = [];
    const unhold = store.subscribe((ev) => held.push(ev));
    res.once('close', unhold);
    let i = 0;
    const next = (): void => {
      if (res.destroyed || res.writableEnded) return void unhold();
      let drained = true;
      for (const stop = Math.min(items.length, i + chunk); i < stop; i++) {
        const o = items[i]!;
        if (matches(o)) drained = res.write(JSON.stringify({ type: 'ADDED', object: withKind(w.def, o) }) + '\n');
      }
      if (i < items.length) {
        if (!drained) return void res.once('drain', next);
        return void (paceDelayMs > 0 ? setTimeout(next, paceDelayMs) : setImmediate(next));
      }
      if (w.bookmarks) send('BOOKMARK', { kind: w.def.kind, apiVersion: w.def.apiVersion, metadata: end });
      unhold();
      res.off('close', unhold);
      goLive(held);
    };
    next();
  }

  /** Deliver the backlog, then every event as it is committed, until the watch ends. */
  function goLive(backlog: readonly StoreEvent[]): void {
    for (const ev of backlog) deliver(ev);
    const unsubscribe = store.subscribe(deliver);

    const timers: NodeJS.Timeout[] = [];
    if (w.bookmarks && bookmarkIntervalMs > 0) {
      timers.push(
        setInterval(() => {
          const rv = store.resourceVersion;
          send('BOOKMARK', {
            kind: w.def.kind,
            apiVersion: w.def.apiVersion,
            metadata: { resourceVersion: String(rv) },
          });
          onBookmark?.(rv);
        }, bookmarkIntervalMs),
      );
    }
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      unsubscribe();
      for (const t of timers) clearTimeout(t);
      if (!res.writableEnded) res.end();
      open.delete(served);
    };
    if (w.timeoutSeconds !== undefined) timers.push(setTimeout(end, w.timeoutSeconds * 1000));
    const served: ServedWatch = {
      close(abort) {
        end();
        if (abort) res.socket?.destroy();
      },
    };
    open.add(served);
    res.on('close', end);
  }
}
