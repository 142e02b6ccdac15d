// The userspace table in nf_tables netlink batches (src/platform/nftables:
// nlrule.ts, nlset.ts, nlencode.ts), without a kernel: every transaction the
// renderer writes encodes, and its rules compile to the expressions and
// registers `nft --debug=netlink` 1.0.6 showed for the same text. The kernel
// side (the same table through nft -f and through netlink, byte for byte):
// test/e2e/userspace-parity.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nftFamily, type NftFamily } from '../../dataplane/nftables/names.js';
import type { Operation } from '../../dataplane/nftables/objects.js';
import { TABLE_NAME } from '../../dataplane/userspace/index.js';
import { encodeBatch, UnencodableError } from '../nftables/nlencode.js';
import { parseRule } from '../../dataplane/nftables/ruleparse.js';
import { compileRule } from '../nftables/nlrule.js';
import { TYPE, type SetSchema } from '../nftables/nlset.js';
import { PACKET_FLOW_SCENARIOS } from '../../../test/cases/packetflow.js';
import { loadScenario, TABLE_KNOBS } from '../../../test/dataplane/userspace-fixtures.js';

test('every packet-flow scenario under every knob encodes as one batch', () => {
  for (const s of PACKET_FLOW_SCENARIOS)
    for (const knob of TABLE_KNOBS) {
      const { tx } = loadScenario(s, knob.config);
      assert.doesNotThrow(
        () => encodeBatch(tx.operations, nftFamily(s.family), new Map(), 1, TABLE_NAME),
        `${s.name} (${knob.name})`,
      );
    }
});

/** A rule's expressions as `nft --debug=netlink` prints them, in short. */
function exprs(rule: string, family: NftFamily): string[] {
  const body = parseRule(rule);
  assert.ok(body, rule);
  const c = compileRule(body, family);
  assert.ok(c, rule);
  return c.exprs.map((e) => {
    switch (e.k) {
      case 'meta':
        return `meta ${e.key} => ${e.dreg}`;
      case 'payload':
        return `payload ${e.len}b @${e.base}+${e.offset} => ${e.dreg}`;
      case 'lookup':
        return `lookup ${e.sreg} ${e.set}${e.dreg !== undefined ? ` => ${e.dreg}` : ''}`;
      case 'redir':
        return `redir proto ${e.regProto} flags ${e.flags}`;
      case 'nat':
        return `dnat ${e.family} addr ${e.regAddr} proto ${e.regProto} flags ${e.flags}`;
      default:
        return e.k;
    }
  });
}

test('port maps: registers as nft allocates them (the address first, then the key, 16-byte aligned)', () => {
  const proto = ['meta 16 => 1', 'lookup 1 __set%d'];
  assert.deepEqual(
    exprs('meta l4proto { tcp, udp } redirect to : ip daddr . meta l4proto . th dport map @service-portals', 'ip'),
    [
      ...proto,
      'payload 4b @1+16 => 1',
      'meta 16 => 9',
      'payload 2b @2+2 => 10',
      'lookup 1 service-portals => 1',
      'redir proto 1 flags 2',
    ],
  );
  assert.deepEqual(
    exprs('meta l4proto { tcp, udp } dnat to ip saddr : ip daddr . meta l4proto . th dport map @service-portals', 'ip'),
    [
      ...proto,
      'payload 4b @1+12 => 1',
      'payload 4b @1+16 => 2',
      'meta 16 => 13',
      'payload 2b @2+2 => 14',
      'lookup 2 service-portals => 2',
      'dnat 2 addr 1 proto 2 flags 2',
    ],
  );
  assert.deepEqual(
    exprs('meta l4proto { tcp, udp } redirect to : ip6 daddr . meta l4proto . th dport map @service-portals', 'ip6'),
    [
      ...proto,
      'payload 16b @1+24 => 1',
      'meta 16 => 2',
      'payload 2b @2+2 => 13',
      'lookup 1 service-portals => 1',
      'redir proto 1 flags 2',
    ],
  );
  assert.deepEqual(
    exprs(
      'meta l4proto { tcp, udp } dnat to ip6 saddr : ip6 daddr . meta l4proto . th dport map @service-portals',
      'ip6',
    ),
    [
      ...proto,
      'payload 16b @1+8 => 1',
      'payload 16b @1+24 => 2',
      'meta 16 => 3',
      'payload 2b @2+2 => 17',
      'lookup 2 service-portals => 2',
      'dnat 10 addr 1 proto 2 flags 2',
    ],
  );
  assert.deepEqual(exprs('meta l4proto { tcp, udp } dnat to ip saddr : meta l4proto . th dport map @np', 'ip'), [
    ...proto,
    'payload 4b @1+12 => 1',
    'meta 16 => 2',
    'payload 2b @2+2 => 13',
    'lookup 2 np => 2',
    'dnat 2 addr 1 proto 2 flags 2',
  ]);
});

test('an interval set of addresses is encoded only whole, in the batch that creates it', () => {
  const set: Operation = { verb: 'add', object: { kind: 'set', name: 's', type: 'ipv4_addr', flags: ['interval'] } };
  const el = (key: string): Operation => ({ verb: 'add', object: { kind: 'element', set: 's', key: [key] } });
  // As after a batch that created it: the encoder knows the set's schema.
  const known = (): Map<string, SetSchema> => new Map([['s', { fields: [TYPE.IPADDR], interval: true, data: 'none' }]]);
  const encode = (ops: Operation[]) => encodeBatch(ops, 'ip', known(), 1, TABLE_NAME);
  assert.doesNotThrow(() => encode([set, el('10.0.0.0/24'), el('10.0.1.0/24'), el('192.168.1.1')]));
  const refused = (ops: Operation[]) =>
    assert.throws(
      () => encode(ops),
      (e: unknown) => e instanceof UnencodableError && /interval set s|of s/.test(e.message),
    );
  refused([set, el('10.0.0.0/8'), el('10.1.0.0/16')]); // overlapping: nft refuses them too
  refused([el('10.0.0.0/24')]); // a set of an earlier batch: what it holds decides what nft sends
  refused([set, { verb: 'delete', object: { kind: 'element', set: 's', key: ['10.0.0.0/24'] } }]);
});
