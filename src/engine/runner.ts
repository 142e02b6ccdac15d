// Upstream's BoundedFrequencyRunner (pkg/proxy/runner/bounded_frequency_runner.go):
// the one place that decides WHEN the proxier syncs. Handlers call run(); the
// runner merges those requests and calls fn, never more often than minInterval
// and never less often than maxInterval.
//
// Invariants (each is tested in runner.test.ts):
//  1. Never two runs at once: fn is not called again until its promise settles.
//  2. Coalescing: any number of run() calls while a run is in flight or while
//     the runner cools down produce exactly one further run.
//  3. minInterval: at least minInterval passes between the END of one run and
//     the START of the next (upstream's current runner measures from
//     completion, too). With `burst` set, the rule is upstream's earlier
//     token bucket instead (pkg/util/async/bounded_frequency_runner.go, which
//     the iptables proxier ran with burstSyncs = 2): up to `burst` runs may
//     start back to back, and then one per minInterval, counted from START to
//     start. So the first change after a quiet period syncs at once, a second
//     one right after it does too, and under steady churn a run starts every
//     minInterval, not every minInterval plus the run's own duration.
//     Except: a run that took longer than minInterval is followed by
//     minInterval without runs. The proxy has one thread, and back-to-back
//     runs would leave no time to take in the watch events the next run
//     needs: under a flood of changes the intake would fall behind for as
//     long as the long runs went on.
//  4. maxInterval: a run starts at most maxInterval after the end of the
//     previous one (or after loop() for the first), even without run() calls.
//  5. retryInterval: a run whose promise rejects (or that throws) is retried
//     retryInterval after it ended, unless something else runs it sooner; a
//     successful run cancels the pending retry. Retries still respect (3).
//  6. After stop() no run starts and no timer stays armed.
// Time comes only from the injected Clock (docs/architecture.md, the engine layer).

import { BugError } from '../core/errors.js';
import type { Clock, TimerHandle } from '../core/clock.js';

export interface RunnerIntervals {
  /** Milliseconds between the end of a run and the start of the next, at least. */
  readonly minInterval: number;
  /** Milliseconds after the end of a run by which the next run starts, at most. */
  readonly maxInterval: number;
  /** Milliseconds after a failed run by which it is retried. */
  readonly retryInterval: number;
  /** Token-bucket rate rule with this many runs of burst (see invariant 3); unset: minInterval after each end. */
  readonly burst?: number;
}

export interface RunnerHooks {
  /** Called with whatever a failed run rejected with (upstream logs "retrying"). */
  readonly onError?: (err: unknown, name: string) => void;
}

type State = 'new' | 'idle' | 'running' | 'cooldown' | 'stopped';

export class BoundedFrequencyRunner {
  private state: State = 'new';
  /** A run was requested (run(), maxInterval or retry) and has not started yet. */
  private pending = false;
  private minTimer: TimerHandle | null = null;
  private maxTimer: TimerHandle | null = null;
  private retryTimer: TimerHandle | null = null;
  private inFlight: Promise<void> | null = null;
  /** Monotonic ms when the run in flight started, and before which the next may not start (burst rule). */
  private runStartedAt = 0;
  private notBefore = 0;
  /** The bucket of the `burst` rule: tokens now, as of lastRefill (monotonic ms). */
  private tokens: number;
  private lastRefill: number;

  constructor(
    readonly name: string,
    private readonly fn: () => Promise<void>,
    private readonly intervals: RunnerIntervals,
    private readonly clock: Clock,
    private readonly hooks: RunnerHooks = {},
  ) {
    const { minInterval, maxInterval, retryInterval } = intervals;
    for (const [k, v] of Object.entries({ minInterval, maxInterval, retryInterval })) {
      if (!Number.isFinite(v) || v < 0) throw new BugError(`${name}: ${k} must be a finite number >= 0, got ${v}`);
    }
    if (maxInterval < minInterval)
      throw new BugError(`${name}: maxInterval (${maxInterval}) must be >= minInterval (${minInterval})`);
    if (intervals.burst !== undefined && !(Number.isInteger(intervals.burst) && intervals.burst >= 1))
      throw new BugError(`${name}: burst must be an integer >= 1, got ${intervals.burst}`);
    this.tokens = intervals.burst ?? 0;
    this.lastRefill = clock.monotonic();
  }

  /**
   * Start the loop (upstream Loop). The maxInterval timer starts now; run()
   * calls made before loop() are remembered and served at once.
   */
  loop(): void {
    if (this.state !== 'new') return;
    this.state = 'idle';
    this.armMax();
    if (this.pending) this.startWhenAllowed();
  }

  /** Request a run as soon as the invariants allow. Never blocks, never throws. */
  run(): void {
    if (this.state === 'stopped') return;
    this.pending = true;
    if (this.state === 'idle') this.startWhenAllowed();
  }

  /** Stop for good. Resolves when a run in flight (if any) has settled. */
  async stop(): Promise<void> {
    this.state = 'stopped';
    this.pending = false;
    for (const t of [this.minTimer, this.maxTimer, this.retryTimer]) t?.cancel();
    this.minTimer = this.maxTimer = this.retryTimer = null;
    await this.inFlight;
  }

  /** True while fn's promise is unsettled. */
  get running(): boolean {
    return this.state === 'running';
  }

  /**
   * Idle with a run pending: start it, or with the burst rule, start it when
   * the bucket holds a token (a timer waits for the refill).
   */
  private startWhenAllowed(): void {
    const { burst, minInterval } = this.intervals;
    if (burst === undefined || minInterval === 0) return this.startRun();
    const now = this.clock.monotonic();
    this.tokens = Math.min(burst, this.tokens + (now - this.lastRefill) / minInterval);
    this.lastRefill = now;
    if (this.tokens >= 1 && now >= this.notBefore) {
      this.tokens -= 1;
      return this.startRun();
    }
    if (this.minTimer) return;
    this.state = 'cooldown';
    const wait = Math.max(Math.ceil((1 - this.tokens) * minInterval), this.notBefore - now);
    this.minTimer = this.clock.setTimer(wait, () => {
      this.minTimer = null;
      if (this.state !== 'cooldown') return;
      this.state = 'idle';
      if (this.pending) this.startWhenAllowed();
    });
  }

  private startRun(): void {
    this.pending = false;
    this.state = 'running';
    this.runStartedAt = this.clock.monotonic();
    this.maxTimer?.cancel();
    this.maxTimer = null;
    this.inFlight = this.invoke().then((ok) => this.finishRun(ok));
  }

  private async invoke(): Promise<boolean> {
    try {
      await this.fn();
      return true;
    } catch (err) {
      try {
        this.hooks.onError?.(err, this.name);
      } catch {
        // An observer's failure must not break the loop.
      }
      return false;
    }
  }

  private finishRun(ok: boolean): void {
    this.inFlight = null;
    if (this.state === 'stopped') return;
    this.retryTimer?.cancel();
    this.retryTimer = ok ? null : this.clock.setTimer(this.intervals.retryInterval, () => this.timerFired('retry'));
    this.armMax();
    if (this.intervals.burst !== undefined) {
      // The bucket decides when the next run may start; after a run longer than minInterval, not before minInterval.
      const now = this.clock.monotonic();
      const { minInterval } = this.intervals;
      this.notBefore = now - this.runStartedAt > minInterval ? now + minInterval : now;
      this.state = 'idle';
      if (this.pending) this.startWhenAllowed();
      return;
    }
    this.state = 'cooldown';
    this.minTimer = this.clock.setTimer(this.intervals.minInterval, () => {
      this.minTimer = null;
      if (this.state !== 'cooldown') return;
      this.state = 'idle';
      if (this.pending) this.startRun();
    });
  }

  private armMax(): void {
    this.maxTimer?.cancel();
    this.maxTimer = this.clock.setTimer(this.intervals.maxInterval, () => this.timerFired('max'));
  }

  private timerFired(which: 'max' | 'retry'): void {
    if (which === 'max') this.maxTimer = null;
    else this.retryTimer = null;
    this.run();
  }
}
