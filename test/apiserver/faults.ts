// Misbehaviour on demand, for tests of how a client copes with a sick API
// server. A fault matches requests by verb and resource and applies to the
// next `times` of them (default: every one until cleared). What each kind
// does, and what the real server does that it imitates:
//   status - answer with `code` and a metav1.Status body; with
//            retryAfterSeconds, the `Retry-After` header and
//            details.retryAfterSeconds, as the real server's 429 from API
//            Priority and Fairness (and its 503s) carry them;
//   stall  - a list answers 200 and writes the first part of its body, then
//            nothing more until the client gives up (a server wedged
//            mid-reply: the connection stays alive, so only a client-side
//            deadline ends it); a watch answers 200 and never sends an event;
//   delay  - wait delayMs, then serve the request normally (a slow server);
//   hangup - close the connection without a reply (a proxy or server that
//            closed a kept-alive connection just as the client reused it);
//   expire - a watch answers 200, sends `afterEvents` of its initial events
//            (a watch-list's; a watch from N sends none), then an ERROR event
//            with a 410 Expired Status and ends (a watch served from etcd whose version was compacted
//            meanwhile, or a watch cache re-initialised under it);
//   behind - the API server reached has not caught up with the version
//            asked for (another server of the set served it): a list from
//            N answers HTTP 504 "Too large resource version" (its cause
//            ResourceVersionTooLarge, Retry-After 1), a watch from N 200 and
//            an ERROR event carrying it; from ""/"0" it serves normally.
// Faults are checked after authentication, so a refused client consumes none.

import type { ServerResponse } from 'node:http';
import { statusBody } from './http.js';

/** 'watchList': a watch asking for its initial events (sendInitialEvents=true); 'watch' matches it too. */
export type FaultVerb = 'list' | 'watch' | 'watchList' | 'get' | 'write';

export interface ApiFault {
  readonly kind: 'status' | 'stall' | 'delay' | 'hangup' | 'expire' | 'behind';
  /** Only requests of this verb; default any. */
  readonly verb?: FaultVerb;
  /** Only requests for this resource (plural, e.g. 'services'); default any. */
  readonly resource?: string;
  /** How many matching requests it hits; default unlimited (until cleared). */
  readonly times?: number;
  /** status: the HTTP code (default 500). */
  readonly code?: number;
  /** status: Retry-After in seconds. */
  readonly retryAfterSeconds?: number;
  /** delay: milliseconds before the request is served. */
  readonly delayMs?: number;
  /** expire: initial events sent before the ERROR (default 0). */
  readonly afterEvents?: number;
}

const REASONS: Readonly<Record<number, string>> = {
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** The armed faults and what they hit. */
export class FaultSet {
  private faults: Array<{ fault: ApiFault; left: number }> = [];
  /** Requests answered by a fault, per kind (tests check that a fault fired). */
  readonly fired = { status: 0, stall: 0, delay: 0, hangup: 0, expire: 0, behind: 0 };

  add(fault: ApiFault): void {
    this.faults.push({ fault, left: fault.times ?? Number.POSITIVE_INFINITY });
  }

  clear(): void {
    this.faults = [];
  }

  get armed(): number {
    return this.faults.length;
  }

  /** The first fault matching this request, consumed by one; undefined when none. */
  take(verb: FaultVerb, resource: string): ApiFault | undefined {
    const hit = this.faults.find(
      (f) =>
        (f.fault.verb === undefined || f.fault.verb === verb || (f.fault.verb === 'watch' && verb === 'watchList')) &&
        (f.fault.resource ?? resource) === resource,
    );
    if (!hit) return undefined;
    if (--hit.left <= 0) this.faults = this.faults.filter((f) => f !== hit);
    this.fired[hit.fault.kind]++;
    return hit.fault;
  }
}

/** Answer with the fault's error Status, as the real server shapes it. */
export function sendFaultStatus(res: ServerResponse, f: ApiFault): void {
  const code = f.code ?? 500;
  const reason = REASONS[code] ?? 'InternalError';
  const body = statusBody(code, reason, `injected fault: ${reason}`);
  const headers: Record<string, string | number> = { 'Content-Type': 'application/json' };
  if (f.retryAfterSeconds !== undefined) {
    body['details'] = { retryAfterSeconds: f.retryAfterSeconds };
    headers['Retry-After'] = String(f.retryAfterSeconds);
  }
  const text = JSON.stringify(body);
  headers['Content-Length'] = Buffer.byteLength(text);
  res.writeHead(code, headers);
  res.end(text);
}

/**
 * A list reply that stops mid-body: the headers promise the whole body, a
 * part of it is written, and the rest never comes (the response stays open
 * until the client or a server stop closes the connection).
 */
export function sendStalledJSON(res: ServerResponse, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.write(text.slice(0, Math.max(1, Math.floor(text.length / 2))));
}

/** A watch that is accepted and then silent. */
export function sendSilentWatch(res: ServerResponse): void {
  res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
  res.flushHeaders();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
