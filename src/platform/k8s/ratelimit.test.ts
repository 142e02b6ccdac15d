// The client-side rate limit: a burst goes out at once, then qps a second, in
// arrival order; an aborted waiter leaves the queue; qps < 0 means no limit.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../test/support/fakeclock.js';
import { TokenBucket } from './ratelimit.js';

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('TokenBucket', () => {
  it('lets a burst through, then refills qps tokens a second, serving waiters in order', async () => {
    const clock = new FakeClock();
    const b = new TokenBucket(5, 2, clock);
    const done: number[] = [];
    for (let i = 0; i < 5; i++) void b.acquire().then(() => done.push(i));
    await flush();
    assert.deepEqual(done, [0, 1]);
    clock.advance(199);
    await flush();
    assert.deepEqual(done, [0, 1]);
    clock.advance(1);
    await flush();
    assert.deepEqual(done, [0, 1, 2]);
    clock.advance(400);
    await flush();
    assert.deepEqual(done, [0, 1, 2, 3, 4]);
    // Idle time refills up to the burst, not beyond.
    clock.advance(10_000);
    for (let i = 5; i < 8; i++) void b.acquire().then(() => done.push(i));
    await flush();
    assert.deepEqual(done.slice(5), [5, 6]);
  });

  it('refund() gives a token back at once to the first waiter, never beyond the burst', async () => {
    const clock = new FakeClock();
    const b = new TokenBucket(1, 2, clock);
    const done: number[] = [];
    for (let i = 0; i < 3; i++) void b.acquire().then(() => done.push(i));
    await flush();
    assert.deepEqual(done, [0, 1]);
    b.refund(); // request 0's connection was refused
    await flush();
    assert.deepEqual(done, [0, 1, 2], 'the waiter took the returned token without a refill');
    b.refund();
    b.refund();
    b.refund();
    for (let i = 3; i < 6; i++) void b.acquire().then(() => done.push(i));
    await flush();
    assert.deepEqual(done.slice(3), [3, 4], 'three refunds fill the bucket to its burst of 2, no more');
  });

  it('drops an aborted waiter and serves the next one in its place', async () => {
    const clock = new FakeClock();
    const b = new TokenBucket(1, 1, clock);
    await b.acquire();
    const ac = new AbortController();
    const first = b.acquire(ac.signal);
    const second = b.acquire();
    ac.abort();
    await assert.rejects(first);
    clock.advance(1000);
    await second;
    await assert.rejects(b.acquire(ac.signal), 'an aborted signal is refused at once');
  });

  it('does not limit with qps < 0', async () => {
    const b = new TokenBucket(-1, 0, new FakeClock());
    for (let i = 0; i < 100; i++) await b.acquire();
    assert.equal(b.unlimited, true);
  });
});
