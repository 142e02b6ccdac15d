// Status errors as the client builds them from a server's reply: the code,
// the reason, and the Retry-After from the header or the Status details.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hasCode, ProxyError } from '../../core/errors.js';
import { AbortError, ApiStatusError, fromStatus, parseRetryAfter, retryAfterOf, statusCodeOf } from './transport.js';

describe('transport errors', () => {
  it('reads Retry-After as seconds or as an HTTP date', () => {
    const now = Date.parse('2026-12-02T00:00:00Z');
    assert.equal(parseRetryAfter('3', now), 3);
    assert.equal(parseRetryAfter(' 120 ', now), 120);
    assert.equal(parseRetryAfter('Wed, 02 Dec 2026 00:00:05 GMT', now), 5);
    assert.equal(parseRetryAfter('Tue, 01 Dec 2026 23:00:00 GMT', now), 0, 'a date in the past: retry now');
    assert.equal(parseRetryAfter(undefined, now), undefined);
    assert.equal(parseRetryAfter('soon', now), undefined);
    assert.equal(parseRetryAfter('-1', now), undefined);
  });

  it('takes Retry-After from the header first, else from Status details', () => {
    const body = {
      kind: 'Status',
      code: 429,
      reason: 'TooManyRequests',
      message: 'm',
      details: { retryAfterSeconds: 4 },
    };
    assert.equal(fromStatus(429, body).retryAfterSeconds, 4);
    assert.equal(fromStatus(429, body, 9).retryAfterSeconds, 9);
    assert.equal(fromStatus(500, { code: 500, reason: 'InternalError' }).retryAfterSeconds, undefined);
    assert.equal(fromStatus(500, { details: { retryAfterSeconds: 0 } }).retryAfterSeconds, undefined);
    const e = fromStatus(503, 'not json at all', 2);
    assert.ok(e instanceof ApiStatusError);
    assert.equal(e.statusCode, 503);
    assert.equal(retryAfterOf(e), 2);
    assert.equal(retryAfterOf(new Error('x')), undefined);
  });

  it('are ProxyErrors with stable codes that keep their names and Status fields', () => {
    const e = fromStatus(410, { code: 410, reason: 'Expired', message: 'too old resource version' });
    assert.ok(e instanceof ProxyError);
    assert.ok(hasCode(e, 'KPT_API_STATUS'));
    assert.equal(e.name, 'ApiStatusError');
    assert.equal(statusCodeOf(e), 410);
    assert.equal(e.reason, 'Expired');
    assert.equal(e.message, 'too old resource version');
    const aborted = new AbortError();
    assert.ok(aborted instanceof ProxyError);
    assert.ok(hasCode(aborted, 'KPT_ABORTED'));
    assert.equal(aborted.name, 'AbortError');
    assert.equal(aborted.message, 'The operation was aborted');
  });
});
