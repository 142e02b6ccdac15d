import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { hasFibLookupSrc } from './kernel.js';

describe('hasFibLookupSrc', () => {
  test('Linux 6.7 and later have it; Debian 12 (6.1) and 5.x do not', () => {
    assert.deepEqual(
      ['6.1.0-57-amd64', '5.15.0-91-generic', '6.6.30', '6.7.0', '6.18.2', '7.0.1', 'weird'].map((r) =>
        hasFibLookupSrc(r),
      ),
      [false, false, false, true, true, true, true],
    );
  });
});
