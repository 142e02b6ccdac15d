// How long a reflector waits before it asks the API server again after a
// failed list or watch: exponential steps with jitter, the server's own
// Retry-After honoured (within a cap), and the rules for when the steps start
// over. The reflector (reflector.ts) reports what happened; this decides.
import type { Clock } from '../../core/clock.js';

export interface BackoffOptions {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly factor?: number;
  /** Fraction of each delay that is random: the wait is in [d * (1 - jitter), d]. Default 0. */
  readonly jitter?: number;
  /**
   * A backoff that starts this long after the previous one began starts the
   * steps over (client-go's backoff manager does the same, with 2 min).
   * Default BACKOFF_RESET_MS.
   */
  readonly resetMs?: number;
}

/** See BackoffOptions.resetMs. */
export const BACKOFF_RESET_MS = 120_000;
/** A Retry-After longer than this is taken as this: a misconfigured server must not freeze updates for hours. */
export const MAX_RETRY_AFTER_MS = 60_000;

export interface Wait {
  readonly delayMs: number;
  /** 1 for the first wait of a run of failures. */
  readonly attempt: number;
  /** The server asked for this wait (Retry-After): it is not cut short when the server looks reachable again. */
  readonly serverAsked: boolean;
}

export class Backoff {
  private failures = 0;
  /** The last watch the server answered closed within a second without an event (client-go's "very short watch"). */
  private shortWatch = false;
  /** clock.monotonic() when the last wait began. */
  private lastWaitAt: number | undefined;
  /** Retry-After of the last failure, in ms, for the next wait. */
  private retryAfterMs: number | undefined;

  constructor(
    private readonly o: BackoffOptions,
    private readonly clock: Clock,
    private readonly random: () => number = Math.random,
  ) {}

  /** A complete list, or a watch that ended well: the next failure starts from the first step. */
  succeeded(): void {
    this.failures = 0;
  }

  /**
   * The server answered a watch: the failures that led here (an outage) are over. Unless the last watch it
   * answered was a very short one: then a server that accepts watches and drops them at once keeps growing
   * the wait instead of being asked again every initialMs.
   */
  answered(): void {
    if (!this.shortWatch) this.failures = 0;
  }

  /** How the last watch ended. Only one the server answered tells how it treats watches (a refused one is an outage). */
  watchEnded(answered: boolean, veryShort: boolean): void {
    this.shortWatch = answered && veryShort;
  }

  /** A failure, with the server's Retry-After (seconds) if it sent one: the next wait is at least that. */
  failed(retryAfterSeconds: number | undefined): void {
    this.retryAfterMs =
      retryAfterSeconds === undefined ? undefined : Math.min(retryAfterSeconds * 1000, MAX_RETRY_AFTER_MS);
  }

  /** The wait to begin now. */
  next(): Wait {
    const { initialMs, maxMs, factor = 2, jitter = 0, resetMs = BACKOFF_RESET_MS } = this.o;
    // A watch that reconnected after an outage and then stayed open without
    // events never resets the count where a closed watch or a list would, so
    // without this the next outage, hours later, would start at the step the
    // last one reached (up to maxMs) instead of retrying quickly.
    const now = this.clock.monotonic();
    if (this.lastWaitAt !== undefined && now - this.lastWaitAt > resetMs) this.failures = 0;
    this.lastWaitAt = now;
    const full = Math.min(maxMs, initialMs * factor ** this.failures);
    const asked = this.retryAfterMs;
    this.retryAfterMs = undefined;
    const jittered = Math.round(full * (1 - jitter * this.random()));
    this.failures++;
    return { delayMs: Math.max(jittered, asked ?? 0), attempt: this.failures, serverAsked: asked !== undefined };
  }
}
