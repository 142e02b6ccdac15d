// Runs resumable steps (src/core/steps.ts) without holding the event loop for
// long: after each step, once `budgetMs` of work has passed since the loop last
// ran, wait for one turn of it (setImmediate: timers, sockets and the HTTP
// servers of /healthz and /metrics are served, then the steps go on). A
// 10k-Service sync is then many short pieces instead of one long one.
import type { Steps } from '../core/steps.js';

/** The work done between two turns of the loop, at most (plus one step). */
export const SLICE_BUDGET_MS = 10;

/** One turn of the event loop: what is ready (sockets, timers) runs before the caller goes on. */
export function loopTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}

export async function runSliced<T>(steps: Steps<T>, budgetMs: number = SLICE_BUDGET_MS): Promise<T> {
  let until = performance.now() + budgetMs;
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
    if (performance.now() < until) continue;
    await loopTurn();
    until = performance.now() + budgetMs;
  }
}
