// The 'maps' endpoint layout (static.ts EndpointLayout): endpoint changes are
// element-only transactions, the intervals split the numgen slots evenly, new
// and deleted services create and remove their map in the right order, and a
// service switching to affinity drops its map.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { Endpoint, SyncState } from '../../core/types.js';
import { Fake } from './fake.js';
import { NftablesPlanner } from '../../platform/nftables/planner.js';
import { ENDPOINT_SLOTS, endpointMap } from './serviceport.js';
import { makeContext } from './static.js';
import {
  NODE_CONFIG4,
  NODE_IP,
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
import { trace } from './trace.js';

const CONFIG = NODE_CONFIG4;
const svc = (name: string, ip: string, affinity = false) =>
  withClusterIP(
    makeService('ns', name, (s) => {
      s.spec.ports = [svcPort('p80', 80, 'UDP')];
      if (affinity) {
        s.spec.sessionAffinity = 'ClientIP';
        s.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: 100 } };
      }
    }),
    ip,
  );
const slice = (name: string, ...ips: string[]) =>
  makeSlice('ns', name, 1, (s) => {
    s.endpoints = ips.map((ip) => endpoint(ip));
    s.ports = [slicePort('p80', 8080, 'UDP')];
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

test('intervals partition 0..720719; equal shares up to 16 endpoints, within one slot beyond', () => {
  const ctx = makeContext(CONFIG, NODE_IP, 'maps');
  for (const n of [1, 2, 3, 5, 7, 11, 13, 16, 17, 100, 1000]) {
    const eps = Array.from(
      { length: n },
      (_, i) => ({ ip: `10.1.${i >> 8}.${i & 255}`, port: 80 }) as unknown as Endpoint,
    );
    const { map, elements } = endpointMap(ctx, 'udp', 'service-X-ns/a/udp/p', eps);
    assert.equal(map.name, 'endpoints-service-X-ns/a/udp/p');
    assert.equal(map.typeOf, 'numgen random mod 720720 : ip daddr . udp dport');
    let next = 0;
    const sizes = new Set<number>();
    elements.forEach((e, i) => {
      const [lo, hi] = e.key[0]!.split('-').map(Number);
      assert.equal(lo, next, `n=${n} element ${i} starts where the last ended`);
      sizes.add(hi! - lo! + 1);
      next = hi! + 1;
      assert.deepEqual(e.value, [`10.1.${i >> 8}.${i & 255}`, '80']);
    });
    assert.equal(next, ENDPOINT_SLOTS, `n=${n} covers every slot`);
    assert.equal(elements.length, n);
    if (n <= 16) assert.deepEqual([...sizes], [ENDPOINT_SLOTS / n], `n=${n} equal shares`);
    else assert.ok(Math.max(...sizes) - Math.min(...sizes) <= 1, `n=${n} near-equal shares`);
  }
});

test('an endpoint change is element-only: flush the map and add the new intervals, no rule or chain', () => {
  const fake = new Fake('ip');
  const r = new NftablesPlanner(CONFIG, 'maps');
  fake.run(
    r.plan(
      state(
        [svc('a', '172.30.0.41'), svc('b', '172.30.0.42')],
        [slice('a', '10.180.0.1'), slice('b', '10.180.0.2')],
        null,
      ),
      0,
    ).tx,
  );
  const change = r.plan(
    state(
      [svc('a', '172.30.0.41'), svc('b', '172.30.0.42')],
      [slice('a', '10.180.0.1', '10.180.0.3'), slice('b', '10.180.0.2')],
      ['ns/a'],
    ),
    10,
  );
  assert.equal(change.partial, true);
  const text = change.tx.toString().trim().split('\n');
  assert.deepEqual(
    text.map((l) => l.replace(/endpoints-service-\w+-/, 'endpoints-service-H-')),
    [
      'flush map ip kube-proxy endpoints-service-H-ns/a/udp/p80',
      'add element ip kube-proxy endpoints-service-H-ns/a/udp/p80 { 0-360359 : 10.180.0.1 . 8080 }',
      'add element ip kube-proxy endpoints-service-H-ns/a/udp/p80 { 360360-720719 : 10.180.0.3 . 8080 }',
    ],
  );
  fake.run(change.tx);
  assert.equal(
    trace(fake, { src: '10.0.0.2', dst: '172.30.0.41', port: 80, protocol: 'UDP' }, [NODE_IP]).output,
    '10.180.0.1:8080, 10.180.0.3:8080',
  );
});

test('a new service creates its map before the rule that uses it; a deleted one drops the map after flushing the chain', () => {
  const fake = new Fake('ip');
  const r = new NftablesPlanner(CONFIG, 'maps');
  fake.run(r.plan(state([svc('a', '172.30.0.41')], [slice('a', '10.180.0.1')], null), 0).tx);
  const add = r.plan(
    state(
      [svc('a', '172.30.0.41'), svc('b', '172.30.0.42')],
      [slice('a', '10.180.0.1'), slice('b', '10.180.0.2')],
      ['ns/b'],
    ),
    10,
  );
  const ops = add.tx.operations.map((o) => `${o.verb} ${o.object.kind}`);
  assert.ok(ops.indexOf('add map') < ops.indexOf('add rule'), ops.join(', '));
  fake.run(add.tx); // the Fake refuses a rule naming a missing map
  const del = r.plan(state([svc('a', '172.30.0.41')], [slice('a', '10.180.0.1')], ['ns/b']), 20);
  const dops = del.tx.operations.map((o) => `${o.verb} ${o.object.kind}`);
  assert.ok(
    dops.indexOf('flush chain') >= 0 && dops.indexOf('flush chain') < dops.indexOf('delete map'),
    dops.join(', '),
  );
  fake.run(del.tx); // the Fake refuses deleting a map a rule still names
  assert.ok(![...fake.sets.keys()].some((n) => n.includes('ns/b')));
});

test('switching a service to affinity drops its map and uses endpoint chains; back again re-creates it', () => {
  const fake = new Fake('ip');
  const r = new NftablesPlanner(CONFIG, 'maps');
  fake.run(r.plan(state([svc('a', '172.30.0.41')], [slice('a', '10.180.0.1', '10.180.0.2')], null), 0).tx);
  fake.run(r.plan(state([svc('a', '172.30.0.41', true)], [slice('a', '10.180.0.1', '10.180.0.2')], ['ns/a']), 10).tx);
  assert.ok(![...fake.sets.keys()].some((n) => n.startsWith('endpoints-')));
  assert.ok([...fake.chains.keys()].some((n) => n.startsWith('endpoint-')));
  fake.run(r.plan(state([svc('a', '172.30.0.41')], [slice('a', '10.180.0.1', '10.180.0.2')], ['ns/a']), 20).tx);
  assert.equal([...fake.sets.keys()].filter((n) => n.startsWith('endpoints-')).length, 1);
  assert.equal(
    trace(fake, { src: '10.0.0.2', dst: '172.30.0.41', port: 80, protocol: 'UDP' }, [NODE_IP]).output,
    '10.180.0.1:8080, 10.180.0.2:8080',
  );
});
