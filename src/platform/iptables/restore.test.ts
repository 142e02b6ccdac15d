import { test } from 'node:test';
import assert from 'node:assert/strict';
import { insertAfterHeaders, isNftBackend, wholeTableCachePays, withWholeTableCache } from './restore.js';
import { hostRunner } from '../exec.js';
import { parseIptablesVersion, supportsRandomFully } from './features.js';
import { chainsToRemove, deleteChainsInput } from './cleanup.js';

test('withWholeTableCache inserts -S right after the *nat header only', () => {
  const t = '*filter\n:KUBE-SERVICES - [0:0]\nCOMMIT\n*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n';
  assert.equal(
    withWholeTableCache(t),
    '*filter\n:KUBE-SERVICES - [0:0]\nCOMMIT\n*nat\n-S\n:KUBE-SERVICES - [0:0]\nCOMMIT\n',
  );
  assert.equal(withWholeTableCache('*nat\nCOMMIT\n'), '*nat\n-S\nCOMMIT\n');
  assert.equal(withWholeTableCache('*filter\nCOMMIT\n', ['filter', 'nat']), '*filter\n-S\nCOMMIT\n');
  // A comment containing "*nat" is not a header.
  assert.equal(
    withWholeTableCache('*filter\n-A X -m comment --comment "*nat"\nCOMMIT\n'),
    '*filter\n-A X -m comment --comment "*nat"\nCOMMIT\n',
  );
});

test('insertAfterHeaders splices lines after headers found anywhere in the pieces, leaving other pieces as they are', () => {
  const big = '-A KUBE-SVC-X -j KUBE-SEP-Y\n'.repeat(3);
  const parts = [
    '*filter\n',
    ':KUBE-SERVICES - [0:0]',
    '\n',
    big,
    'COMMIT\n*nat\n',
    ':A - [0:0]',
    '\n',
    big,
    'COMMIT\n',
  ];
  const out = insertAfterHeaders(parts, { filter: ['F1'], nat: ['-S', 'N1'] });
  assert.equal(out.join(''), parts.join('').replace('*filter\n', '*filter\nF1\n').replace('*nat\n', '*nat\n-S\nN1\n'));
  assert.ok(out.filter((p) => p === big).length === 2, 'the big pieces are passed through, not copied');
  // A header split from its line start by a piece boundary still counts; one inside a line does not.
  assert.equal(insertAfterHeaders(['COMMIT\n', '*nat\n', 'x\n'], { nat: ['-S'] }).join(''), 'COMMIT\n*nat\n-S\nx\n');
  assert.equal(insertAfterHeaders(['-A X --comment "', '*nat\n'], { nat: ['-S'] }).join(''), '-A X --comment "*nat\n');
  // A table has one section: only its first header gets the lines (what follows is not searched).
  assert.equal(
    insertAfterHeaders(['*nat\nCOMMIT\n', '*nat\nCOMMIT\n'], { nat: ['-S'] }).join(''),
    '*nat\n-S\nCOMMIT\n*nat\nCOMMIT\n',
  );
});

test('the runner streams pieces into stdin and stdout back line by line', async () => {
  const pieces = Array.from({ length: 3000 }, (_, i) => `line ${i} ${'x'.repeat(i % 700)}\n`);
  const lines: string[] = [];
  const r = await hostRunner('cat', [], { input: pieces, onStdoutLine: (l) => lines.push(l) });
  assert.equal(r.stdout, '');
  assert.deepEqual(
    lines,
    pieces.map((p) => p.slice(0, -1)),
  );
  const big = 'y'.repeat(3 << 20);
  assert.equal((await hostRunner('wc', ['-c'], { input: ['a', big, 'b'] })).stdout.trim(), String(big.length + 2));
});

test('cost model: full syncs of many chains pay for the whole table, small partial syncs do not', () => {
  // 10k Services x 5 endpoints: full sync names 60k chains in 170k commands.
  assert.equal(wholeTableCachePays({ commands: 170_000, chainNames: 60_000, tableRules: 170_000 }), true);
  // One-endpoint partial sync at 10k: top-level chains only (about 10k rules naming 10k chains).
  assert.equal(wholeTableCachePays({ commands: 10_020, chainNames: 10_020, tableRules: 170_000 }), false);
  assert.equal(wholeTableCachePays({ commands: 30, chainNames: 12, tableRules: 40 }), false);
});

test('backend and version detection', () => {
  assert.equal(isNftBackend('iptables v1.8.9 (nf_tables)'), true);
  assert.equal(isNftBackend('iptables v1.8.9 (legacy)'), false);
  assert.deepEqual(parseIptablesVersion('ip6tables v1.8.10 (nf_tables)'), [1, 8, 10]);
  assert.equal(parseIptablesVersion('garbage'), null);
  assert.equal(supportsRandomFully([1, 6, 1]), false);
  assert.equal(supportsRandomFully([1, 6, 2]), true);
  assert.equal(supportsRandomFully([1, 8, 9]), true);
  assert.equal(supportsRandomFully(null), false);
});

test('cleanup targets exactly upstream CleanupLeftovers chains', () => {
  const nat = [
    'PREROUTING',
    'KUBE-SERVICES',
    'KUBE-MARK-DROP',
    'KUBE-MARK-MASQ',
    'KUBE-SEP-AAAA',
    'KUBE-SVC-BBBB',
    'KUBE-FW-CCCC',
    'KUBE-XYZ',
    'KUBE-PROXY-CANARY',
  ];
  assert.deepEqual(chainsToRemove('nat', nat), [
    'KUBE-SERVICES',
    'KUBE-MARK-MASQ',
    'KUBE-PROXY-CANARY',
    'KUBE-FW-CCCC',
    'KUBE-SEP-AAAA',
    'KUBE-SVC-BBBB',
  ]);
  const filter = ['INPUT', 'KUBE-FIREWALL', 'KUBE-FORWARD', 'KUBE-KUBELET-CANARY', 'KUBE-PROXY-FIREWALL'];
  assert.deepEqual(chainsToRemove('filter', filter), ['KUBE-FORWARD', 'KUBE-PROXY-FIREWALL']);
  assert.equal(deleteChainsInput('nat', ['A', 'B']), '*nat\n:A - [0:0]\n:B - [0:0]\n-X A\n-X B\nCOMMIT\n');
});

test('canaries are declared in filter and nat and a mangle section; save-format rule lines', async () => {
  const { withCanaries, ruleLine } = await import('./dataplane.js');
  assert.equal(
    withCanaries('*filter\nCOMMIT\n*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n'),
    '*filter\n:KUBE-PROXY-CANARY - [0:0]\nCOMMIT\n*nat\n:KUBE-PROXY-CANARY - [0:0]\n:KUBE-SERVICES - [0:0]\nCOMMIT\n*mangle\n:KUBE-PROXY-CANARY - [0:0]\nCOMMIT\n',
  );
  assert.equal(
    ruleLine('OUTPUT', ['-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES']),
    '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  );
});

test('jumpRestoreInput: -I FROM 1 lines per table in the given order', async () => {
  const { jumpRestoreInput } = await import('./dataplane.js');
  const { IPTABLES_JUMP_CHAINS } = await import('../../dataplane/iptables/index.js');
  const nat = IPTABLES_JUMP_CHAINS.filter((j) => j.table === 'nat');
  const fw = IPTABLES_JUMP_CHAINS.filter((j) => j.to === 'KUBE-FIREWALL');
  assert.equal(
    jumpRestoreInput([...nat, ...fw]),
    [
      '*filter',
      '-I INPUT 1 -j KUBE-FIREWALL',
      '-I OUTPUT 1 -j KUBE-FIREWALL',
      'COMMIT',
      '*nat',
      '-I OUTPUT 1 -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
      '-I PREROUTING 1 -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
      '-I POSTROUTING 1 -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
      'COMMIT',
      '',
    ].join('\n'),
  );
  assert.equal(jumpRestoreInput([]), '');
});
