import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../../../test/support/fakeclock.js';
import { RoundRobin } from './loadbalancer.js';

const A = '10.180.0.1:80';
const B = '10.180.0.2:80';
const C = '10.180.0.3:80';

describe('userspace RoundRobin', () => {
  it('walks the endpoints in order and wraps', () => {
    const rr = new RoundRobin(new FakeClock());
    rr.setEndpoints([A, B, C], 0);
    assert.deepEqual(
      Array.from({ length: 7 }, () => rr.next('1.1.1.1')),
      [A, B, C, A, B, C, A],
    );
  });

  it('returns null without endpoints', () => {
    const rr = new RoundRobin(new FakeClock());
    assert.equal(rr.next('1.1.1.1'), null);
    rr.setEndpoints([A], 0);
    rr.setEndpoints([], 0);
    assert.equal(rr.next('1.1.1.1'), null);
  });

  it('keeps a client on its endpoint within the timeout, refreshing on use', () => {
    const clock = new FakeClock();
    const rr = new RoundRobin(clock);
    rr.setEndpoints([A, B, C], 10_000);
    assert.equal(rr.next('1.1.1.1'), A);
    assert.equal(rr.next('2.2.2.2'), B);
    clock.advance(9_000);
    assert.equal(rr.next('1.1.1.1'), A);
    clock.advance(9_000); // 18 s after the first use, 9 s after the refresh
    assert.equal(rr.next('1.1.1.1'), A);
    clock.advance(10_000); // exactly the timeout: expired
    assert.equal(rr.next('1.1.1.1'), C);
  });

  it('resetAffinity moves the client to the next endpoint and remembers that one', () => {
    const rr = new RoundRobin(new FakeClock());
    rr.setEndpoints([A, B], 10_000);
    assert.equal(rr.next('1.1.1.1'), A);
    assert.equal(rr.next('1.1.1.1', true), B);
    assert.equal(rr.next('1.1.1.1'), B);
  });

  it('forgets affinities to removed endpoints and keeps the others', () => {
    const rr = new RoundRobin(new FakeClock());
    rr.setEndpoints([A, B, C], 10_000);
    assert.equal(rr.next('1.1.1.1'), A);
    assert.equal(rr.next('2.2.2.2'), B);
    rr.setEndpoints([B, C], 10_000);
    assert.equal(rr.next('2.2.2.2'), B);
    assert.notEqual(rr.next('1.1.1.1'), A);
  });

  it('affinity off clears remembered clients; cleanupStale drops only expired ones', () => {
    const clock = new FakeClock();
    const rr = new RoundRobin(clock);
    rr.setEndpoints([A, B], 1_000);
    rr.next('1.1.1.1');
    clock.advance(600);
    rr.next('2.2.2.2');
    clock.advance(500);
    assert.equal(rr.cleanupStale(), 1);
    assert.equal(rr.affinityCount(), 1);
    rr.setEndpoints([A, B], 0);
    assert.equal(rr.affinityCount(), 0);
  });

  it('an unchanged endpoint list keeps the rotation position', () => {
    const rr = new RoundRobin(new FakeClock());
    rr.setEndpoints([A, B, C], 0);
    rr.next('x');
    rr.setEndpoints([A, B, C], 0);
    assert.equal(rr.next('x'), B);
  });
});
