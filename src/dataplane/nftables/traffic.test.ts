// The per-Service counter plan: which elements, the cap in key order, and
// element-only changes between syncs (so counters of kept elements survive).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import { service, slice } from '../../../test/cases/fixtures.js';
import { Fake } from './fake.js';
import { planTrafficCounters, trafficElements, trafficTable, TRAFFIC_TABLE } from './traffic.js';
import { parseCountedElements } from '../../platform/nftables/traffic.js';

const state = (names: string[]) =>
  syncStateFromObjects({
    services: names.map((n, i) =>
      service(n, { clusterIP: `172.30.0.${10 + i}`, type: 'NodePort', externalIPs: [`192.0.2.${i + 1}`] }, [
        { name: 'http', port: 80, nodePort: 30080 + i },
      ]),
    ),
    slices: names.map((n) => slice(n, [{ name: 'http', port: 80 }], [{ ip: '10.180.0.1' }])),
    family: 'IPv4',
    nodeIPs: { IPv4: '192.168.0.2' },
    fullSync: true,
  });

test('planTrafficCounters: every address and the node port of the first N service ports, the rest untracked', () => {
  const p = planTrafficCounters(state(['c', 'a', 'b']), 2);
  assert.equal(p.untracked, 1);
  const keys = [...p.elements.values()].map((e) => `${e.servicePort} ${e.set} ${e.key}`).sort();
  assert.deepEqual(keys, [
    'ns1/a:http bytes 172.30.0.11 . tcp . 80',
    'ns1/a:http bytes 192.0.2.2 . tcp . 80',
    'ns1/a:http conns 172.30.0.11 . tcp . 80',
    'ns1/a:http conns 192.0.2.2 . tcp . 80',
    'ns1/a:http nodeport-bytes tcp . 30081',
    'ns1/a:http nodeport-conns tcp . 30081',
    'ns1/b:http bytes 172.30.0.12 . tcp . 80',
    'ns1/b:http bytes 192.0.2.3 . tcp . 80',
    'ns1/b:http conns 172.30.0.12 . tcp . 80',
    'ns1/b:http conns 192.0.2.3 . tcp . 80',
    'ns1/b:http nodeport-bytes tcp . 30082',
    'ns1/b:http nodeport-conns tcp . 30082',
  ]);
  assert.match(
    trafficTable('IPv4', p).toString(),
    /set ip kube-proxy-ts-traffic conns \{ type ipv4_addr . inet_proto . inet_service ; counter ; \}/,
  );
});

test('trafficElements changes only the elements that differ', () => {
  const before = planTrafficCounters(state(['a', 'b']), 1).elements;
  const after = planTrafficCounters(state(['a', 'b']), 2).elements;
  const s = trafficElements('IPv4', before, after).toString();
  // b's six elements are added, a's stay as they are.
  assert.ok(
    s
      .split('\n')
      .filter(Boolean)
      .every((l) => l.startsWith('add element ') && /172\.30\.0\.11|192\.0\.2\.2|30081/.test(l)),
    s,
  );
  assert.equal(s.split('\n').filter(Boolean).length, 6);
  assert.equal(trafficElements('IPv4', after, after).toString(), '');
  assert.match(trafficElements('IPv4', after, before).toString(), /^delete element ip kube-proxy-ts-traffic /m);
});

test('the nftables Fake takes the counters table and its element changes as the kernel does', () => {
  const p1 = planTrafficCounters(state(['a', 'b']), 1);
  const p2 = planTrafficCounters(state(['a', 'b']), 2);
  const fake = new Fake('ip', TRAFFIC_TABLE);
  fake.run(trafficTable('IPv4', p1));
  assert.equal(fake.listElements('conns').length, 2);
  assert.deepEqual([...fake.chains.keys()].sort(), ['output', 'prerouting']);
  assert.deepEqual(
    fake.chains.get('prerouting')!.rules.map((r) => r.rule),
    [
      'ct state new ip daddr . meta l4proto . th dport @conns',
      'ct direction original ip daddr . meta l4proto . th dport @bytes',
      'ct state new fib daddr type local meta l4proto . th dport @nodeport-conns',
      'ct direction original fib daddr type local meta l4proto . th dport @nodeport-bytes',
    ],
  );
  fake.run(trafficElements('IPv4', p1.elements, p2.elements));
  assert.equal(fake.listElements('conns').length, 4);
  assert.equal(fake.listElements('nodeport-bytes').length, 2);
  fake.run(trafficElements('IPv4', p2.elements, p1.elements));
  assert.equal(fake.listElements('bytes').length, 2);
});

test('parseCountedElements reads nft -j element counters', () => {
  const json = JSON.stringify({
    nftables: [
      { metainfo: {} },
      {
        set: {
          name: 'conns',
          elem: [
            { elem: { val: { concat: ['172.30.0.10', 'tcp', 80] }, counter: { packets: 3, bytes: 180 } } },
            { elem: { val: { concat: ['tcp', 30080] }, counter: { packets: 1, bytes: 60 } } },
          ],
        },
      },
    ],
  });
  assert.deepEqual(parseCountedElements(json), [
    { key: '172.30.0.10 . tcp . 80', packets: 3, bytes: 180 },
    { key: 'tcp . 30080', packets: 1, bytes: 60 },
  ]);
});
