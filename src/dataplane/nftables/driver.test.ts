// The nftables driver on its own: what it wants per owner, what it adopts
// from a read-back table, when two values are the same, and how operations
// become a transaction (the whole path through the reconciler is covered by
// partial.test.ts, sequence.test.ts and maps.test.ts beside it, and by the
// goldens and the packet-flow table under test/dataplane).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { DataplaneConfig } from '../../core/types.js';
import { LOCAL, service, slice } from '../../../test/cases/fixtures.js';
import { elementId, NFTABLES_OBJECTS, NODE_OWNER, NftablesDriver, type KernelSnapshot } from './driver.js';
import type { Element, NftSet } from './objects.js';
import { STALE_CHAIN_DELAY_MS, translateOps, type NftOp } from './translate.js';
import { Transaction } from './transaction.js';

const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8'] },
  nodePortAddresses: ['192.168.0.2/32'],
  localhostNodePorts: false,
  localIPs: ['127.0.0.1', '192.168.0.2'],
};

function state(changed: string[] | null) {
  return syncStateFromObjects({
    services: [
      service('web', { clusterIP: '172.30.0.41' }, [
        { name: 'http', port: 80 },
        { name: 'alt', port: 8080 },
      ]),
      service('dns', { clusterIP: '172.30.0.42' }, [{ name: 'dns', port: 53, protocol: 'UDP' }]),
    ],
    slices: [
      slice(
        'web',
        [
          { name: 'http', port: 80 },
          { name: 'alt', port: 8080 },
        ],
        [{ ip: '10.180.0.1', node: LOCAL }],
      ),
      slice('dns', [{ name: 'dns', port: 53, protocol: 'UDP' }], [{ ip: '10.180.0.2', node: 'other' }]),
    ],
    family: 'IPv4',
    nodeName: LOCAL,
    fullSync: changed === null,
    ...(changed ? { changedServices: changed } : {}),
  });
}

const el = (set: string, key: string[], value?: string, comment?: string): Element => ({
  kind: 'element',
  set,
  key,
  ...(value !== undefined ? { value: [value] } : {}),
  ...(comment !== undefined ? { comment } : {}),
});

test('desired: a full sync lists every Service and the node; a partial one the changed (a gone one wants nothing)', () => {
  const d = new NftablesDriver(CONFIG);
  const full = new Map(d.desired(state(null), true));
  assert.deepEqual([...full.keys()], ['ns1/dns', 'ns1/web', NODE_OWNER]);
  assert.deepEqual(
    full.get(NODE_OWNER)!.map((o) => o.key),
    [elementId('nodeport-ips', ['192.168.0.2'])],
  );
  const web = full.get('ns1/web')!;
  const clusterIP = elementId('cluster-ips', ['172.30.0.41']);
  assert.equal(web.filter((o) => o.key === clusterIP).length, 1, "the ports' shared ClusterIP element, once");
  assert.deepEqual(
    web.filter((o) => o.kind === 'chain').map((o) => o.key.replace(/-[A-Z0-9]{8}-/, '-H-')),
    ['service-H-ns1/web/tcp/alt', 'service-H-ns1/web/tcp/http'],
  );
  const partial = new Map(d.desired(state(['ns1/dns', 'ns1/gone']), false));
  assert.deepEqual([...partial.keys()], ['ns1/dns', 'ns1/gone']);
  assert.deepEqual(partial.get('ns1/gone'), []);
});

test('live: service chains, affinity sets, endpoint maps and managed elements; stale chains gone from the table are forgotten', () => {
  const d = new NftablesDriver(CONFIG);
  const ops: NftOp[] = [{ op: 'delete', kind: 'chain', key: 'service-X-ns/a/tcp/p', before: 'rules' }];
  assert.equal(
    d.transaction(state([]), ops, false, 0).tx.toString().trim(),
    'flush chain ip kube-proxy service-X-ns/a/tcp/p',
  );
  assert.deepEqual([...d.pendingStaleChains().keys()], ['service-X-ns/a/tcp/p']);
  const e = el('cluster-ips', ['172.30.0.41']);
  const snap: KernelSnapshot = {
    chains: ['nat-prerouting', 'services', 'service-Y-ns/b/tcp/p'],
    sets: ['cluster-ips', 'affinity-Z-ns/b/tcp/p__10.0.0.1/80', 'endpoints-service-Y-ns/b/tcp/p'],
    elements: new Map([
      ['cluster-ips', [e]],
      ['affinity-Z-ns/b/tcp/p__10.0.0.1/80', [el('affinity-Z-ns/b/tcp/p__10.0.0.1/80', ['1.2.3.4'])]],
    ]),
  };
  assert.deepEqual(d.live(snap), [
    { kind: 'chain', key: 'service-Y-ns/b/tcp/p', value: null },
    { kind: 'set', key: 'affinity-Z-ns/b/tcp/p__10.0.0.1/80', value: null },
    { kind: 'map', key: 'endpoints-service-Y-ns/b/tcp/p', value: null },
    { kind: 'element', key: elementId('cluster-ips', ['172.30.0.41']), value: e },
  ]);
  assert.equal(d.pendingStaleChains().size, 0, 'no longer in the table: nothing to delete later');
});

test('same: an element by its value (not its comment), a set by its definition, text by text', () => {
  const { same } = NFTABLES_OBJECTS;
  const set = (timeoutSeconds: number): NftSet => ({
    kind: 'set',
    name: 'affinity-x',
    type: 'ipv4_addr',
    flags: ['dynamic', 'timeout'],
    timeoutSeconds,
  });
  assert.equal(same(el('s', ['k'], 'goto a', 'c1'), el('s', ['k'], 'goto a', 'c2')), true);
  assert.equal(same(el('s', ['k'], 'goto a'), el('s', ['k'], 'goto b')), false);
  assert.equal(same(el('s', ['k']), el('s', ['k'], 'drop')), false);
  assert.equal(same(set(10), set(10)), true);
  assert.equal(same(set(10), set(20)), false);
  assert.equal(same('a\tb', 'a\tb'), true);
  assert.equal(same('a\tb', 'a\tc'), false);
});

test('translate: every chain before any rule, element changes as delete + add, deletes after, sets and maps last', () => {
  const s = new Map<string, number>();
  const rules = new Map([
    [
      'service-A-ns/a/tcp/p',
      [{ kind: 'rule' as const, chain: 'service-A-ns/a/tcp/p', rule: 'goto service-B-ns/a/tcp/q' }],
    ],
    ['service-B-ns/a/tcp/q', [{ kind: 'rule' as const, chain: 'service-B-ns/a/tcp/q', rule: 'drop' }]],
  ]);
  const ops: NftOp[] = [
    { op: 'put', kind: 'set', key: 'affinity-s', value: { kind: 'set', name: 'affinity-s', type: 'ipv4_addr' } },
    { op: 'put', kind: 'chain', key: 'service-A-ns/a/tcp/p', value: 'x' },
    { op: 'put', kind: 'chain', key: 'service-B-ns/a/tcp/q', value: 'y', before: 'old' },
    {
      op: 'put',
      kind: 'element',
      key: 'e',
      value: el('service-ips', ['1.1.1.1', 'tcp', '80'], 'goto x'),
      before: null,
    },
    { op: 'delete', kind: 'element', key: elementId('nodeport-ips', ['192.168.0.2']), before: null },
    { op: 'delete', kind: 'element', key: elementId('cluster-ips', ['172.30.0.9']), before: null },
    { op: 'delete', kind: 'chain', key: 'service-C-ns/c/tcp/p', before: null },
    { op: 'delete', kind: 'map', key: 'endpoints-service-C-ns/c/tcp/p', before: null },
    { op: 'delete', kind: 'set', key: 'affinity-t', before: null },
  ];
  const tx = new Transaction('ip');
  translateOps(tx, ops, { rules, maps: new Map(), stale: s, now: 5, deletedSet: 'nodeport-ips' });
  assert.deepEqual(tx.toString().trim().split('\n'), [
    'add set ip kube-proxy affinity-s { type ipv4_addr ; }',
    'add chain ip kube-proxy service-A-ns/a/tcp/p',
    'flush chain ip kube-proxy service-A-ns/a/tcp/p',
    'add chain ip kube-proxy service-B-ns/a/tcp/q',
    'flush chain ip kube-proxy service-B-ns/a/tcp/q',
    'add rule ip kube-proxy service-A-ns/a/tcp/p goto service-B-ns/a/tcp/q',
    'add rule ip kube-proxy service-B-ns/a/tcp/q drop',
    'delete element ip kube-proxy service-ips { 1.1.1.1 . tcp . 80 }',
    'add element ip kube-proxy service-ips { 1.1.1.1 . tcp . 80 : goto x }',
    'delete element ip kube-proxy cluster-ips { 172.30.0.9 }',
    'flush chain ip kube-proxy service-C-ns/c/tcp/p',
    'delete map ip kube-proxy endpoints-service-C-ns/c/tcp/p',
    'delete set ip kube-proxy affinity-t',
  ]);
  assert.deepEqual([...s], [['service-C-ns/c/tcp/p', 5]]);
});

test('translate: a stale chain keeps its time when read back again, and goes once old enough unless wanted again', () => {
  const s = new Map<string, number>();
  const run = (ops: NftOp[], now: number) => {
    const tx = new Transaction('ip');
    const rules = new Map([['service-B-ns/b/tcp/p', []]]);
    translateOps(tx, ops, { rules, maps: new Map(), stale: s, now, deletedSet: null });
    return tx.toString().trim();
  };
  const del = (key: string): NftOp => ({ op: 'delete', kind: 'chain', key, before: null });
  run([del('service-A-ns/a/tcp/p'), del('service-B-ns/b/tcp/p')], 0);
  assert.equal(run([del('service-A-ns/a/tcp/p')], 10), '', 'already flushed, waiting');
  assert.equal(s.get('service-A-ns/a/tcp/p'), 0);
  const back: NftOp = { op: 'put', kind: 'chain', key: 'service-B-ns/b/tcp/p', value: '' };
  assert.deepEqual(run([back], STALE_CHAIN_DELAY_MS).split('\n'), [
    'add chain ip kube-proxy service-B-ns/b/tcp/p',
    'flush chain ip kube-proxy service-B-ns/b/tcp/p',
    'delete chain ip kube-proxy service-A-ns/a/tcp/p',
  ]);
  assert.equal(s.size, 0);
});
