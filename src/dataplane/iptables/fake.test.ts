// The fake must enforce what iptables-restore --noflush enforces, or tests
// built on it prove nothing.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hasCode } from '../../core/errors.js';
import { Fake } from './fake.js';
import { chainsFromSave } from './jumps.js';

const base = `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SEP-A - [0:0]
-A KUBE-SERVICES -m comment --comment "ns/a cluster IP" -d 172.30.0.1 -p tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SVC-A -j KUBE-SEP-A
-A KUBE-SEP-A -m tcp -p tcp -j DNAT --to-destination 10.0.0.1:80
COMMIT
`;

function rejects(fake: Fake, text: string, re: RegExp): void {
  const before = fake.save();
  assert.throws(
    () => fake.restore(text),
    (e: unknown) => hasCode(e, 'KPT_EXEC_FAILED') && re.test((e as Error).message),
  );
  assert.equal(fake.save(), before, 'a rejected restore changes nothing');
}

test('restore creates chains and rules; save prints built-ins first, then user chains sorted', () => {
  const f = new Fake();
  f.restore(base);
  assert.equal(
    f.save('nat'),
    `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SEP-A - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
-A KUBE-SEP-A -m tcp -p tcp -j DNAT --to-destination 10.0.0.1:80
-A KUBE-SERVICES -m comment --comment "ns/a cluster IP" -d 172.30.0.1 -p tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SVC-A -j KUBE-SEP-A
COMMIT
`,
  );
  assert.deepEqual(chainsFromSave(f.save(), 'nat').sort(), [
    'INPUT',
    'KUBE-SEP-A',
    'KUBE-SERVICES',
    'KUBE-SVC-A',
    'OUTPUT',
    'POSTROUTING',
    'PREROUTING',
  ]);
});

test('--noflush: declared chains are flushed, undeclared chains and built-in rules are kept', () => {
  const f = new Fake();
  f.restore(base);
  f.ensureRule('prepend', 'nat', 'PREROUTING', [
    '-m',
    'comment',
    '--comment',
    'kubernetes service portals',
    '-j',
    'KUBE-SERVICES',
  ]);
  f.restore('*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-A\nCOMMIT\n');
  assert.deepEqual(f.rules('nat', 'KUBE-SERVICES'), ['-j KUBE-SVC-A']);
  assert.deepEqual(f.rules('nat', 'KUBE-SVC-A'), ['-j KUBE-SEP-A'], 'undeclared chain untouched');
  assert.deepEqual(
    f.rules('nat', 'PREROUTING'),
    ['-m comment --comment "kubernetes service portals" -j KUBE-SERVICES'],
    'built-in keeps foreign rules',
  );
  // without --noflush the table is replaced
  f.restore('*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n', { noflush: false });
  assert.equal(f.hasChain('nat', 'KUBE-SVC-A'), false);
  assert.deepEqual(f.rules('nat', 'PREROUTING'), []);
});

test('-X deletes a flushed, unreferenced chain', () => {
  const f = new Fake();
  f.restore(base);
  f.restore(
    '*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-A - [0:0]\n:KUBE-SEP-A - [0:0]\n-X KUBE-SVC-A\n-X KUBE-SEP-A\nCOMMIT\n',
  );
  assert.equal(f.hasChain('nat', 'KUBE-SVC-A'), false);
  assert.equal(f.hasChain('nat', 'KUBE-SEP-A'), false);
  assert.deepEqual(f.rules('nat', 'KUBE-SERVICES'), []);
});

test('invalid input is rejected and leaves the table unchanged', () => {
  const f = new Fake();
  f.restore(base);
  rejects(
    f,
    '*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-NOPE\nCOMMIT\n',
    /unknown chain or target KUBE-SVC-NOPE/,
  );
  rejects(f, '*nat\n:KUBE-SEP-A - [0:0]\n-X KUBE-SEP-A\nCOMMIT\n', /KUBE-SEP-A is referenced/);
  rejects(f, '*nat\n-X KUBE-SVC-A\nCOMMIT\n', /not empty/);
  rejects(f, '*nat\n-A KUBE-MISSING -j ACCEPT\nCOMMIT\n', /no chain KUBE-MISSING/);
  rejects(f, '*nat\n-X PREROUTING\nCOMMIT\n', /built-in/);
  rejects(
    f,
    '*filter\n:KUBE-X - [0:0]\n-A KUBE-X -p tcp -j DNAT --to-destination 1.2.3.4:80\nCOMMIT\n',
    /not valid in table filter/,
  );
  rejects(f, '*nat\n:KUBE-SERVICES - [0:0]\n', /COMMIT expected/);
  rejects(f, '*nat\n-A KUBE-SERVICES -m comment --comment "unterminated -j ACCEPT\nCOMMIT\n', /bad line/);
  rejects(f, '*bogus\nCOMMIT\n', /unknown table/);
  rejects(f, '*nat\n:KUBE-T - [0:0]\n-A KUBE-T --dport 80 -j ACCEPT\nCOMMIT\n', /unknown option "--dport"/);
  rejects(
    f,
    '*nat\n:KUBE-T - [0:0]\n-A KUBE-T -j DNAT --to-destination 10.0.0.1:80\nCOMMIT\n',
    /Need TCP, UDP, SCTP or DCCP/,
  );
  rejects(f, '*nat\n:KUBE-SEP-0123456789012345678901 - [0:0]\nCOMMIT\n', /too long/);
  rejects(f, '*nat\n-X KUBE-NOPE\nCOMMIT\n', /no chain KUBE-NOPE/);
});

test("each table commits on its own, like iptables-nft: a later table's error keeps earlier tables", () => {
  const f = new Fake();
  f.restore(base);
  assert.throws(
    () => f.restore('*filter\n:KUBE-OK - [0:0]\nCOMMIT\n*nat\n:KUBE-NEW - [0:0]\n-A NOPE -j ACCEPT\nCOMMIT\n'),
    /no chain NOPE/,
  );
  assert.equal(f.hasChain('filter', 'KUBE-OK'), true);
  assert.equal(f.hasChain('nat', 'KUBE-NEW'), false, 'the failing table is untouched');
  assert.equal(f.restores.length, 1, 'only fully applied inputs are recorded');
});

test('accepted like the real tool: DNAT without port, policy on a user chain, -p before --dport', () => {
  const f = new Fake();
  f.restore(
    '*nat\n:KUBE-T ACCEPT [0:0]\n-A KUBE-T -j DNAT --to-destination 10.0.0.1\n-A KUBE-T -j DNAT --to-destination fd00::1\n-A KUBE-T -p udp --dport 53 -j DNAT --to-destination [fd00::1]:53\n-A KUBE-T -m tcp -p tcp --dport 1 -j RETURN\nCOMMIT\n',
  );
  assert.equal(f.rules('nat', 'KUBE-T').length, 4);
});

test('ensureRule is idempotent and checks the target exists', () => {
  const f = new Fake();
  f.restore(base);
  const args = ['-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES'];
  assert.equal(f.ensureRule('prepend', 'nat', 'OUTPUT', args), false);
  assert.equal(f.ensureRule('prepend', 'nat', 'OUTPUT', args), true);
  assert.equal(f.rules('nat', 'OUTPUT').length, 1);
  assert.throws(
    () => f.ensureRule('append', 'nat', 'OUTPUT', ['-j', 'KUBE-NOPE']),
    (e: unknown) => hasCode(e, 'KPT_EXEC_FAILED'),
  );
});

test('-I, -D and -N inside restore input', () => {
  const f = new Fake();
  f.restore('*filter\n-N KUBE-A\n-A INPUT -j KUBE-A\n-I INPUT 1 -j ACCEPT\nCOMMIT\n');
  assert.deepEqual(f.rules('filter', 'INPUT'), ['-j ACCEPT', '-j KUBE-A']);
  f.restore('*filter\n-D INPUT -j KUBE-A\nCOMMIT\n');
  assert.deepEqual(f.rules('filter', 'INPUT'), ['-j ACCEPT']);
  rejects(f, '*filter\n-D INPUT -j KUBE-A\nCOMMIT\n', /rule does not exist/);
});
