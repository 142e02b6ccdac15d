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
//     the START of the next (upstream measures from completion, too).
//  4. maxInterval: a run starts at most maxInterval after the end of the
//     previous one (or after loop() for the first), even without run() calls.
//  5. retryInterval: a run whose promise rejects (or that throws) is retried
//     retryInterval after it ended, unless something else runs it sooner; a
//     successful run cancels the pending retry. Retries still respect (3).
//  6. After stop() no run starts and no timer stays armed.
// Time comes only from the injected Clock (docs/architecture.md, the engine layer).

import { BugError } from '../core/errors.js';
import type { Clock, TimerHandle } from './clock.js';

export interface RunnerIntervals {
  /** Milliseconds between the end of a run and the start of the next, at least. */
  readonly minInterval: number;
  /** Milliseconds after the end of a run by which the next run starts, at most. */
  readonly maxInterval: number;
  /** Milliseconds after a failed run by which it is retried. */
  readonly retryInterval: number;
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
  }

  /**
   * Start the loop (upstream Loop). The maxInterval timer starts now; run()
   * calls made before loop() are remembered and served at once.
   */
  loop(): void {
    if (this.state !== 'new') return;
    this.state = 'idle';
    this.armMax();
    if (this.pending) this.startRun();
  }

  /** Request a run as soon as the invariants allow. Never blocks, never throws. */
  run(): void {
    if (this.state === 'stopped') return;
    this.pending = true;
    if (this.state === 'idle') this.startRun();
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

  private startRun(): void {
    this.pending = false;
    this.state = 'running';
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
