import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { base32, sha256 } from './hash.js';

test('sha256 equals node:crypto for every length across block boundaries, strings and bytes', () => {
  for (let len = 0; len <= 300; len++) {
    const s =
      Array.from({ length: len }, (_, i) => String.fromCharCode(32 + ((i * 7 + len) % 95))).join('') +
      (len % 5 === 0 ? 'é' : '');
    const want = createHash('sha256').update(s, 'utf8').digest();
    assert.deepEqual(Buffer.from(sha256(s)), want, `length ${len}`);
    assert.deepEqual(Buffer.from(sha256(new TextEncoder().encode(s))), want);
  }
});

test('base32 is RFC 4648 with padding', () => {
  assert.equal(base32(new TextEncoder().encode('foobar')), 'MZXW6YTBOI======');
  assert.equal(base32(new Uint8Array()), '');
});
