// The Fake's kernel semantics, each one a refusal or behaviour the real maps
// have (test/e2e/ebpf-programs.test.ts checks the same operations against
// the kernel).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ERRNO, Fake, FakeError } from './fake.js';
import * as L from './layout.js';

const errno = (fn: () => void): number => {
  try {
    fn();
  } catch (e) {
    if (e instanceof FakeError) return e.errno;
    throw e;
  }
  return 0;
};

test('keys and values must have the map sizes (EINVAL)', () => {
  const f = new Fake();
  assert.equal(
    errno(() => f.apply([{ map: 'sets', op: 'update', key: new Uint8Array(3), value: L.encodeSetValue(1) }])),
    ERRNO.EINVAL,
  );
  assert.equal(
    errno(() => f.apply([{ map: 'sets', op: 'update', key: L.encodeU32(1), value: new Uint8Array(4) }])),
    ERRNO.EINVAL,
  );
  assert.equal(
    errno(() => f.apply([{ map: 'sets', op: 'update', key: L.encodeU32(1), value: L.encodeSetValue(1) }])),
    0,
  );
});

test('a full hash map refuses a new key (E2BIG) but takes an update of an existing one', () => {
  const f = new Fake({ maxEntries: { sets: 2 } });
  const put = (id: number, n: number) => () =>
    f.apply([{ map: 'sets', op: 'update', key: L.encodeU32(id), value: L.encodeSetValue(n) }]);
  put(1, 1)();
  put(2, 1)();
  assert.equal(errno(put(3, 1)), ERRNO.E2BIG);
  assert.equal(errno(put(2, 5)), 0);
  assert.equal(L.decodeSetValue(f.lookup('sets', L.encodeU32(2))!).count, 5);
});

test('a full LRU map evicts the least recently used entry; a lookup counts as use', () => {
  const f = new Fake({ maxEntries: { affinity: 2 } });
  const key = (c: string) => L.encodeAffKey({ client: c, svcId: 1 });
  const val = L.encodeAffValue({ addr: '10.0.0.1', port: 80, lastNs: 1n });
  f.apply([
    { map: 'affinity', op: 'update', key: key('1.1.1.1'), value: val },
    { map: 'affinity', op: 'update', key: key('2.2.2.2'), value: val },
  ]);
  assert.ok(f.lookup('affinity', key('1.1.1.1'))); // 1.1.1.1 is now the most recent
  f.apply([{ map: 'affinity', op: 'update', key: key('3.3.3.3'), value: val }]);
  assert.equal(f.lookup('affinity', key('2.2.2.2')), null, 'the least recently used went');
  assert.ok(f.lookup('affinity', key('1.1.1.1')));
  assert.ok(f.lookup('affinity', key('3.3.3.3')));
});

test('an LPM trie answers the longest prefix; prefix lengths beyond the key are refused', () => {
  const f = new Fake();
  const one = L.encodeU8(1);
  f.apply([
    { map: 'lbSrc', op: 'update', key: L.encodeLpmSvcKey({ svcId: 7, addr: '203.0.113.0', prefix: 25 }), value: one },
    { map: 'lbSrc', op: 'update', key: L.encodeLpmSvcKey({ svcId: 8, addr: '0.0.0.0', prefix: 0 }), value: one },
  ]);
  const hit = (svcId: number, ip: string) =>
    f.lookup('lbSrc', L.encodeLpmSvcKey({ svcId, addr: ip, prefix: 32 })) !== null;
  assert.equal(hit(7, '203.0.113.2'), true);
  assert.equal(hit(7, '203.0.113.130'), false, 'outside the /25');
  assert.equal(hit(9, '203.0.113.2'), false, 'another service id never matches');
  assert.equal(hit(8, '198.51.100.1'), true, 'a /0 range of svc 8 holds every IPv4 source');
  assert.equal(hit(8, '2001:db8::1'), false, 'but no IPv6 source: IPv4 lives under ::ffff:0:0/96');
  const tooLong = L.encodeLpmKey({ addr: '10.0.0.0', prefix: 8 });
  new DataView(tooLong.buffer).setUint32(0, 129, true);
  assert.equal(
    errno(() => f.apply([{ map: 'podCidrs', op: 'update', key: tooLong, value: one }])),
    ERRNO.EINVAL,
  );
});

test('an array has every index, zero-filled; out of range is E2BIG and nothing can be deleted', () => {
  const f = new Fake();
  assert.deepEqual(L.decodeCfgValue(f.lookup('cfg', L.encodeU32(1))!), { mark: 0, flags: 0, netnsCookie: 0n });
  const v = L.encodeCfgValue({ mark: 0x4000, flags: L.CFG_ENABLED, netnsCookie: 5n });
  assert.equal(
    errno(() => f.apply([{ map: 'cfg', op: 'update', key: L.encodeU32(2), value: v }])),
    ERRNO.E2BIG,
  );
  assert.equal(
    errno(() => f.apply([{ map: 'cfg', op: 'delete', key: L.encodeU32(0) }])),
    ERRNO.EINVAL,
  );
});

test('deleting an absent key is ENOENT; a failed batch keeps what ran before it', () => {
  const f = new Fake();
  const k = L.encodeU32(4);
  assert.equal(
    errno(() =>
      f.apply([
        { map: 'sets', op: 'update', key: k, value: L.encodeSetValue(2) },
        { map: 'sets', op: 'delete', key: L.encodeU32(5) },
      ]),
    ),
    ERRNO.ENOENT,
  );
  assert.ok(f.lookup('sets', k), 'the update before the failure stays, as in the kernel');
});

test('print lists rendered maps decoded and sorted', () => {
  const f = new Fake();
  f.apply([
    {
      map: 'svc',
      op: 'update',
      key: L.encodeSvcKey({ addr: '10.96.0.10', port: 80, proto: 'TCP' }),
      value: L.encodeSvcValue({
        svcId: 1,
        clusterSet: 2,
        localSet: 0,
        affinitySecs: 0,
        flags: 0,
        kind: 'clusterIP',
        algo: 'random',
      }),
    },
    { map: 'addrs', op: 'update', key: L.encodeAddrKey('10.96.0.10'), value: L.encodeU32(L.ADDR_SERVICE) },
  ]);
  assert.equal(
    f.print(),
    [
      'kpt_svc:',
      '  10.96.0.10:80/TCP => svc 1 clusterIP cluster-set 2 local-set 0 random 0',
      'kpt_addrs:',
      '  10.96.0.10 => service',
    ].join('\n'),
  );
});
