import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { BoundedFrequencyRunner } from './runner.js';
import { FakeClock } from '../../test/support/fakeclock.js';

/** Let settled promises deliver their callbacks (no timers involved). */
async function flush(): Promise<void> {
  for (let i = 0; i < 5; i++) await tick();
}

/** A controllable fn: each call records its start time and waits until finished by the test. */
function harness(clock: FakeClock) {
  const starts: number[] = [];
  let active = 0;
  let maxActive = 0;
  const waiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  const fn = () =>
    new Promise<void>((resolve, reject) => {
      starts.push(clock.now());
      active++;
      maxActive = Math.max(maxActive, active);
      waiters.push({
        resolve: () => {
          active--;
          resolve();
        },
        reject: (e) => {
          active--;
          reject(e);
        },
      });
    });
  return {
    fn,
    starts,
    get maxActive() {
      return maxActive;
    },
    async finish(ok = true) {
      const w = waiters.shift();
      assert.ok(w, 'no run in flight to finish');
      if (ok) w.resolve();
      else w.reject(new Error('sync failed'));
      await flush();
    },
  };
}

const intervals = { minInterval: 1000, maxInterval: 60_000, retryInterval: 5000 };
const T0 = 1_700_000_000_000;

test('first run() runs at once; requests during a run coalesce into one run after minInterval', async () => {
  const clock = new FakeClock(T0);
  const h = harness(clock);
  const r = new BoundedFrequencyRunner('sync', h.fn, intervals, clock);
  r.loop();
  r.run();
  assert.deepEqual(h.starts, [T0]);
  r.run();
  r.run();
  r.run();
  clock.advance(300);
  await h.finish();
  assert.equal(h.starts.length, 1, 'no second run before minInterval');
  clock.advance(999);
  assert.equal(h.starts.length, 1);
  clock.advance(1);
  assert.deepEqual(h.starts, [T0, T0 + 1300], 'one coalesced run minInterval after the end of the first');
  await h.finish();
  clock.advance(10_000);
  assert.equal(h.starts.length, 2, 'nothing pending: no extra run');
  assert.equal(h.maxActive, 1);
  await r.stop();
});

test('minInterval is measured from the end of a run; run() after cooldown runs at once', async () => {
  const clock = new FakeClock(T0);
  const h = harness(clock);
  const r = new BoundedFrequencyRunner('sync', h.fn, intervals, clock);
  r.loop();
  r.run();
  clock.advance(5000);
  await h.finish();
  clock.advance(500);
  r.run();
  assert.equal(h.starts.length, 1);
  clock.advance(500);
  assert.deepEqual(h.starts, [T0, T0 + 6000]);
  await h.finish();
  clock.advance(2000);
  r.run();
  assert.deepEqual(h.starts, [T0, T0 + 6000, T0 + 8000]);
  await h.finish();
  await r.stop();
});

test('maxInterval: runs periodically without any run() call', async () => {
  const clock = new FakeClock(T0);
  const h = harness(clock);
  const r = new BoundedFrequencyRunner('sync', h.fn, intervals, clock);
  r.loop();
  clock.advance(59_999);
  assert.equal(h.starts.length, 0);
  clock.advance(1);
  assert.deepEqual(h.starts, [T0 + 60_000]);
  clock.advance(100);
  await h.finish();
  clock.advance(60_000);
  assert.deepEqual(h.starts, [T0 + 60_000, T0 + 120_100], 'next periodic run counts from the end of the last');
  await h.finish();
  await r.stop();
});

test('a failed run is retried after retryInterval; a success cancels the retry', async () => {
  const clock = new FakeClock(T0);
  const h = harness(clock);
  const errors: unknown[] = [];
  const r = new BoundedFrequencyRunner('sync', h.fn, intervals, clock, { onError: (e) => errors.push(e) });
  r.loop();
  r.run();
  await h.finish(false);
  assert.equal(errors.length, 1);
  clock.advance(4999);
  assert.equal(h.starts.length, 1);
  clock.advance(1);
  assert.deepEqual(h.starts, [T0, T0 + 5000], 'retried');
  await h.finish(true);
  clock.advance(30_000);
  assert.equal(h.starts.length, 2, 'success cancelled further retries');
  await r.stop();
});

test('a retry interval shorter than minInterval still waits for minInterval', async () => {
  const clock = new FakeClock(T0);
  const h = harness(clock);
  const r = new BoundedFrequencyRunner(
    'sync',
    h.fn,
    { minInterval: 2000, maxInterval: 60_000, retryInterval: 100 },
    clock,
  );
  r.loop();
  r.run();
  await h.finish(false);
  clock.advance(1999);
  assert.equal(h.starts.length, 1);
  clock.advance(1);
  assert.deepEqual(h.starts, [T0, T0 + 2000]);
  await h.finish();
  await r.stop();
});

test('fn that throws synchronously counts as a failure and does not break the loop', async () => {
  const clock = new FakeClock(T0);
  let calls = 0;
  const r = new BoundedFrequencyRunner(
    'sync',
    () => {
      calls++;
      throw new Error('boom');
    },
    intervals,
    clock,
  );
  r.loop();
  r.run();
  await flush();
  clock.advance(5000);
  await flush();
  assert.equal(calls, 2);
  await r.stop();
});

test('run() before loop() is served when the loop starts; stop() disarms everything', async () => {
  const clock = new FakeClock(T0);
  const h = harness(clock);
  const r = new BoundedFrequencyRunner('sync', h.fn, intervals, clock);
  r.run();
  assert.equal(h.starts.length, 0);
  r.loop();
  assert.equal(h.starts.length, 1);
  r.run();
  const stopped = r.stop();
  await h.finish();
  await stopped;
  assert.equal(clock.pending(), 0, 'no timers armed after stop');
  r.run();
  clock.advance(120_000);
  assert.equal(h.starts.length, 1, 'nothing runs after stop');
});

const bursty = { ...intervals, burst: 2 };

test('burst: after a quiet period two runs start back to back, then one per minInterval from start to start', async () => {
  const clock = new FakeClock(T0);
  const h = harness(clock);
  const r = new BoundedFrequencyRunner('sync', h.fn, bursty, clock);
  r.loop();
  r.run();
  r.run(); // during the first run: coalesced, and served as soon as it ends
  clock.advance(100);
  await h.finish();
  assert.deepEqual(h.starts, [T0, T0 + 100], 'the second run did not wait for minInterval');
  r.run();
  clock.advance(100);
  await h.finish();
  // Two tokens spent at T0 and T0+100; 0.2 refilled by T0+200: the third waits until a whole token is back.
  clock.advance(799);
  assert.equal(h.starts.length, 2);
  clock.advance(1);
  assert.deepEqual(h.starts, [T0, T0 + 100, T0 + 1000]);
  await h.finish();
  await r.stop();
});

/**
 * A bursty runner under a change every 100 ms for `forMs`, each run taking
 * `runMs`; returns the harness and the runner with any run in flight finished.
 */
async function churn(forMs: number, runMs: number) {
  const clock = new FakeClock(T0);
  const h = harness(clock);
  const r = new BoundedFrequencyRunner('sync', h.fn, bursty, clock);
  r.loop();
  let finished = 0;
  for (let t = 0; t < forMs; t += 100) {
    r.run();
    clock.advance(100);
    const running = h.starts.length > finished;
    if (running && clock.now() - h.starts.at(-1)! >= runMs) {
      finished++;
      await h.finish();
    }
  }
  const stopped = r.stop();
  if (h.starts.length > finished) await h.finish();
  await stopped;
  return h;
}

test('burst: under steady churn runs start every minInterval, not every minInterval plus their duration', async () => {
  const h = await churn(6000, 400);
  const gaps = h.starts.slice(3).map((s, i) => s - h.starts[i + 2]!);
  assert.ok(
    gaps.every((g) => g === 1000),
    `start-to-start gaps after the burst: ${gaps.join(',')}`,
  );
  assert.equal(h.maxActive, 1, 'never two runs at once');
});

test('burst: a run longer than minInterval is followed by minInterval of idle time, not by the next run', async () => {
  // Each run takes 1500 ms: the bucket alone would start them back to back.
  const h = await churn(10_000, 1500);
  const gaps = h.starts.slice(1).map((s, i) => s - h.starts[i]!);
  assert.ok(gaps.length >= 3, `runs: ${h.starts.length}`);
  assert.ok(
    gaps.every((g) => g === 2500),
    `start-to-start gaps: ${gaps.join(',')} (1500 ms running + 1000 ms idle)`,
  );
});

test('burst: a quiet period refills the bucket, but never beyond the burst', async () => {
  const clock = new FakeClock(T0);
  const h = harness(clock);
  const r = new BoundedFrequencyRunner('sync', h.fn, bursty, clock);
  r.loop();
  clock.advance(30_000);
  for (let i = 0; i < 2; i++) {
    r.run();
    await h.finish();
  }
  r.run();
  assert.deepEqual(h.starts, [T0 + 30_000, T0 + 30_000], 'two at once after a long quiet period');
  clock.advance(1000);
  assert.deepEqual(h.starts, [T0 + 30_000, T0 + 30_000, T0 + 31_000]);
  await h.finish();
  await r.stop();
  assert.throws(() => new BoundedFrequencyRunner('x', h.fn, { ...intervals, burst: 0 }, clock), /burst/);
});

test('rejects maxInterval < minInterval', () => {
  assert.throws(
    () =>
      new BoundedFrequencyRunner(
        'x',
        async () => {},
        { minInterval: 10, maxInterval: 5, retryInterval: 1 },
        new FakeClock(),
      ),
    { code: 'KPT_BUG' },
  );
});
