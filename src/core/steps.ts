// Long synchronous work as resumable steps: a generator that yields between
// bounded pieces of work and returns its result. The pure layers have no
// timers, so they cannot give the event loop back themselves; they offer the
// steps, and the layer that owns scheduling decides when to pause between
// them (src/platform/slices.ts: after a time budget, until the loop has run
// once). finish() runs them to the end at once, for callers that may block.
//
// A step function must leave its object consistent for its own next step
// only: between two steps nothing else may use that object (the sync runner
// never runs two syncs at once, and a dataplane's planner is its own).

export type Steps<T> = Generator<void, T, void>;

/** Run every step now and return the result. */
export function finish<T>(steps: Steps<T>): T {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}
