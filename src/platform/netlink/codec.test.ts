import { test } from 'node:test';
import assert from 'node:assert/strict';
import { attr, Attrs, encodeAttrs, nested, str, u16, u16be, u32, u32be, u8 } from './attr.js';
import { encodeMessage, errorCode, NLMSG_ERROR, parseMessages } from './message.js';
import { extAckMessage } from './socket.js';

test('attributes: header in host order, payload padded to 4 bytes, nested flag on lists', () => {
  const b = encodeAttrs([attr(1, u8(7)), nested(2, [attr(3, u16be(80)), attr(4, str('rr'))])]);
  assert.deepEqual(
    [...b],
    [
      5,
      0,
      1,
      0,
      7,
      0,
      0,
      0, // len 5, type 1, one byte + 3 padding
      20,
      0,
      2,
      0x80, // nested: 4 + 8 + 8
      6,
      0,
      3,
      0,
      0,
      80,
      0,
      0, // port 80 big-endian, padded
      7,
      0,
      4,
      0,
      0x72,
      0x72,
      0,
      0, // "rr\0" padded
    ],
  );
});

test('attributes decode back, including nested lists and the last of repeated types', () => {
  const b = encodeAttrs([
    attr(1, u32(0xdeadbeef)),
    attr(2, u32be(0x01020304)),
    attr(5, u16(6)),
    nested(3, [attr(1, str('kube-ipvs0')), attr(2, u8(1))]),
    attr(4, u8(1)),
    attr(4, u8(2)),
  ]);
  const a = new Attrs(b);
  assert.equal(a.u32(1), 0xdeadbeef);
  assert.equal(a.u32be(2), 0x01020304);
  assert.equal(a.u16(5), 6);
  assert.equal(a.nested(3)?.str(1), 'kube-ipvs0');
  assert.equal(a.nested(3)?.u8(2), 1);
  assert.equal(a.u8(4), 2);
  assert.equal(a.entries.filter((e) => e.type === 4).length, 2);
  assert.equal(a.u32(99), undefined);
});

test('a truncated attribute list keeps what parsed and stops', () => {
  const b = encodeAttrs([attr(1, u32(1)), attr(2, u32(2))]);
  const a = new Attrs(b, 0, b.length - 2);
  assert.equal(a.u32(1), 1);
  assert.equal(a.has(2), false);
});

test('messages: header fields, family header padded, several per datagram', () => {
  const m1 = encodeMessage(0x10, 0x5, 42, Buffer.from([1, 2, 3]), [attr(1, u32(9))]);
  assert.equal(m1.readUInt32LE(0), m1.length);
  assert.equal(m1.length, 16 + 4 + 8);
  const m2 = encodeMessage(NLMSG_ERROR, 0, 43, Buffer.from([0xef, 0xff, 0xff, 0xff])); // -17
  const got = parseMessages(Buffer.concat([m1, m2]));
  assert.deepEqual(
    got.map((m) => [m.type, m.flags, m.seq]),
    [
      [0x10, 5, 42],
      [NLMSG_ERROR, 0, 43],
    ],
  );
  assert.equal(new Attrs(got[0]!.payload, 4).u32(1), 9);
  assert.equal(errorCode(got[1]!), 17);
});

test('an extended ack yields the kernel message', () => {
  // error -22, capped original header (16 bytes), then NLMSGERR_ATTR_MSG
  const hdr = Buffer.alloc(20);
  hdr.writeInt32LE(-22, 0);
  hdr.writeUInt32LE(16, 4);
  const tlv = encodeAttrs([attr(1, str('bad scheduler'))]);
  const m = parseMessages(encodeMessage(NLMSG_ERROR, 0x100 | 0x200, 1, Buffer.concat([hdr, tlv])))[0]!;
  assert.equal(errorCode(m), 22);
  assert.equal(extAckMessage(m), 'bad scheduler');
});
