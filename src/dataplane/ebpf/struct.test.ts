// The struct codec on its own: C layout rules, what the generated encoders
// and decoders write and read, padding, text fields, refusals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ProxyError } from '../../core/errors.js';
import { addrBytes, defineStruct } from './struct.js';

const MIXED = defineStruct('mixed', {
  a: 'u8',
  b_val: 'u32',
  c: 'be16',
  pad: 'u16',
  d: 'u64',
  e: 'addr',
  f: 'be32',
  raw: 'u8[3]',
  name_text: 'char[6]',
});

test('fields are laid out as C lays them out: each at a multiple of its alignment, the size a multiple of the largest', () => {
  assert.deepEqual(
    MIXED.fields.map((f) => [f.name, f.offset, f.size]),
    [
      ['a', 0, 1],
      ['b_val', 4, 4],
      ['c', 8, 2],
      ['pad', 10, 2],
      ['d', 16, 8],
      ['e', 24, 16],
      ['f', 40, 4],
      ['raw', 44, 3],
      ['name_text', 47, 6],
    ],
  );
  assert.equal(MIXED.align, 8);
  assert.equal(MIXED.size, 56);
  assert.equal(defineStruct('odd', { a: 'u16', b: 'u8' }).size, 4);
  assert.equal(defineStruct('addr_then_u8', { a: 'addr', b: 'u8' }).size, 20, 'union kpt_addr aligns to 4');
});

test('encode writes each field in its byte order; decode reads it back, padding left out', () => {
  const v = {
    a: 0xab,
    bVal: 0x01020304,
    c: 0x0506,
    d: 0x0708090a0b0c0d0en,
    e: '10.1.2.3',
    f: 0x11223344,
    raw: new Uint8Array([1, 2, 3]),
    nameText: 'abc',
  };
  const b = MIXED.encode(v);
  assert.equal(b.length, 56);
  assert.deepEqual([...b.subarray(0, 12)], [0xab, 0, 0, 0, 4, 3, 2, 1, 5, 6, 0, 0]);
  assert.deepEqual([...b.subarray(16, 24)], [0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 9, 8, 7]);
  assert.deepEqual(b.subarray(24, 40), addrBytes('10.1.2.3'));
  assert.deepEqual([...b.subarray(40, 56)], [0x11, 0x22, 0x33, 0x44, 1, 2, 3, 97, 98, 99, 0, 0, 0, 0, 0, 0]);
  assert.deepEqual(MIXED.decode(b), v);
});

test('addresses: IPv6 as is, IPv4 mapped whatever its spelling; a non-address is refused', () => {
  const S = defineStruct('a', { x: 'addr' });
  assert.deepEqual(S.encode({ x: 'fd00::1' }), addrBytes('fd00::1'));
  assert.equal(S.decode(S.encode({ x: '::ffff:10.0.0.1' })).x, '10.0.0.1');
  assert.throws(
    () => S.encode({ x: '10.0.0' }),
    (e) => e instanceof ProxyError && e.code === 'KPT_INPUT_INVALID',
  );
});

test('text is cut to leave its NUL, and decodes up to the NUL', () => {
  const S = defineStruct('t', { s: 'char[4]' });
  const b = S.encode({ s: 'abcdef' });
  assert.deepEqual([...b], [97, 98, 99, 0]);
  assert.equal(S.decode(b).s, 'abc');
  assert.equal(S.decode(new Uint8Array([120, 121, 122, 119])).s, 'xyzw', 'no NUL: the whole field');
});

test('decoding fewer bytes than the struct holds is refused', () => {
  assert.throws(
    () => MIXED.decode(new Uint8Array(55)),
    (e) => e instanceof ProxyError && e.code === 'KPT_INPUT_INVALID',
  );
});
