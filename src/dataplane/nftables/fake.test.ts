// The Fake enforces the kernel refusals the renderer must respect.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Fake, FakeError } from './fake.js';
import { Transaction } from './transaction.js';

function base(): Transaction {
  return new Transaction('ip')
    .add({ kind: 'table', comment: 'rules for kube-proxy' })
    .add({ kind: 'chain', name: 'nat-prerouting', type: 'nat', hook: 'prerouting', priority: -100 })
    .add({ kind: 'chain', name: 'services' })
    .add({ kind: 'chain', name: 'svc-a' })
    .add({ kind: 'map', name: 'service-ips', type: 'ipv4_addr . inet_proto . inet_service : verdict' })
    .add({ kind: 'set', name: 'cluster-ips', type: 'ipv4_addr' })
    .add({ kind: 'rule', chain: 'nat-prerouting', rule: 'jump services' })
    .add({ kind: 'rule', chain: 'services', rule: 'ip daddr . meta l4proto . th dport vmap @service-ips' })
    .add({ kind: 'element', set: 'service-ips', key: ['10.0.0.1', 'tcp', '80'], value: ['goto svc-a'] });
}
const reason = (r: FakeError['reason']) => (e: unknown) => e instanceof FakeError && e.reason === r;

test('a failing transaction changes nothing', () => {
  const f = new Fake('ip');
  f.run(base());
  const before = f.dump();
  const tx = new Transaction('ip')
    .add({ kind: 'element', set: 'cluster-ips', key: ['10.0.0.1'] })
    .add({ kind: 'rule', chain: 'nope', rule: 'drop' });
  assert.throws(() => f.run(tx), reason('ENOENT'));
  assert.equal(f.dump(), before);
});

test('referenced chains and sets cannot be deleted; flushed-then-unreferenced ones can', () => {
  const f = new Fake('ip');
  f.run(base());
  assert.throws(() => f.run(new Transaction('ip').delete({ kind: 'chain', name: 'svc-a' })), reason('EBUSY'));
  assert.throws(
    () => f.run(new Transaction('ip').delete({ kind: 'map', name: 'service-ips', type: '' })),
    reason('EBUSY'),
  );
  f.run(
    new Transaction('ip')
      .delete({ kind: 'element', set: 'service-ips', key: ['10.0.0.1', 'tcp', '80'] })
      .delete({ kind: 'chain', name: 'svc-a' }),
  );
  assert.equal(f.chains.has('svc-a'), false);
});

test('map elements re-added with another value are refused; the same value is a no-op', () => {
  const f = new Fake('ip');
  f.run(base().add({ kind: 'chain', name: 'svc-b' }));
  f.run(
    new Transaction('ip').add({
      kind: 'element',
      set: 'service-ips',
      key: ['10.0.0.1', 'tcp', '80'],
      value: ['goto svc-a'],
    }),
  );
  assert.throws(
    () =>
      f.run(
        new Transaction('ip').add({
          kind: 'element',
          set: 'service-ips',
          key: ['10.0.0.1', 'tcp', '80'],
          value: ['goto svc-b'],
        }),
      ),
    reason('EEXIST'),
  );
});

test('keys must fit the set type; verdicts must point at existing chains', () => {
  const f = new Fake('ip');
  f.run(base());
  assert.throws(
    () => f.run(new Transaction('ip').add({ kind: 'element', set: 'cluster-ips', key: ['fd00::1'] })),
    reason('EINVAL'),
  );
  assert.throws(
    () =>
      f.run(
        new Transaction('ip').add({ kind: 'element', set: 'service-ips', key: ['10.0.0.1', 'tcp'], value: ['drop'] }),
      ),
    reason('EINVAL'),
  );
  assert.throws(
    () =>
      f.run(
        new Transaction('ip').add({
          kind: 'element',
          set: 'service-ips',
          key: ['10.0.0.2', 'tcp', '80'],
          value: ['goto missing'],
        }),
      ),
    reason('ENOENT'),
  );
});

test('base chain priority cannot change in place; add+delete+add recreates it', () => {
  const f = new Fake('ip');
  f.run(base());
  const moved = { kind: 'chain', name: 'nat-prerouting', type: 'nat', hook: 'prerouting', priority: -90 } as const;
  assert.throws(() => f.run(new Transaction('ip').add(moved)), reason('EEXIST'));
  f.run(
    new Transaction('ip')
      .add({ kind: 'chain', name: 'nat-prerouting' })
      .delete({ kind: 'chain', name: 'nat-prerouting' })
      .add(moved),
  );
  assert.match(f.dump(), /nat-prerouting \{ type nat hook prerouting priority -90 ; \}/);
});

test('building errors surface at run, not while building', () => {
  const tx = new Transaction('ip').add({ kind: 'chain', name: 'bad name' }).add({ kind: 'table' });
  assert.equal(tx.numOperations, 1);
  assert.throws(
    () => new Fake('ip').run(tx),
    (e: unknown) => (e as { code?: string }).code === 'KPT_INPUT_INVALID',
  );
});

test('toString is the exact nft -f script', () => {
  const tx = new Transaction('ip6')
    .add({ kind: 'set', name: 'aff', type: 'ipv6_addr', flags: ['dynamic', 'timeout'], timeoutSeconds: 60 })
    .add({ kind: 'element', set: 'm', key: ['fd00::1', 'udp', '53'], value: ['drop'], comment: 'ns/svc:dns' })
    .delete({ kind: 'element', set: 'm', key: ['fd00::1', 'udp', '53'], value: ['drop'] })
    .flush({ kind: 'chain', name: 'c' });
  assert.equal(
    tx.toString(),
    [
      'add set ip6 kube-proxy aff { type ipv6_addr ; flags dynamic,timeout ; timeout 60s ; }',
      'add element ip6 kube-proxy m { fd00::1 . udp . 53 comment "ns/svc:dns" : drop }',
      'delete element ip6 kube-proxy m { fd00::1 . udp . 53 }',
      'flush chain ip6 kube-proxy c',
      '',
    ].join('\n'),
  );
});

test('comments over 128 bytes are refused as nft refuses them; 128 is fine', () => {
  const f = new Fake('ip');
  f.run(base());
  const el = (comment: string) =>
    new Transaction('ip').add({ kind: 'element', set: 'cluster-ips', key: ['10.0.0.9'], comment });
  assert.throws(() => f.run(el('x'.repeat(129))), reason('EINVAL'));
  assert.throws(() => f.run(el('é'.repeat(65))), reason('EINVAL'), 'bytes count, not characters');
  f.run(el('x'.repeat(128)));
  assert.equal(f.listElements('cluster-ips').find((e) => e.key[0] === '10.0.0.9')?.comment, 'x'.repeat(128));
});
