// The API calls a reflector needs, behind a narrow interface so the reflector
// can be tested against a scripted fake: list (one GET of a collection page)
// and watch (a streaming GET of JSON lines). The real one is KubeClient
// (client.ts).

import { ProxyError } from '../../core/errors.js';

export type Query = Readonly<Record<string, string>>;

export interface ListResult {
  readonly resourceVersion: string;
  readonly items: readonly unknown[];
  /** metadata.continue: more pages follow (pass it back as `continue`). */
  readonly continue?: string;
}

export interface ListWatchTransport {
  /** GET a collection. Rejects with ApiStatusError on a non-2xx answer. */
  list(path: string, query: Query, signal: AbortSignal): Promise<ListResult>;
  /**
   * Stream a watch. onOpen runs once the server accepted it; onEvent runs for
   * each event in order. Resolves when the stream ends (server timeout, closed
   * connection, or signal aborted); rejects on an HTTP error or stream error.
   */
  watch(
    path: string,
    query: Query,
    onOpen: () => void,
    onEvent: (type: string, object: unknown) => void,
    signal: AbortSignal,
  ): Promise<void>;
  /**
   * Optional: resolves when a server that refused connections accepts them
   * again (or signal aborts). Reflectors race it against their backoff so
   * they resume as soon as an outage ends.
   */
  untilReachable?(signal: AbortSignal): Promise<void>;
}

/** A non-2xx answer from the API server (or an ERROR watch event), with its Status. */
export class ApiStatusError extends ProxyError {
  constructor(
    readonly statusCode: number,
    readonly reason: string,
    message: string,
    /** The server's `Retry-After` (header, or Status details.retryAfterSeconds): wait at least this long. */
    readonly retryAfterSeconds?: number,
    /** The Status's details.causes (`reason`: e.g. ResourceVersionTooLarge, FieldValueForbidden). */
    readonly causes: readonly StatusCause[] = [],
  ) {
    super('KPT_API_STATUS', message);
    this.name = 'ApiStatusError';
  }
}

/** One of a Status's details.causes. */
export interface StatusCause {
  readonly reason?: string;
  readonly message?: string;
  readonly field?: string;
}

/** A request given up because its AbortSignal fired (named as the DOM's AbortError). */
export class AbortError extends ProxyError {
  constructor(message = 'The operation was aborted') {
    super('KPT_ABORTED', message);
    this.name = 'AbortError';
  }
}

/** The Retry-After an error carries, in seconds, or undefined. */
export function retryAfterOf(err: unknown): number | undefined {
  return err instanceof ApiStatusError ? err.retryAfterSeconds : undefined;
}

/**
 * A `Retry-After` header value in seconds: delta-seconds or an HTTP date
 * (relative to nowMs). Undefined when absent or unreadable.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v);
  // An HTTP date names its month; anything else (e.g. "-1") is not one.
  const at = /[A-Za-z]{3}/.test(v) ? Date.parse(v) : Number.NaN;
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - nowMs) / 1000));
}

/**
 * A 504 saying the server has not yet reached the resourceVersion asked for
 * (its watch cache is behind: another API server of the set served the last
 * one). client-go's isTooLargeResourceVersionError: the cause
 * ResourceVersionTooLarge, or, from servers before 1.18.6, the message.
 */
export function isTooLargeResourceVersion(err: unknown): boolean {
  if (!(err instanceof ApiStatusError)) return false;
  if (err.causes.some((c) => c.reason === 'ResourceVersionTooLarge')) return true;
  if (err.statusCode !== 504) return false;
  return (
    err.causes.some((c) => c.message === 'Too large resource version') ||
    err.message.includes('Too large resource version')
  );
}

export function statusCodeOf(err: unknown): number | undefined {
  if (err instanceof ApiStatusError) return err.statusCode;
  const code = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

/**
 * Build an ApiStatusError from a metav1.Status body (or anything else the
 * server sent). retryAfterSeconds is the header's; without it the Status's
 * details.retryAfterSeconds counts (the real server sets both on a 429).
 */
export function fromStatus(httpCode: number, body: unknown, retryAfterSeconds?: number): ApiStatusError {
  const s = (body ?? {}) as { code?: unknown; reason?: unknown; message?: unknown; details?: unknown };
  const code = typeof s.code === 'number' ? s.code : httpCode;
  const details = s.details as { retryAfterSeconds?: unknown; causes?: unknown } | null | undefined;
  const detail = details?.retryAfterSeconds;
  const causes = Array.isArray(details?.causes)
    ? details.causes.filter((c): c is StatusCause => c !== null && typeof c === 'object')
    : [];
  const retry = retryAfterSeconds ?? (typeof detail === 'number' && detail > 0 ? detail : undefined);
  return new ApiStatusError(
    code,
    typeof s.reason === 'string' ? s.reason : '',
    typeof s.message === 'string' ? s.message : `HTTP ${httpCode}`,
    retry,
    causes,
  );
}
