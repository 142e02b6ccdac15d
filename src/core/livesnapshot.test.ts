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
