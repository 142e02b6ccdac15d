// Partial syncs and their operation counts (upstream TestSyncProxyRulesRepeated,
// newest design: no per-endpoint chains without affinity, so adding a
// one-endpoint ClusterIP service is 5 operations and deleting it 3), delayed
// stale chain deletion, and recovery after a failed transaction.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { SyncState } from '../../core/types.js';
import { Fake } from './fake.js';
import { NftablesPlanner } from '../../platform/nftables/planner.js';
import { Transaction } from './transaction.js';
import {
  NODE_CONFIG4,
  SERVICE_CIDR,
  TEST_NODE,
  endpoint,
  makeNode,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
} from '../../../test/support/fixtures.js';

const CONFIG = NODE_CONFIG4;

const svc = (ns: string, ip: string, affinity = false) =>
  withClusterIP(
    makeService(ns, 'svc', (s) => {
      s.spec.ports = [svcPort('p80', 80)];
      if (affinity) {
        s.spec.sessionAffinity = 'ClientIP';
        s.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: 100 } };
      }
    }),
    ip,
  );
const slice = (ns: string, ...ips: string[]) =>
  makeSlice(ns, 'svc', 1, (s) => {
    s.endpoints = ips.map((ip) => endpoint(ip));
    s.ports = [slicePort('p80', 80)];
  });

function state(services: unknown[], slices: unknown[], changed: string[] | null): SyncState {
  return syncStateFromObjects({
    services,
    slices,
    family: 'IPv4',
    node: makeNode(TEST_NODE),
    serviceCIDRs: [SERVICE_CIDR],
    fullSync: changed === null,
    ...(changed ? { changedServices: changed } : {}),
  });
}
const lines = (tx: Transaction) => tx.toString().trim().split('\n').filter(Boolean);

test('adding and deleting a one-endpoint service touches only its objects; the chain goes >= 1 s later', () => {
  const fake = new Fake('ip');
  const r = new NftablesPlanner(CONFIG, 'upstream'); // the expected rule text is the upstream layout's
  fake.run(r.plan(state([svc('ns1', '172.30.0.41')], [slice('ns1', '10.180.0.1')], null), 0).tx);
  const baseline = fake.dump();

  const add = r.plan(
    state(
      [svc('ns1', '172.30.0.41'), svc('ns2', '172.30.0.42')],
      [slice('ns1', '10.180.0.1'), slice('ns2', '10.180.0.2')],
      ['ns2/svc'],
    ),
    1000,
  );
  assert.equal(add.partial, true);
  const chain = 'service-LVARFY3C-ns2/svc/tcp/p80';
  assert.deepEqual(lines(add.tx), [
    `add chain ip kube-proxy ${chain}`,
    `flush chain ip kube-proxy ${chain}`,
    `add rule ip kube-proxy ${chain} meta l4proto tcp dnat ip addr . port to numgen random mod 1 map { 0 : 10.180.0.2 . 80 }`,
    'add element ip kube-proxy cluster-ips { 172.30.0.42 }',
    `add element ip kube-proxy service-ips { 172.30.0.42 . tcp . 80 : goto ${chain} }`,
  ]);
  fake.run(add.tx);

  const del = r.plan(state([svc('ns1', '172.30.0.41')], [slice('ns1', '10.180.0.1')], ['ns2/svc']), 2000);
  assert.deepEqual(lines(del.tx), [
    'delete element ip kube-proxy cluster-ips { 172.30.0.42 }',
    'delete element ip kube-proxy service-ips { 172.30.0.42 . tcp . 80 }',
    `flush chain ip kube-proxy ${chain}`,
  ]);
  fake.run(del.tx);
  assert.ok(fake.chains.has(chain), 'flushed, not yet deleted');

  const soon = r.plan(state([svc('ns1', '172.30.0.41')], [slice('ns1', '10.180.0.1')], []), 2999);
  assert.equal(soon.tx.numOperations, 0);
  fake.run(soon.tx);
  const later = r.plan(state([svc('ns1', '172.30.0.41')], [slice('ns1', '10.180.0.1')], []), 3000);
  assert.deepEqual(lines(later.tx), [`delete chain ip kube-proxy ${chain}`]);
  fake.run(later.tx);
  assert.equal(fake.dump(), baseline);
});

test('an endpoint change rewrites only that service chain; unchanged services are untouched', () => {
  const fake = new Fake('ip');
  const r = new NftablesPlanner(CONFIG, 'upstream'); // the expected rule text is the upstream layout's
  const svcs = [svc('ns1', '172.30.0.41'), svc('ns2', '172.30.0.42')];
  fake.run(r.plan(state(svcs, [slice('ns1', '10.180.0.1'), slice('ns2', '10.180.0.2')], null), 0).tx);
  const tx = r.plan(
    state(svcs, [slice('ns1', '10.180.0.1', '10.180.0.3'), slice('ns2', '10.180.0.2')], ['ns1/svc']),
    10,
  ).tx;
  assert.equal(tx.numOperations, 3);
  assert.ok(lines(tx).every((l) => l.includes('ns1/svc')));
  fake.run(tx);
  assert.match(fake.dump(), /numgen random mod 2 map \{ 0 : 10\.180\.0\.1 \. 80 , 1 : 10\.180\.0\.3 \. 80 \}/);
});

test('losing all endpoints moves the clusterIP from service-ips to no-endpoint-services (delete + add)', () => {
  const fake = new Fake('ip');
  const r = new NftablesPlanner(CONFIG);
  fake.run(r.plan(state([svc('ns1', '172.30.0.41')], [slice('ns1', '10.180.0.1')], null), 0).tx);
  const tx = r.plan(state([svc('ns1', '172.30.0.41')], [], ['ns1/svc']), 10).tx;
  fake.run(tx);
  assert.deepEqual(lines(tx), [
    'add element ip kube-proxy no-endpoint-services { 172.30.0.41 . tcp . 80 comment "ns1/svc:p80" : goto reject-chain }',
    'delete element ip kube-proxy service-ips { 172.30.0.41 . tcp . 80 }',
    'flush chain ip kube-proxy service-VJ5VVJVF-ns1/svc/tcp/p80',
  ]);
});

test('affinity sets of removed endpoints are deleted in the same transaction, after the chains are flushed', () => {
  const fake = new Fake('ip');
  const r = new NftablesPlanner(CONFIG);
  fake.run(r.plan(state([svc('ns1', '172.30.0.41', true)], [slice('ns1', '10.180.0.1', '10.180.0.2')], null), 0).tx);
  const before = [...fake.sets.keys()].filter((n) => n.startsWith('affinity-'));
  assert.equal(before.length, 2);
  const tx = r.plan(state([svc('ns1', '172.30.0.41', true)], [slice('ns1', '10.180.0.1')], ['ns1/svc']), 10).tx;
  fake.run(tx);
  const after = [...fake.sets.keys()].filter((n) => n.startsWith('affinity-'));
  assert.deepEqual(
    after,
    before.filter((n) => n.includes('10.180.0.1')),
  );
  const l = lines(tx);
  assert.ok(
    l.findIndex((x) => x.startsWith('delete set')) >
      l.findIndex((x) => x.startsWith('flush chain ip kube-proxy endpoint-')),
  );
});

test('after a failed transaction the next sync is full and repairs the table from a read-back snapshot', () => {
  const fake = new Fake('ip');
  const r = new NftablesPlanner(CONFIG);
  const svcs = [svc('ns1', '172.30.0.41')];
  fake.run(r.plan(state(svcs, [slice('ns1', '10.180.0.1')], null), 0).tx);
  const good = fake.dump();
  // Someone removes an element behind our back; the next partial sync that deletes it fails.
  const sabotage = new Transaction('ip');
  sabotage.delete({ kind: 'element', set: 'service-ips', key: ['172.30.0.41', 'tcp', '80'] });
  fake.run(sabotage);
  const failing = r.plan(state(svcs, [], ['ns1/svc']), 10).tx;
  assert.throws(
    () => fake.run(failing),
    (e: unknown) => (e as { reason?: string }).reason === 'ENOENT',
  );
  assert.equal(fake.dump().includes('no-endpoint-services { 172.30.0.41'), false, 'all-or-nothing');
  r.failed();
  const st = state(svcs, [slice('ns1', '10.180.0.1')], []);
  assert.equal(r.needsFullSync(st), true);
  const repair = r.plan(st, 20, fake.snapshot());
  assert.equal(repair.partial, false);
  fake.run(repair.tx);
  assert.equal(fake.dump(), good);
});

test('a full sync against a read-back snapshot deletes leftovers and flushes foreign-looking stale chains', () => {
  const fake = new Fake('ip');
  const r1 = new NftablesPlanner(CONFIG);
  fake.run(
    r1.plan(
      state(
        [svc('ns1', '172.30.0.41'), svc('ns2', '172.30.0.42')],
        [slice('ns1', '10.180.0.1'), slice('ns2', '10.180.0.2')],
        null,
      ),
      0,
    ).tx,
  );
  // A restarted proxy (fresh memory) no longer has ns2/svc.
  const r2 = new NftablesPlanner(CONFIG);
  const tx = r2.plan(state([svc('ns1', '172.30.0.41')], [slice('ns1', '10.180.0.1')], null), 5000, fake.snapshot()).tx;
  fake.run(tx);
  const text = tx.toString();
  assert.match(text, /^delete element ip kube-proxy service-ips \{ 172\.30\.0\.42 \. tcp \. 80 \}$/m);
  assert.match(text, /^flush chain ip kube-proxy service-LVARFY3C-ns2\/svc\/tcp\/p80$/m);
  assert.doesNotMatch(
    text,
    /^add element ip kube-proxy cluster-ips \{ 172\.30\.0\.41 \}$/m,
    'present elements are not re-added',
  );
  const next = r2.plan(state([svc('ns1', '172.30.0.41')], [slice('ns1', '10.180.0.1')], []), 6000).tx;
  assert.match(next.toString(), /^delete chain ip kube-proxy service-LVARFY3C-ns2\/svc\/tcp\/p80$/m);
  fake.run(next);
});

test('an endpoint change of a NodePort service leaves its unchanged external chain alone', () => {
  const np = (eps: string[]) =>
    [
      withClusterIP(
        makeService('ns1', 'svc', (s) => {
          s.spec.type = 'NodePort';
          s.spec.ports = [svcPort('p80', 80, 'TCP', { nodePort: 30001 })];
        }),
        '172.30.0.41',
      ),
      slice('ns1', ...eps),
    ] as const;
  const fake = new Fake('ip');
  const r = new NftablesPlanner(CONFIG, 'upstream'); // one dnat rule per policy chain, as asserted below
  const [s1, e1] = np(['10.180.0.1']);
  fake.run(r.plan(state([s1], [e1], null), 0).tx);
  const [s2, e2] = np(['10.180.0.1', '10.180.0.2']);
  const tx = r.plan(state([s2], [e2], ['ns1/svc']), 10).tx;
  assert.deepEqual(
    lines(tx).map((l) => l.split(' ').slice(0, 5).join(' ')),
    [
      'add chain ip kube-proxy service-VJ5VVJVF-ns1/svc/tcp/p80',
      'flush chain ip kube-proxy service-VJ5VVJVF-ns1/svc/tcp/p80',
      'add rule ip kube-proxy service-VJ5VVJVF-ns1/svc/tcp/p80',
    ],
  );
  fake.run(tx);
  // The result is what a full sync from scratch produces.
  const fresh = new Fake('ip');
  fresh.run(new NftablesPlanner(CONFIG, 'upstream').plan(state([s2], [e2], null), 0).tx);
  assert.equal(fake.dump(), fresh.dump());
  // Back to one endpoint and then the service gone: every object goes.
  fake.run(r.plan(state([s1], [e1], ['ns1/svc']), 20).tx);
  fake.run(r.plan(state([], [], ['ns1/svc']), 30).tx);
  fake.run(r.plan(state([], [], []), 2000).tx);
  assert.doesNotMatch(fake.dump(), /ns1\/svc|172\.30\.0\.41/);
});

test('a ServiceCIDR change turns the next sync into a full one that rewrites the drop rule', () => {
  const fake = new Fake('ip');
  const r = new NftablesPlanner(CONFIG);
  fake.run(r.plan(state([svc('ns1', '172.30.0.41')], [slice('ns1', '10.180.0.1')], null), 0).tx);
  const next = syncStateFromObjects({
    services: [svc('ns1', '172.30.0.41')],
    slices: [slice('ns1', '10.180.0.1')],
    family: 'IPv4',
    node: makeNode(TEST_NODE),
    serviceCIDRs: [SERVICE_CIDR, '172.31.0.0/16'],
    fullSync: false,
    changedServices: [],
  });
  assert.equal(r.needsFullSync(next), true);
  const out = r.plan(next, 10);
  assert.equal(out.partial, false);
  fake.run(out.tx);
  assert.match(fake.dump(), /cluster-ips-check ip daddr \{ 172\.30\.0\.0\/16,172\.31\.0\.0\/16 \} drop/);
  assert.equal(r.plan(next, 20).partial, true);
});
