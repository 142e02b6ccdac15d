import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { NftChange } from '../nftables/monitor.js';
import { iptablesChangeIsOurs, iptablesModeOnly, ipvsModeOnly, restoreSections } from './driftwatch.js';

const change = (table: string, what: string, name: string, jumps: string[] = []): NftChange => ({
  family: 'ip',
  table,
  what,
  name,
  deleted: what.startsWith('delete'),
  tableDeleted: what === 'delete table',
  jumpTargets: () => jumps,
});

test('our chains, jumps to them and the iptables tables themselves are ours; the rest is not', () => {
  assert.equal(iptablesChangeIsOurs(change('nat', 'delete rule', 'KUBE-SERVICES')), true, 'a flush of our chain');
  assert.equal(iptablesChangeIsOurs(change('filter', 'delete chain', 'KUBE-FORWARD')), true);
  assert.equal(iptablesChangeIsOurs(change('mangle', 'delete chain', 'KUBE-PROXY-CANARY')), true);
  assert.equal(iptablesChangeIsOurs(change('nat', 'delete table', '')), true);
  assert.equal(
    iptablesChangeIsOurs(change('nat', 'delete rule', 'PREROUTING', ['KUBE-SERVICES'])),
    true,
    'our jump from a built-in chain',
  );
  assert.equal(iptablesChangeIsOurs(change('nat', 'delete rule', 'PREROUTING', ['DOCKER'])), false);
  assert.equal(iptablesChangeIsOurs(change('nat', 'add rule', 'PREROUTING', ['KUBE-SERVICES'])), false);
  assert.equal(iptablesChangeIsOurs(change('filter', 'add chain', 'DOCKER-USER')), false);
  assert.equal(iptablesChangeIsOurs(change('mangle', 'add chain', 'KUBE-KUBELET-CANARY')), false, "the kubelet's");
  assert.equal(iptablesChangeIsOurs(change('mangle', 'add chain', 'KUBE-IPTABLES-HINT')), false, "the kubelet's");
  assert.equal(iptablesChangeIsOurs(change('kube-proxy', 'delete chain', 'KUBE-SERVICES')), false, 'not iptables');
  assert.equal(iptablesChangeIsOurs(change('raw', 'delete rule', 'PREROUTING', ['KUBE-X'])), false);
});

test("after a handover between iptables and IPVS modes, the other mode's chains going is not drift", () => {
  // iptables mode running: IPVS mode's leftovers go.
  const ipt = (c: NftChange) => iptablesChangeIsOurs(c, ipvsModeOnly);
  assert.equal(ipt(change('nat', 'delete chain', 'KUBE-NODE-PORT')), false);
  assert.equal(ipt(change('filter', 'delete rule', 'INPUT', ['KUBE-IPVS-FILTER'])), false);
  assert.equal(ipt(change('filter', 'delete rule', 'INPUT', ['KUBE-NODE-PORT'])), false);
  assert.equal(ipt(change('nat', 'delete rule', 'KUBE-SERVICES')), true, 'the shared chains stay ours');
  assert.equal(ipt(change('nat', 'delete chain', 'KUBE-NODEPORTS')), true);
  // IPVS mode running: iptables mode's leftovers go.
  const ipvs = (c: NftChange) => iptablesChangeIsOurs(c, iptablesModeOnly);
  assert.equal(ipvs(change('nat', 'delete chain', 'KUBE-SVC-AAAAAAAAAAAAAAAA')), false);
  assert.equal(
    ipvs(change('filter', 'delete chain', 'KUBE-SERVICES')),
    false,
    "filter KUBE-SERVICES is iptables mode's",
  );
  assert.equal(ipvs(change('filter', 'delete rule', 'FORWARD', ['KUBE-EXTERNAL-SERVICES'])), false);
  assert.equal(ipvs(change('nat', 'delete rule', 'KUBE-SERVICES')), true, 'nat KUBE-SERVICES is shared');
  assert.equal(ipvs(change('filter', 'delete chain', 'KUBE-IPVS-FILTER')), true);
});

test('restoreSections counts table headers at the start of lines, across pieces', () => {
  assert.equal(restoreSections(['*filter\n:A - [0:0]\nCOMMIT\n', '*nat\n-A X -j Y\n', 'COMMIT\n']), 2);
  assert.equal(restoreSections(['*filter\n', '-A X -m comment --comment "*nat"\nCOMMIT\n*mangle\nCOMMIT\n']), 2);
  assert.equal(restoreSections(['*filter\n-A X -j Y', ' -m comment\nCOMMIT\n', '', '*nat\nCOMMIT\n']), 2);
  assert.equal(restoreSections([]), 0);
});
