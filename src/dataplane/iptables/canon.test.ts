// Pairs of (what the renderer writes, what iptables-nft 1.8.9's iptables-save
// printed for it after a real restore) must be the same rule; rules that
// differ in any match, value or target must not.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalRule, sameRule } from './canon.js';
import { Fake } from './fake.js';
import { diffIptables, diffRules, diffText } from './diff.js';

const PAIRS: ReadonlyArray<[string, string]> = [
  [
    '-m comment --comment "ns1/s0:http cluster IP" -m tcp -p tcp -d 172.30.0.10 --dport 80 -j KUBE-SVC-4BOAAVIVZPOGBEZZ',
    '-d 172.30.0.10/32 -p tcp -m comment --comment "ns1/s0:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-4BOAAVIVZPOGBEZZ',
  ],
  [
    '-m comment --comment "ns1/s0:http cluster IP" -m tcp -p tcp -d 172.30.0.10 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ',
    '! -s 10.0.0.0/8 -d 172.30.0.10/32 -p tcp -m comment --comment "ns1/s0:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ',
  ],
  [
    '-m comment --comment "ns1/s0:http -> 10.180.0.1:8080" -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-CPHROSJS4F5IJ4TV',
    '-m comment --comment "ns1/s0:http -> 10.180.0.1:8080" -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-CPHROSJS4F5IJ4TV',
  ],
  [
    '-m comment --comment ns1/s1:http -m recent --name KUBE-SEP-X7KOKO2XHCNUS5BP --set -m tcp -p tcp -j DNAT --to-destination 10.181.0.1:80',
    '-p tcp -m comment --comment "ns1/s1:http" -m recent --set --name KUBE-SEP-X7KOKO2XHCNUS5BP --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.181.0.1:80',
  ],
  [
    '-m comment --comment "ns1/s1:http -> 10.181.0.1:80" -m recent --name KUBE-SEP-X7KOKO2XHCNUS5BP --rcheck --seconds 10800 --reap -j KUBE-SEP-X7KOKO2XHCNUS5BP',
    '-m comment --comment "ns1/s1:http -> 10.181.0.1:80" -m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-X7KOKO2XHCNUS5BP --mask 255.255.255.255 --rsource -j KUBE-SEP-X7KOKO2XHCNUS5BP',
  ],
  [
    '-m comment --comment "ns1/s2:http has no endpoints" -m tcp -p tcp -d 172.30.0.12 --dport 80 -j REJECT',
    '-d 172.30.0.12/32 -p tcp -m comment --comment "ns1/s2:http has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable',
  ],
  ['-j MARK --or-mark 0x00004000', '-j MARK --set-xmark 0x4000/0x4000'],
  ['-j MARK --xor-mark 0x00004000', '-j MARK --set-xmark 0x4000/0x0'],
  ['-m mark ! --mark 0x00004000/0x00004000 -j RETURN', '-m mark ! --mark 0x4000/0x4000 -j RETURN'],
  [
    '-m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP',
    '! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP',
  ],
  [
    '-m comment --comment "ns1/s1:http health check node port" -m tcp -p tcp --dport 30000 -j ACCEPT',
    '-p tcp -m comment --comment "ns1/s1:http health check node port" -m tcp --dport 30000 -j ACCEPT',
  ],
  [
    '-m comment --comment ns1/s0:http -s fd00::1 -j KUBE-MARK-MASQ',
    '-s fd00::1/128 -m comment --comment "ns1/s0:http" -j KUBE-MARK-MASQ',
  ],
  // IPVS mode: set matches take a name and flags; the ipvs match prints --vproto as a number.
  [
    '-m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT',
    '-m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT --reject-with icmp-port-unreachable',
  ],
  [
    '-s 198.51.100.1 -m ipvs --vaddr 198.51.100.1 --vproto udp --vport 53 -j DROP',
    '-s 198.51.100.1/32 -m ipvs --vproto 17 --vaddr 198.51.100.1 --vport 53 -j DROP',
  ],
];

test('the renderer spelling and the iptables-save spelling of a rule are the same rule', () => {
  for (const [ours, saved] of PAIRS)
    assert.ok(sameRule(ours, saved), `${ours}\n  vs ${saved}\n  ${canonicalRule(ours)}\n  ${canonicalRule(saved)}`);
});

test('rules that differ in a value, a negation, a match or the target are different', () => {
  const base = '-m comment --comment "a" -m tcp -p tcp -d 172.30.0.10 --dport 80 -j KUBE-SVC-X';
  for (const other of [
    base.replace('--dport 80', '--dport 81'),
    base.replace('172.30.0.10', '172.30.0.11'),
    base.replace('-p tcp', '-p udp'),
    base.replace('-d ', '! -d '),
    base.replace('"a"', '"b"'),
    base.replace('KUBE-SVC-X', 'KUBE-SVC-Y'),
    base.replace(' -j KUBE-SVC-X', ''),
    `${base} -m addrtype --dst-type LOCAL`,
    `${base} -m set --match-set KUBE-CLUSTER-IP dst,dst`,
  ])
    assert.ok(!sameRule(base, other), other);
  const set = '-m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ';
  for (const other of [set.replace('dst,dst', 'dst'), set.replace('KUBE-CLUSTER-IP', 'KUBE-LOOP-BACK')])
    assert.ok(!sameRule(set, other), other);
  for (const other of [
    '-m ipvs --vaddr 10.0.0.1 --vproto tcp --vport 53 -j DROP',
    '-m ipvs --vaddr 10.0.0.1 --vproto 6 --vport 53 -j DROP',
  ])
    assert.ok(!sameRule('-m ipvs --vaddr 10.0.0.1 --vproto 17 --vport 53 -j DROP', other), other);
  assert.ok(
    !sameRule(
      '-m statistic --mode random --probability 0.3333333333 -j X',
      '-m statistic --mode random --probability 0.5000000000 -j X',
    ),
  );
  assert.ok(!sameRule('-j MARK --or-mark 0x4000', '-j MARK --xor-mark 0x4000'));
});

test('diffRules aligns unchanged rules and marks the rest', () => {
  const lines = diffRules(['-j A', '-j B', '-j C', '-j D'], ['-j A', '-j X', '-j C', '-j D', '-j E']);
  assert.deepEqual(
    lines.map((l) => `${l.op}${l.rule}`),
    [' -j A', '+-j X', '--j B', ' -j C', ' -j D', '+-j E'],
  );
});

test('diffIptables: added, removed and changed chains; unchanged chains (in either spelling) are left out', () => {
  const before = new Fake();
  before.load(`*nat
:PREROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-OLD - [0:0]
:KUBE-MARK-MASQ - [0:0]
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp -m comment --comment "ns/old cluster IP" -m tcp --dport 80 -j KUBE-SVC-OLD
COMMIT
`);
  const after = new Fake();
  after.restore(
    `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-NEW - [0:0]
:KUBE-MARK-MASQ - [0:0]
-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
-A KUBE-SERVICES -m comment --comment "ns/new cluster IP" -m tcp -p tcp -d 172.30.0.2 --dport 80 -j KUBE-SVC-NEW
COMMIT
`,
    { noflush: true },
  );
  const d = diffIptables(before, after);
  assert.deepEqual(
    d.map((c) => `${c.table}/${c.chain}:${c.status}`),
    ['nat/KUBE-SERVICES:changed', 'nat/KUBE-SVC-NEW:added', 'nat/KUBE-SVC-OLD:removed'],
  );
  const text = diffText(d);
  assert.match(text, /^--A KUBE-SERVICES -d 172\.30\.0\.1\/32 .*KUBE-SVC-OLD$/m);
  assert.match(text, /^\+-A KUBE-SERVICES .*KUBE-SVC-NEW$/m);
  assert.match(text, /^\+:KUBE-SVC-NEW$/m);
  assert.match(text, /^-:KUBE-SVC-OLD$/m);
  assert.deepEqual(diffIptables(before, before), []);
});
