// The wait between two tries, on its own: steps, jitter, the server's
// Retry-After, and when the steps start over.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../../../test/support/fakeclock.js';
import { Backoff, MAX_RETRY_AFTER_MS } from './backoff.js';

const delays = (b: Backoff, n: number) => Array.from({ length: n }, () => b.next().delayMs);

describe('Backoff', () => {
  test('steps grow by the factor up to the cap; a success starts them over', () => {
    const b = new Backoff({ initialMs: 200, maxMs: 1000 }, new FakeClock());
    assert.deepEqual(delays(b, 5), [200, 400, 800, 1000, 1000]);
    b.succeeded();
    assert.deepEqual(b.next(), { delayMs: 200, attempt: 1, serverAsked: false });
  });

  test('jitter takes up to its fraction off each step', () => {
    const b = new Backoff({ initialMs: 1000, maxMs: 8000, jitter: 0.5 }, new FakeClock(), () => 1);
    assert.deepEqual(delays(b, 3), [500, 1000, 2000]);
  });

  test("the server's Retry-After is a floor for the next wait only, capped", () => {
    const b = new Backoff({ initialMs: 200, maxMs: 30_000 }, new FakeClock());
    b.failed(7);
    assert.deepEqual(b.next(), { delayMs: 7000, attempt: 1, serverAsked: true });
    assert.equal(b.next().delayMs, 400);
    b.failed(86_400);
    assert.equal(b.next().delayMs, MAX_RETRY_AFTER_MS);
  });

  test('a wait that begins long after the last one starts the steps over', () => {
    const clock = new FakeClock();
    const b = new Backoff({ initialMs: 200, maxMs: 30_000, resetMs: 120_000 }, clock);
    assert.deepEqual(delays(b, 3), [200, 400, 800]);
    clock.advance(120_001);
    assert.equal(b.next().delayMs, 200);
  });

  test('an answered watch ends the run of failures, unless the last answered one was very short', () => {
    const b = new Backoff({ initialMs: 200, maxMs: 30_000 }, new FakeClock());
    delays(b, 3);
    b.answered();
    assert.equal(b.next().delayMs, 200, 'after an outage');
    b.watchEnded(true, true);
    b.answered();
    assert.equal(b.next().delayMs, 400, 'a server that drops its watches at once keeps growing the wait');
    b.watchEnded(false, true);
    b.answered();
    assert.equal(b.next().delayMs, 200, 'a refused connection was an outage, not a very short watch');
  });
});
