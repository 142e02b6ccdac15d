import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canaryTarget } from './canary.js';
import type { ExtraPort, SnapshotUpdate } from './livesnapshot.js';
import { LiveSnapshot } from './livesnapshot.js';
import { syncStateFromObjects } from './snapshot.js';
import { finish } from './steps.js';
import { endpoint, makeService, makeSlice, slicePort, svcPort, withClusterIP } from '../../test/support/fixtures.js';

const base = syncStateFromObjects({
  services: [
    makeService('ns', 'web', (s) => {
      withClusterIP(s, '172.30.0.10');
      s.spec.ports = [svcPort('http', 80)];
    }),
  ],
  slices: [
    makeSlice('ns', 'web', 1, (s) => {
      s.endpoints = [endpoint('10.1.0.1')];
      s.ports = [slicePort('http', 8080)];
    }),
  ],
  family: 'IPv4',
});

function update(extra: ReadonlyMap<string, ExtraPort>, fullSync = false): SnapshotUpdate {
  const sp = base.services.get('ns/web:http')!;
  return {
    services: base.services,
    endpoints: new Map([[`${sp.key}/TCP`, { name: sp.name, endpoints: base.endpoints.get(sp.key)! }]]),
    portKeysOf: (svc) => (svc === 'ns/web' ? [sp.key] : undefined),
    extra,
    node: base.node,
    changedServices: new Set(),
    fullSync,
    serviceCIDRs: ['172.30.0.0/16', 'fd00::/108'],
  };
}

test('a port beside the maps joins the state, and counts as changed only when it is new, different or gone', () => {
  const canary = canaryTarget('IPv4', 'test-node', '192.168.0.2', 20000);
  const extra = (port: number) => {
    const c = canaryTarget('IPv4', 'test-node', '192.168.0.2', port);
    return new Map([[c.servicePort.key, { servicePort: c.servicePort, endpoints: [c.endpoint] }]]);
  };
  const snap = new LiveSnapshot('IPv4');
  const key = canary.servicePort.key;
  const svc = canary.servicePort.serviceKey;
  const withIt = { servicePort: canary.servicePort, endpoints: [canary.endpoint] };
  const first = finish(snap.updateSteps(update(new Map([[key, withIt]]), true)));
  assert.ok(first.services.has(key) && first.services.has('ns/web:http'));
  assert.deepEqual(first.serviceCIDRs, ['172.30.0.0/16']);
  assert.ok(first.changedServices.has(svc));
  // The same port and endpoint again (a new list holding the same endpoint): nothing changed.
  const again = finish(snap.updateSteps(update(new Map([[key, { ...withIt, endpoints: [canary.endpoint] }]]))));
  assert.equal(again.changedServices.size, 0);
  assert.equal(again.services, first.services);
  // Another listener port: a different endpoint, so the canary's Service is written again.
  const moved = finish(snap.updateSteps(update(extra(20001))));
  assert.ok(moved.changedServices.has(svc));
  assert.equal(moved.endpoints.get(key)![0]!.port, 20001);
  assert.deepEqual([...moved.changedServicePorts!], [key]);
  // No canary any more: its Service changed, and its port is gone from the maps.
  const gone = finish(snap.updateSteps(update(new Map())));
  assert.ok(gone.changedServices.has(svc));
  assert.equal(gone.services.has(key), false);
  assert.equal(gone.categorized.has(key), false);
  assert.ok(gone.services.has('ns/web:http'));
});

test('a growing state (early syncs) is patched in place however large the change, to the same contents', () => {
  const many = (n: number) =>
    syncStateFromObjects({
      services: Array.from({ length: n }, (_, i) =>
        makeService('ns', `s${i}`, (s) => {
          withClusterIP(s, `172.30.1.${i + 1}`);
          s.spec.ports = [svcPort('http', 80)];
        }),
      ),
      slices: Array.from({ length: n }, (_, i) =>
        makeSlice('ns', `s${i}`, 1, (s) => {
          s.endpoints = [endpoint(`10.1.1.${i + 1}`)];
          s.ports = [slicePort('http', 8080)];
        }),
      ),
      family: 'IPv4',
    });
  const input = (st: ReturnType<typeof many>, changed: string[], growing: boolean): SnapshotUpdate => ({
    services: st.services,
    endpoints: new Map(
      [...st.services.values()].map((sp) => [`${sp.key}/TCP`, { name: sp.name, endpoints: st.endpoints.get(sp.key)! }]),
    ),
    portKeysOf: (svc) => [...st.services.values()].filter((sp) => sp.serviceKey === svc).map((sp) => sp.key),
    extra: new Map(),
    node: base.node, // one node object throughout: a new node rebuilds
    changedServices: new Set(changed),
    fullSync: false,
    serviceCIDRs: [],
    growing,
  });
  const small = many(2);
  const big = many(10);
  const added = Array.from({ length: 8 }, (_, i) => `ns/s${i + 2}`);
  const grown = new LiveSnapshot('IPv4');
  const rebuilt = new LiveSnapshot('IPv4');
  const first = finish(grown.updateSteps({ ...input(small, ['ns/s0', 'ns/s1'], true), fullSync: true }));
  const firstR = finish(rebuilt.updateSteps({ ...input(small, ['ns/s0', 'ns/s1'], false), fullSync: true }));
  // Eight Services added to two: four times what is held, far over the share that rebuilds.
  const patched = finish(grown.updateSteps(input(big, added, true)));
  const fresh = finish(rebuilt.updateSteps(input(big, added, false)));
  assert.equal(patched.services, first.services, 'patched in place');
  assert.notEqual(fresh.services, firstR.services, 'rebuilt without the hint');
  assert.deepEqual([...patched.changedServicePorts!].sort(), [...fresh.changedServicePorts!].sort());
  const sorted = <V>(m: ReadonlyMap<string, V>) => [...m].sort(([a], [b]) => (a < b ? -1 : 1));
  assert.deepEqual(sorted(patched.services), sorted(fresh.services));
  assert.deepEqual(sorted(patched.endpoints), sorted(fresh.endpoints));
  assert.deepEqual(sorted(patched.categorized), sorted(fresh.categorized));
  assert.equal(patched.services.size, 10);
});
