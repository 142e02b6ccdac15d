// The userspace Fake: its table (the nftables Fake of `kube-proxy-userspace`) refuses what the
// kernel refuses and applies a transaction all-or-nothing; its listener table keeps a listener's
// port across endpoint changes, as the real listeners do.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Endpoint } from '../../core/types.js';
import { FakeError } from '../nftables/fake.js';
import type { NftObject } from '../nftables/objects.js';
import { Transaction } from '../nftables/transaction.js';
import { Fake, FIRST_FAKE_PORT } from './fake.js';
import type { ListenerSpec } from './plan.js';
import { renderCleanup, TABLE_NAME, userspaceTransaction } from './rules.js';

const M: NftObject = { kind: 'map', name: 'm', type: 'ipv4_addr . inet_proto . inet_service : inet_service' };
const TABLE: NftObject[] = [{ kind: 'table' }, M, { kind: 'chain', name: 'c' }];

/** A transaction of our table adding `objects`. */
function tx(...objects: NftObject[]): Transaction {
  const t = userspaceTransaction('IPv4');
  for (const o of objects) t.add(o);
  return t;
}
const el = (set: string, key: string[], value?: string): NftObject => ({
  kind: 'element',
  set,
  key,
  ...(value !== undefined ? { value: [value] } : {}),
});

function refuses(fake: Fake, t: Transaction, re: RegExp): void {
  const before = fake.dump();
  assert.throws(
    () => fake.run(t),
    (e: Error & { code?: string }) => (e instanceof FakeError || e.code === 'KPT_INPUT_INVALID') && re.test(e.message),
  );
  assert.equal(fake.dump(), before, 'a refused transaction changes nothing');
}

const spec = (key: string, ...eps: string[]): ListenerSpec => ({
  key,
  servicePortKey: key,
  serviceKey: key,
  protocol: 'TCP',
  set: 'cluster',
  endpoints: eps.map((k) => ({ key: k }) as Endpoint),
  stickyMs: 0,
});

describe('userspace Fake', () => {
  it('applies a transaction whole; the next one replaces the table (add, delete, add)', () => {
    const f = new Fake('ip');
    f.run(tx(...TABLE, el('m', ['172.30.0.1', 'tcp', '80'], '40000')));
    assert.deepEqual(f.nft.sets.get('m')!.elements.get('172.30.0.1 . tcp . 80')!.value, ['40000']);
    const again = userspaceTransaction('IPv4').add({ kind: 'table' }).delete({ kind: 'table' });
    for (const o of TABLE) again.add(o);
    f.run(again);
    assert.equal(f.nft.sets.get('m')!.elements.size, 0);
    f.run(renderCleanup('IPv4'));
    assert.equal(f.nft.table, null);
  });

  it('refuses what the kernel refuses, all-or-nothing', () => {
    const f = new Fake('ip');
    refuses(f, tx({ kind: 'chain', name: 'c' }), /ENOENT: no such table/);
    refuses(f, userspaceTransaction('IPv4').delete({ kind: 'table' }), /ENOENT: no such table/);
    f.run(tx(...TABLE));
    refuses(
      f,
      tx(el('m', ['172.30.0.9', 'tcp', '80'], '1'), { kind: 'rule', chain: 'nope', rule: 'drop' }),
      /nope drop: ENOENT: no such chain/,
    );
    refuses(f, tx({ kind: 'rule', chain: 'c', rule: 'jump missing' }), /missing chain missing/);
    refuses(f, tx({ kind: 'rule', chain: 'c', rule: 'ip daddr @missing drop' }), /missing set missing/);
    refuses(f, tx(el('nope', ['1.2.3.4'])), /nope \{ 1\.2\.3\.4 \}: ENOENT: no such set or map/);
    refuses(f, tx(el('m', ['172.30.0.1', 'tcp'], '40000')), /key has 2 fields, m has 3/);
    refuses(f, tx(el('m', ['172.30.0.1', 'tcp', '80'], '70000')), /"70000" is not a valid port/);
    refuses(
      f,
      tx(el('m', ['172.30.0.1', 'tcp', '80'], '1'), el('m', ['172.30.0.1', 'tcp', '80'], '2')),
      /element exists with a different value/,
    );
    refuses(
      f,
      tx({ kind: 'chain', name: 'c', type: 'nat', hook: 'output', priority: -100 }),
      /chain exists with different type, hook or priority/,
    );
    refuses(f, tx({ kind: 'map', name: 'm', type: 'ipv4_addr : verdict' }), /exists with a different type/);
    refuses(f, new Transaction('ip6', TABLE_NAME).add({ kind: 'table' }), /transaction for ip6 kube-proxy-userspace/);
    refuses(f, new Transaction('ip', 'other').add({ kind: 'table' }), /fake holds ip kube-proxy-userspace/);
    refuses(f, tx({ kind: 'chain', name: 'bad name!' }), /invalid name/);
  });

  it('a verdict map checks its verdicts; a prefix needs an interval set', () => {
    const f = new Fake('ip');
    f.run(
      tx(
        { kind: 'table' },
        { kind: 'chain', name: 'reject-chain' },
        { kind: 'map', name: 'v', type: 'inet_proto . inet_service : verdict' },
      ),
    );
    f.run(tx(el('v', ['tcp', '80'], 'goto reject-chain'), el('v', ['udp', '53'], 'drop')));
    refuses(f, tx(el('v', ['tcp', '81'], 'goto nowhere')), /verdict to missing chain nowhere/);
    refuses(f, tx(el('v', ['tcp', '82'], 'maybe')), /"maybe" is not a verdict/);
    f.run(tx({ kind: 'set', name: 's', type: 'ipv4_addr' }));
    refuses(f, tx(el('s', ['10.0.0.0/8'])), /prefix 10\.0\.0\.0\/8 in s, which has no interval flag/);
    f.run(tx({ kind: 'set', name: 'i', type: 'ipv4_addr', flags: ['interval'] }, el('i', ['10.0.0.0/8'])));
    assert.deepEqual(f.nft.sets.get('i')!.def.flags, ['interval']);
  });

  it('a listener keeps its port while open and takes new endpoints', () => {
    const f = new Fake('ip');
    const a = f.listen(spec('a', '10.0.0.1:80'));
    const b = f.listen(spec('b', '10.0.0.2:80'));
    assert.deepEqual([a, b], [FIRST_FAKE_PORT, FIRST_FAKE_PORT + 1]);
    assert.equal(f.listen(spec('a', '10.0.0.1:80', '10.0.0.3:80')), a);
    assert.deepEqual(f.listenerOn('TCP', a)!.endpoints, ['10.0.0.1:80', '10.0.0.3:80']);
    assert.equal(f.listenerOn('UDP', a), undefined);
    f.close('a');
    assert.equal(f.listenerOn('TCP', a), undefined);
    assert.match(f.dump(), /^listener tcp :40001 b -> 10\.0\.0\.2:80$/m);
  });
});
