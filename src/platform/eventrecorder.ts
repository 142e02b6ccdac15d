// Kubernetes Events as upstream kube-proxy records them (client-go's
// events.k8s.io/v1 recorder, reportingController "kube-proxy"): the start-up
// "Starting" on the Node, listen failures of the healthz, metrics and
// service health servers, and start-up warnings. Posting is best effort and
// never blocks or fails the proxy: events are queued, sent one at a time
// through an EventSink (the Kubernetes client), dropped with a debug log
// when the server refuses them, and tried again every 10 s (up to 12 times)
// when the server did not answer at all.
//
// Limits, as client-go's: an identical event (same object, type, reason,
// action, note) within 6 minutes is sent once and counted; each object has a
// token bucket of 25 events refilled one per 5 minutes; at most 100 events
// wait in the queue. Suppressed events are counted in `suppressed`.
import type { Clock } from '../core/clock.js';
import type { Logger } from './logger.js';

/** Where events go; the Kubernetes client implements it (POST .../events.k8s.io/v1/.../events). */
export interface EventSink {
  postEvent(event: object): Promise<void>;
}

/** v1.ObjectReference, the fields upstream fills. */
export interface ObjectRef {
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string;
  readonly uid?: string;
  readonly apiVersion?: string;
}

export type EventType = 'Normal' | 'Warning';

/** The events.k8s.io/v1 Event body this recorder posts. */
export interface KubeEvent {
  readonly apiVersion: 'events.k8s.io/v1';
  readonly kind: 'Event';
  readonly metadata: { readonly name: string; readonly namespace: string };
  readonly eventTime: string;
  readonly reportingController: string;
  readonly reportingInstance: string;
  readonly action: string;
  readonly reason: string;
  readonly type: EventType;
  readonly note: string;
  readonly regarding: ObjectRef;
}

/** Tries per event when the server does not answer, and the wait between them (client-go's events broadcaster). */
const MAX_TRIES = 12;
const RETRY_SLEEP_MS = 10_000;

export interface EventRecorderOptions {
  readonly sink: EventSink;
  readonly clock: Clock;
  /** The host name: reportingInstance is "kube-proxy-<host>", as upstream. */
  readonly host: string;
  readonly log?: Logger;
  /** Per-object bucket size; default 25. */
  readonly burst?: number;
  /** Per-object refill interval; default 300 000 ms. */
  readonly refillMs?: number;
  /** Identical events within this window are sent once; default 360 000 ms. */
  readonly dedupMs?: number;
  /** Most events waiting to be sent; default 100. */
  readonly maxQueued?: number;
}

/** The Node reference upstream uses for node events (uid = node name). */
export const nodeRef = (name: string): ObjectRef => ({ kind: 'Node', name, uid: name });

/** A Service reference as the service health server makes it (uid = "ns/name"). */
export function serviceRef(key: string): ObjectRef {
  const slash = key.indexOf('/');
  return { kind: 'Service', namespace: key.slice(0, slash), name: key.slice(slash + 1), uid: key };
}

const NOTE_MAX = 1024;

/** Go's MicroTime format: RFC 3339 with exactly six fraction digits, UTC. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class EventRecorder {
  private readonly queue: KubeEvent[] = [];
  private sending = false;
  private readonly lastSent = new Map<string, number>();
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private seq = 0;
  /** Events not sent because of dedup, rate limit or a full queue. */
  suppressed = 0;
  /** Events the sink refused or failed to deliver. */
  failed = 0;
  private idle: Promise<void> = Promise.resolve();
  private idleResolve: (() => void) | null = null;

  constructor(private readonly opts: EventRecorderOptions) {}

  /** Record one event (upstream Eventf(regarding, related=nil, type, reason, action, note)). */
  eventf(regarding: ObjectRef, type: EventType, reason: string, action: string, note = ''): void {
    const now = this.opts.clock.now();
    const objKey = `${regarding.kind}/${regarding.namespace ?? ''}/${regarding.name}`;
    const key = `${objKey}\0${type}\0${reason}\0${action}\0${note}`;
    const last = this.lastSent.get(key);
    if (last !== undefined && now - last < (this.opts.dedupMs ?? 360_000)) return this.suppress(reason, 'duplicate');
    if (!this.take(objKey, now)) return this.suppress(reason, 'rate limit');
    if (this.queue.length >= (this.opts.maxQueued ?? 100)) return this.suppress(reason, 'queue full');
    this.lastSent.set(key, now);
    this.queue.push(this.build(regarding, type, reason, action, note, now));
    this.pump();
  }

  /** Resolves when the queue is empty (shutdown, tests). */
  flush(): Promise<void> {
    return this.sending ? this.idle : Promise.resolve();
  }

  /** Per-object token bucket, refilled continuously. */
  private take(objKey: string, now: number): boolean {
    const burst = this.opts.burst ?? 25;
    const b = this.buckets.get(objKey) ?? { tokens: burst, at: now };
    b.tokens = Math.min(burst, b.tokens + (now - b.at) / (this.opts.refillMs ?? 300_000));
    b.at = now;
    this.buckets.set(objKey, b);
    if (b.tokens < 1) return false;
    b.tokens--;
    return true;
  }

  private suppress(reason: string, why: string): void {
    this.suppressed++;
    this.opts.log?.debug({ reason, why }, 'event not sent');
  }

  private build(
    regarding: ObjectRef,
    type: EventType,
    reason: string,
    action: string,
    note: string,
    now: number,
  ): KubeEvent {
    // Cluster-scoped objects' events live in "default", as client-go puts them.
    const namespace = regarding.namespace || 'default';
    const name = `${regarding.name}.${(BigInt(Math.floor(now)) * 1_000_000n + BigInt(this.seq++ % 1_000_000)).toString(16)}`;
    return {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name, namespace },
      eventTime: microTime(now),
      reportingController: 'kube-proxy',
      reportingInstance: `kube-proxy-${this.opts.host}`,
      action,
      reason,
      type,
      note: note.length > NOTE_MAX ? note.slice(0, NOTE_MAX) : note,
      regarding: { ...regarding },
    };
  }

  private pump(): void {
    if (this.sending) return;
    this.sending = true;
    this.idle = new Promise<void>((r) => (this.idleResolve = r));
    void (async () => {
      for (let ev = this.queue.shift(); ev; ev = this.queue.shift()) {
        for (let attempt = 1; ; attempt++) {
          try {
            await this.opts.sink.postEvent(ev);
            break;
          } catch (e) {
            // An answer from the server (any HTTP status) says the event is refused: retrying will not
            // help. No answer (a connection refused, reset or closed under the request) may be the
            // server's or a load balancer's moment: hold the queue and try again, as client-go does.
            const answered = typeof (e as { statusCode?: unknown } | null)?.statusCode === 'number';
            if (answered || attempt >= MAX_TRIES) {
              this.failed++;
              this.opts.log?.debug({ err: (e as Error).message, attempt }, 'event post failed; dropped');
              break;
            }
            await new Promise<void>((r) => this.opts.clock.setTimer(RETRY_SLEEP_MS, r));
          }
        }
      }
      this.sending = false;
      this.idleResolve?.();
    })();
  }
}
