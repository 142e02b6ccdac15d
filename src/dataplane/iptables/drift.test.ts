import assert from 'node:assert/strict';
import { test } from 'node:test';
import { natDrift, savedTable, SavedTableReader } from './drift.js';

const HEALTHY = `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SVC-AAAA - [0:0]
:FOREIGN - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A POSTROUTING -j FOREIGN
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-SVC-AAAA -j KUBE-SEP-BBBB
COMMIT
`;
const EXPECTED = new Set(['KUBE-SERVICES', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ', 'KUBE-SVC-AAAA']);

test('natDrift: nothing missing in a healthy table (foreign rules do not matter)', () => {
  assert.equal(natDrift(HEALTHY, EXPECTED), null);
  assert.equal(natDrift(`*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n${HEALTHY}`, EXPECTED), null);
});

test('natDrift: names the first sign of another actor', () => {
  assert.equal(
    natDrift(HEALTHY.replace(/^-A [^:\n]*\n/gm, ''), EXPECTED),
    'jump from OUTPUT to KUBE-SERVICES is missing',
  );
  assert.equal(
    natDrift(HEALTHY.replace(/^-A PREROUTING .*\n/m, ''), EXPECTED),
    'jump from PREROUTING to KUBE-SERVICES is missing',
  );
  assert.equal(natDrift(HEALTHY.replace(/^-A KUBE-MARK-MASQ .*\n/m, ''), EXPECTED), 'chain KUBE-MARK-MASQ is empty');
  assert.equal(natDrift(HEALTHY.replace(/^:KUBE-SVC-AAAA .*\n/m, ''), EXPECTED), 'chain KUBE-SVC-AAAA is missing');
  assert.equal(natDrift('', EXPECTED), 'jump from OUTPUT to KUBE-SERVICES is missing', 'no nat table at all');
});

test('SavedTableReader fed line by line reads the same table as the whole text, other tables ignored', () => {
  const text = `*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\nCOMMIT\n${HEALTHY}`;
  const r = new SavedTableReader('nat');
  for (const line of text.split('\n')) r.line(line);
  assert.deepEqual(r.table, savedTable(text, 'nat'));
  assert.ok(r.table.chains.has('KUBE-SVC-AAAA') && !r.table.chains.has('INPUT'));
  assert.equal(r.table.rules.get('POSTROUTING'), 2);
  assert.ok(r.table.lines.includes('-A POSTROUTING -j FOREIGN'));
  assert.equal(natDrift(r.table, EXPECTED), null);
});

test('natDrift: given their count, KUBE-SERVICES and KUBE-NODEPORTS must hold exactly that many rules', () => {
  const withTop = HEALTHY.replace(
    '-A KUBE-SVC-AAAA',
    '-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-AAAA\n-A KUBE-SVC-AAAA',
  );
  assert.equal(natDrift(withTop, EXPECTED, 1), null);
  assert.equal(natDrift(withTop, EXPECTED), null, 'not checked without a count');
  assert.equal(
    natDrift(HEALTHY, EXPECTED, 1),
    'chains KUBE-SERVICES and KUBE-NODEPORTS hold 0 rules, the last restore left 1',
  );
});
