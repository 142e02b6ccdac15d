// The proxy's half of the tc programs' first check (filter.ts): which bits a
// ServiceCIDR sets, and the counting that keeps a bit two keys share. That
// the programs compute the same bits is shown in test/e2e/ebpf-exit.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as F from './filter.js';
import { addrBytes, encodeAddrKey, encodeLpmKey } from './layout.js';

const addrBit = (ip: string) => F.hotAddrBit(addrBytes(ip));
const bucketBit = (ip: string) => F.filterHash(F.bucketFold(addrBytes(ip), ip.includes(':')), F.HOT_BITS_LOG);

test('a ServiceCIDR sets the bit of every bucket it meets, and none of a bucket outside it', () => {
  const v4 = F.hotCidrBits('10.96.0.0', 12);
  assert.ok(v4 !== 'all');
  const inside = Array.from({ length: 16 }, (_, i) => bucketBit(`10.${96 + i}.${i * 7}.${i}`));
  assert.deepEqual([...v4].sort(), [...new Set(inside)].sort(), 'the /16s 10.96 .. 10.111');
  for (const ip of ['10.95.255.255', '10.112.0.0', '10.0.1.2', '192.168.0.1'])
    assert.ok(!v4.includes(bucketBit(ip)), `${ip} is outside`);
  assert.deepEqual(F.hotCidrBits('10.96.5.0', 24), [bucketBit('10.96.5.77')], 'narrower than a bucket: its bucket');
  assert.equal(F.hotCidrBits('10.0.0.0', 7), 'all', 'more than 256 buckets');
  assert.equal((F.hotCidrBits('10.0.0.0', 8) as number[]).length, 256);

  assert.deepEqual(F.hotCidrBits('fd00:10:96::', 108), [bucketBit('fd00:10:96::ffff')]);
  const v6 = F.hotCidrBits('fd00:10:96::', 56);
  assert.ok(v6 !== 'all');
  assert.equal(v6.length, 256);
  assert.ok(v6.includes(bucketBit('fd00:10:96:ff::1')));
  assert.ok(!v6.includes(bucketBit('fd00:10:244:1::1')), 'a pod /64 beside it');
  assert.equal(F.hotCidrBits('fd00::', 48), 'all');
});

test('kpt_hot counts the keys of a bit: one of two keys sharing it gone keeps it', () => {
  // Two addresses whose bits collide (the bitmap has 65536 bits: a few hundred addresses find one).
  const byBit = new Map<number, string>();
  let pair: [string, string] | null = null;
  for (let i = 0; pair === null; i++) {
    const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    const other = byBit.get(addrBit(ip));
    if (other) pair = [other, ip];
    else byBit.set(addrBit(ip), ip);
  }
  const [a, b] = pair;
  const h = addrBit(a);
  const bits = new F.HotBits();
  const key = (ip: string) => F.hotBitsOfKey('addrs', encodeAddrKey(ip));
  bits.add(key(a));
  bits.add(key(b));
  bits.remove(key(a));
  assert.ok(bits.has(h), `${b} still needs the bit it shares with ${a}`);
  bits.remove(key(b));
  assert.ok(!bits.has(h));
  assert.equal(
    bits.word(h >> 6).every((x) => x === 0),
    true,
    'the word is empty again',
  );
  bits.remove(key(b)); // a key removed twice (a write that failed and was rebuilt) does not go negative
  bits.add(key(a));
  assert.ok(bits.has(h));
});

test('a ServiceCIDR too wide for buckets makes the check look at every packet until it goes', () => {
  const bits = new F.HotBits();
  assert.equal(bits.header(), F.HOT_VALID);
  const wide = F.hotBitsOfKey('svcCidrs', encodeLpmKey({ addr: '10.0.0.0', prefix: 4 }));
  assert.equal(wide, 'all');
  bits.add(wide);
  assert.equal(bits.header(), F.HOT_VALID | F.HOT_ALL);
  bits.remove(wide);
  assert.equal(bits.header(), F.HOT_VALID);
});
