// What the Kubernetes sources publish about their connection: the
// composition root logs these; tests record them.

export type SourceEvent =
  /** A list completed and its diff was delivered (the connection works). */
  | {
      type: 'listed';
      resource: string;
      resourceVersion: string;
      items: number;
      added: number;
      updated: number;
      deleted: number;
      /** The state came as a watch's initial events (watch-list), not a list. */
      streamed?: boolean;
    }
  /** A watch was accepted by the server and is streaming. */
  | { type: 'watching'; resource: string; resourceVersion: string }
  /** A watch ended normally (server timeout or closed connection); it is resumed. */
  | { type: 'watchClosed'; resource: string; resourceVersion: string; events: number }
  /** A list or watch failed; a backoff follows. */
  | {
      type: 'error';
      resource: string;
      phase: 'list' | 'watch';
      error: string;
      statusCode?: number;
      /** The server's Retry-After: the next attempt waits at least this long. */
      retryAfterSeconds?: number;
    }
  /** Waiting before the next attempt. */
  | { type: 'backoff'; resource: string; delayMs: number; attempt: number }
  /** A server that refused connections accepts them again: the backoff ends early. */
  | { type: 'reachable'; resource: string }
  /** The local copy was re-delivered to the handlers (configSyncPeriod). */
  | { type: 'resynced'; resource: string; items: number }
  /** The server no longer has history back to our resourceVersion (410 Gone): relisting. */
  | { type: 'expired'; resource: string; resourceVersion: string }
  /**
   * The API server has not reached our resourceVersion (504 "Too large
   * resource version": its watch cache is behind the server we saw it on):
   * the state is read again at once from "", a consistent read.
   */
  | { type: 'behind'; resource: string; resourceVersion: string }
  /** The server would not stream the state (watch-list): listing it instead, at once. */
  | { type: 'watchListUnavailable'; resource: string; error: string; statusCode?: number }
  /** The server does not serve this optional resource (404); carrying on without it. */
  | { type: 'unavailable'; resource: string }
  /** An item the server sent was not an object with metadata; it was skipped. */
  | { type: 'skipped'; resource: string; reason: string }
  /** A handler threw; the event was skipped. */
  | { type: 'handlerError'; resource: string; error: string }
  /** The source stopped (shutdown). */
  | { type: 'stopped'; resource: string };

/** A suggested log level per event: failures warn, state changes inform, the rest is debug. */
export function sourceEventLevel(ev: SourceEvent): 'debug' | 'info' | 'warn' | 'error' {
  switch (ev.type) {
    case 'error':
    case 'skipped':
      return 'warn';
    case 'handlerError':
      return 'error';
    case 'listed':
    case 'reachable':
    case 'expired':
    case 'behind':
    case 'watchListUnavailable':
    case 'unavailable':
    case 'stopped':
      return 'info';
    case 'watching':
    case 'watchClosed':
    case 'backoff':
    case 'resynced':
      return 'debug';
  }
}
