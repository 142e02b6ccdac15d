import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { NftChange } from '../nftables/monitor.js';
import { iptablesChangeIsOurs, restoreSections } from './driftwatch.js';

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

test('restoreSections counts table headers at the start of lines, across pieces', () => {
  assert.equal(restoreSections(['*filter\n:A - [0:0]\nCOMMIT\n', '*nat\n-A X -j Y\n', 'COMMIT\n']), 2);
  assert.equal(restoreSections(['*filter\n', '-A X -m comment --comment "*nat"\nCOMMIT\n*mangle\nCOMMIT\n']), 2);
  assert.equal(restoreSections(['*filter\n-A X -j Y', ' -m comment\nCOMMIT\n', '', '*nat\nCOMMIT\n']), 2);
  assert.equal(restoreSections([]), 0);
});
