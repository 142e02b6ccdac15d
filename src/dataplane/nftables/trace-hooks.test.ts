// The nftables tracer on a table other than kube-proxy (the userspace mode's
// shape): chains named by `hooks`, filter before nat output, ports from
// named maps (`redirect to :`, `dnat to ip saddr :`), `meta l4proto { ... }`
// and address sets holding prefixes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Fake } from './fake.js';
import type { NftObject } from './objects.js';
import { trace, type HookChains } from './trace.js';
import { Transaction } from './transaction.js';

const NODE = '192.168.0.2';
const LOCAL = ['127.0.0.1', NODE];
const HOOKS: HookChains = {
  preDnat: ['out-filter', null],
  dnat: ['host', 'arriving'],
  output: null,
  input: 'in-filter',
  forward: null,
  postrouting: null,
};

function table(): Fake {
  const objects: NftObject[] = [
    { kind: 'table' },
    { kind: 'chain', name: 'arriving', type: 'nat', hook: 'prerouting', priority: -100 },
    { kind: 'chain', name: 'host', type: 'nat', hook: 'output', priority: -100 },
    { kind: 'chain', name: 'out-filter', type: 'filter', hook: 'output', priority: -110 },
    { kind: 'chain', name: 'in-filter', type: 'filter', hook: 'input', priority: -110 },
    { kind: 'map', name: 'ports', type: 'ipv4_addr . inet_proto . inet_service : inet_service' },
    { kind: 'set', name: 'blocked', type: 'ipv4_addr', flags: ['interval'] },
    {
      kind: 'rule',
      chain: 'arriving',
      rule: 'meta l4proto { tcp, udp } redirect to : ip daddr . meta l4proto . th dport map @ports',
    },
    {
      kind: 'rule',
      chain: 'host',
      rule: 'meta l4proto { tcp, udp } dnat to ip saddr : ip daddr . meta l4proto . th dport map @ports',
    },
    { kind: 'rule', chain: 'out-filter', rule: 'ip daddr @blocked drop' },
    { kind: 'element', set: 'ports', key: ['10.96.0.10', 'tcp', '80'], value: ['40001'] },
    { kind: 'element', set: 'ports', key: ['10.96.0.10', 'sctp', '80'], value: ['40002'] },
    { kind: 'element', set: 'blocked', key: ['10.97.0.0/16'] },
  ];
  const tx = new Transaction('ip', 'other');
  for (const o of objects) tx.add(o);
  const fake = new Fake('ip', 'other');
  fake.run(tx);
  return fake;
}

test('hooks name the chains; a redirect sends an arriving packet to the node, a dnat to its sender', () => {
  const fake = table();
  const arriving = trace(fake, { src: '10.0.0.5', dst: '10.96.0.10', port: 80 }, LOCAL, { hooks: HOOKS });
  assert.deepEqual(
    [arriving.verdict, arriving.output, arriving.steps.map((s) => s.chain)],
    ['DNAT', `${NODE}:40001`, ['arriving']],
  );
  const own = trace(fake, { src: NODE, dst: '10.96.0.10', port: 80 }, LOCAL, { hooks: HOOKS });
  assert.deepEqual([own.output, own.steps.map((s) => s.chain)], [`${NODE}:40001`, ['host']]);
});

test('no element for the packet, or a protocol outside the set: the rule does not match', () => {
  const fake = table();
  for (const packet of [
    { src: '10.0.0.5', dst: '10.96.0.11', port: 80 },
    { src: '10.0.0.5', dst: '10.96.0.10', port: 80, protocol: 'SCTP' as const },
  ]) {
    const r = trace(fake, packet, LOCAL, { hooks: HOOKS });
    assert.deepEqual([r.verdict, r.matched], ['NONE', []], JSON.stringify(packet));
  }
});

test('an address set matches the prefixes it holds; filter before nat ends the walk', () => {
  const fake = table();
  for (const dst of ['10.97.0.0', '10.97.3.4', '10.97.255.255'])
    assert.equal(trace(fake, { src: NODE, dst, port: 80 }, LOCAL, { hooks: HOOKS }).verdict, 'DROP', dst);
  for (const dst of ['10.96.255.255', '10.98.0.0'])
    assert.equal(trace(fake, { src: NODE, dst, port: 80 }, LOCAL, { hooks: HOOKS }).verdict, 'NONE', dst);
});

test('without hooks the kube-proxy chains are walked: strict mode refuses a table that has none', () => {
  assert.throws(() => trace(table(), { src: '10.0.0.5', dst: '10.96.0.10', port: 80 }, LOCAL), /no chain/);
});
