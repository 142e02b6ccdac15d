import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseIP } from './ip.js';

/** The IPv4 rules as a regex and split (what the character scanner replaced), for comparison. */
function reference(s: string): { bytes: number[]; text: string } | null {
  const parts = s.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^[0-9]{1,3}$/.test(p))) return null;
  const bytes = parts.map((p) => Number.parseInt(p, 10));
  if (bytes.some((b) => b > 255)) return null;
  return { bytes, text: bytes.join('.') };
}

function check(s: string): void {
  const want = reference(s);
  const got = parseIP(s);
  if (!want) {
    assert.ok(got === null || got.family === 'IPv6', `${JSON.stringify(s)} parsed as ${got?.text}`);
    return;
  }
  assert.equal(got?.family, 'IPv4', s);
  assert.deepEqual([...got.bytes], want.bytes, s);
  assert.equal(got.text, want.text, s);
}

test('IPv4: canonical, sloppy (leading zeros, as upstream) and invalid forms', () => {
  for (const s of ['10.0.0.1', '0.0.0.0', '255.255.255.255', '172.30.0.041', '010.000.001.002', '1.2.3.00']) check(s);
  for (const s of ['', '1.2.3', '1.2.3.4.', '.1.2.3', '1..2.3', '1.2.3.256', '1.2.3.0256', '1.2.3.-1', '1.2.3.4 '])
    check(s);
  for (const s of ['a.b.c.d', '1.2.3.4/32', '１.2.3.4', '1.2.3.4\n', '999.1.1.1', '1.2.3.1000']) check(s);
  assert.equal(parseIP('172.30.0.041')?.text, '172.30.0.41');
  assert.equal(parseIP('::ffff:1.2.3.4')?.family, 'IPv6');
});

test('IPv4: the scanner agrees with the reference on 20,000 random dotted strings', () => {
  let seed = 42; // xorshift32: the same strings every run
  const rnd = (n: number) => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) % n;
  };
  let valid = 0;
  for (let i = 0; i < 20_000; i++) {
    // Mostly four parts of one to three digits; some of three or five parts, empty or four long, or an x.
    const parts: string[] = [];
    const count = rnd(8) === 0 ? 3 + 2 * rnd(2) : 4;
    for (let p = 0; p < count; p++) {
      let part = '';
      const len = rnd(10) === 0 ? rnd(5) : 1 + rnd(3);
      for (let j = 0; j < len; j++) part += rnd(40) === 0 ? 'x' : String(rnd(10));
      parts.push(part);
    }
    const s = parts.join('.');
    if (reference(s)) valid++;
    check(s);
  }
  assert.ok(valid > 100, `only ${valid} valid strings drawn`);
});
