// Time is injected so that schedulers can be tested without sleeping
// (docs/architecture.md, the layers). The type sits in core so that every pure
// layer (the engine's runner, the userspace load balancer in dataplane) can take
// one without importing another layer. platform/clock.ts provides the real one;
// test/support/fakeclock.ts a manual one.

export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Monotonic milliseconds, for measuring durations. */
  monotonic(): number;
  /** Run fn once after ms milliseconds unless cancelled first. */
  setTimer(ms: number, fn: () => void): TimerHandle;
}
