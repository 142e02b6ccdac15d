// Client-side rate limit of API requests (clientConnection.qps / burst), a
// token bucket as client-go's flowcontrol.NewTokenBucketRateLimiter: it holds
// up to `burst` tokens, refills `qps` tokens a second, and every request
// (list page, watch start, event post) takes one, waiting for it if needed.
// Waiters are served in arrival order. qps < 0 disables the limit, as in
// client-go; qps 0 is not expected here (the config defaulting makes it 5).
// Unlike client-go, a request whose connection was refused gives its token
// back (refund()): it cost the server nothing, and during an outage the
// retries would otherwise empty the bucket, so the relists after it waited
// for tokens (~200 ms each at the default 5 qps) once the server was back.

import type { Clock, TimerHandle } from '../../core/clock.js';
import { AbortError } from './transport.js';

export class TokenBucket {
  private tokens: number;
  private last: number;
  private readonly queue: Array<{ resolve: () => void; reject: (e: unknown) => void }> = [];
  private timer: TimerHandle | null = null;

  constructor(
    private readonly qps: number,
    private readonly burst: number,
    private readonly clock: Clock,
  ) {
    this.tokens = Math.max(1, burst);
    this.last = clock.monotonic();
  }

  get unlimited(): boolean {
    return this.qps < 0 || !Number.isFinite(this.qps);
  }

  /** Resolves when the caller may send; rejects if signal aborts first. */
  acquire(signal?: AbortSignal): Promise<void> {
    if (this.unlimited) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason ?? new AbortError('aborted'));
    this.refill();
    if (this.queue.length === 0 && this.tokens >= 1) {
      this.tokens -= 1;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        const i = this.queue.indexOf(w);
        if (i >= 0) this.queue.splice(i, 1);
        reject(signal!.reason ?? new AbortError('aborted'));
      };
      // The listener goes when the token comes: long-lived signals must not collect one per request.
      const w = {
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        reject,
      };
      this.queue.push(w);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.schedule();
    });
  }

  /** Give back the token of a request that never reached the server (its connection was refused). */
  refund(): void {
    if (this.unlimited) return;
    this.refill();
    this.tokens = Math.min(Math.max(1, this.burst), this.tokens + 1);
    while (this.queue.length > 0 && this.tokens >= 1) {
      this.tokens -= 1;
      this.queue.shift()!.resolve();
    }
  }

  private refill(): void {
    const now = this.clock.monotonic();
    this.tokens = Math.min(Math.max(1, this.burst), this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
  }

  private schedule(): void {
    if (this.timer || this.queue.length === 0) return;
    const waitMs = this.qps === 0 ? 1000 : Math.max(0, ((1 - this.tokens) / this.qps) * 1000);
    this.timer = this.clock.setTimer(waitMs, () => {
      this.timer = null;
      this.refill();
      while (this.queue.length > 0 && this.tokens >= 1) {
        this.tokens -= 1;
        this.queue.shift()!.resolve();
      }
      this.schedule();
    });
  }
}
