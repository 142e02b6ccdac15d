// The ebpf mode's masquerade table, built of the nftables mode's objects:
// the nftables Fake takes it as the kernel does, again and again (it replaces
// itself), and its rule is the nftables mode's masquerading rule. The real
// kernel runs it in test/e2e/ebpf-packets.test.ts and ebpf-cluster.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Fake } from '../nftables/fake.js';
import { deleteMasqueradeTable, MASQ_CHAIN, MASQ_TABLE, masqueradeTable } from './masq.js';

test('the masquerade table replaces itself and holds one rule: marked packets are masqueraded fully-random', () => {
  for (const [family, fam] of [
    ['IPv4', 'ip'],
    ['IPv6', 'ip6'],
  ] as const) {
    const fake = new Fake(fam, MASQ_TABLE);
    fake.run(masqueradeTable(family, 0x4000));
    const once = fake.dump();
    fake.run(masqueradeTable(family, 0x4000));
    assert.equal(fake.dump(), once, 'running it again leaves the same table');
    const chain = fake.chains.get(MASQ_CHAIN)!;
    assert.equal(chain.chain.hook, 'postrouting');
    assert.equal(chain.chain.type, 'nat');
    assert.deepEqual(
      chain.rules.map((r) => r.rule),
      ['mark and 0x00004000 != 0 mark set mark xor 0x00004000 masquerade fully-random'],
    );
    fake.run(masqueradeTable(family, 0x8000));
    assert.match(fake.dump(), /mark and 0x00008000 != 0 mark set mark xor 0x00008000/, 'another mark replaces it');
    fake.run(deleteMasqueradeTable(family));
    assert.equal(fake.table, null);
    fake.run(deleteMasqueradeTable(family));
    assert.equal(fake.table, null, 'deleting an absent table is no error');
  }
});
