import type { Clock, TimerHandle } from '../../src/core/clock.js';

/** A manual clock: time moves only when a test calls advance(). */
export class FakeClock implements Clock {
  private t: number;
  private seq = 0;
  private timers: Array<{ at: number; seq: number; fn: () => void; live: boolean }> = [];

  constructor(start = 1_700_000_000_000) {
    this.t = start;
  }
  now(): number {
    return this.t;
  }
  monotonic(): number {
    return this.t;
  }
  setTimer(ms: number, fn: () => void): TimerHandle {
    const timer = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, live: true };
    this.timers.push(timer);
    return {
      cancel: () => {
        timer.live = false;
      },
    };
  }
  /** Number of live timers. */
  pending(): number {
    return this.timers.filter((t) => t.live).length;
  }
  /** Move time forward, firing due timers in order (timers set by timers included). */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.live && t.at <= end).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      due.live = false;
      this.t = due.at;
      due.fn();
    }
    this.timers = this.timers.filter((t) => t.live);
    this.t = end;
  }
}
