import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ServiceChangeTracker, applyServiceChanges } from './servicechangetracker.js';
import type { ServicePortMap } from './servicechangetracker.js';
import { EndpointsChangeTracker, applyEndpointsChanges, lastChangeTriggerTime } from './endpointschangetracker.js';
import type { MutableEndpointsMap } from './endpointschangetracker.js';
import {
  TEST_NODE,
  endpoint,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
} from '../../test/support/fixtures.js';

const svc = (ports = [svcPort('p80', 80), svcPort('dns', 53, 'UDP')], ip = '172.30.0.41') =>
  makeService('ns1', 'svc1', (s) => {
    withClusterIP(s, ip);
    s.spec.ports = ports;
  });

test('service tracker: add, then apply', () => {
  const t = new ServiceChangeTracker('IPv4');
  assert.equal(t.update(null, svc()), true);
  assert.equal(t.pendingCount(), 1);
  const map: ServicePortMap = new Map();
  const r = applyServiceChanges(map, t.checkout());
  assert.deepEqual([...r.updatedServices], ['ns1/svc1']);
  assert.deepEqual([...map.keys()].sort(), ['ns1/svc1:dns', 'ns1/svc1:p80']);
  assert.equal(r.deletedUDPServicePorts.size, 0);
  assert.equal(t.pendingCount(), 0);
});

test('service tracker: add then delete before a sync cancels out', () => {
  const t = new ServiceChangeTracker('IPv4');
  t.update(null, svc());
  assert.equal(t.update(svc(), null), false);
  assert.equal(t.pendingCount(), 0);
  assert.equal(t.checkout().size, 0);
});

test('service tracker: an update to an identical spec is no change', () => {
  const t = new ServiceChangeTracker('IPv4');
  const a = svc();
  const b = svc();
  b.metadata.resourceVersion = '2';
  assert.equal(t.update(a, b), false);
});

test('service tracker: removing a UDP port reports its ClusterIP; delete removes all ports', () => {
  const t = new ServiceChangeTracker('IPv4');
  const map: ServicePortMap = new Map();
  t.update(null, svc());
  applyServiceChanges(map, t.checkout());
  t.update(svc(), svc([svcPort('p80', 80)]));
  let r = applyServiceChanges(map, t.checkout());
  assert.deepEqual(
    [...r.deletedUDPServicePorts.values()].map((sp) => sp.clusterIP),
    ['172.30.0.41'],
  );
  assert.deepEqual([...map.keys()], ['ns1/svc1:p80']);
  t.update(svc([svcPort('p80', 80)]), null);
  r = applyServiceChanges(map, t.checkout());
  assert.equal(map.size, 0);
  assert.deepEqual([...r.updatedServices], ['ns1/svc1']);
});

test('service tracker: garbage is reported and does not disturb pending changes', () => {
  const skips: string[] = [];
  const t = new ServiceChangeTracker('IPv4', (k, r) => skips.push(`${k}:${r}`));
  t.update(null, svc());
  assert.equal(t.update(null, { metadata: {} } as never), true, 'still has the earlier pending change');
  assert.equal(skips.length, 1);
  assert.equal(t.pendingCount(), 1);
});

const slice = (ips: string[], port = slicePort('dns', 53, 'UDP'), trigger?: string) =>
  makeSlice('ns1', 'svc1', 1, (s) => {
    s.ports = [port];
    s.endpoints = ips.map((ip) => endpoint(ip, { nodeName: TEST_NODE }));
    if (trigger) s.metadata.annotations = { 'endpoints.kubernetes.io/last-change-trigger-time': trigger };
  });

test('endpoints tracker: apply, UDP needs conntrack cleanup, trigger times after start only', () => {
  const start = Date.parse('2026-01-01T00:00:00Z');
  const t = new EndpointsChangeTracker(TEST_NODE, 'IPv4', start);
  assert.equal(t.endpointSliceUpdate(slice(['10.0.0.1'], undefined, '2025-12-31T23:59:00Z'), false), true);
  const map: MutableEndpointsMap = new Map();
  let r = applyEndpointsChanges(map, t.checkout());
  assert.deepEqual([...r.updatedServices], ['ns1/svc1']);
  assert.equal(r.conntrackCleanupRequired, true);
  assert.equal(r.lastChangeTriggerTimes.size, 0, 'trigger time before tracker start is ignored');
  t.endpointSliceUpdate(slice(['10.0.0.2'], undefined, '2026-01-01T00:00:05Z'), false);
  r = applyEndpointsChanges(map, t.checkout());
  assert.deepEqual(r.lastChangeTriggerTimes.get('ns1/svc1'), [start + 5000]);
  assert.deepEqual(
    [...map.values()][0]!.endpoints.map((e) => e.key),
    ['10.0.0.2:53'],
  );
});

test('endpoints tracker: TCP-only changes need no conntrack cleanup; deletion drops trigger times', () => {
  const t = new EndpointsChangeTracker(TEST_NODE, 'IPv4', 0);
  const tcp = slice(['10.0.0.1'], slicePort('p80', 80), '2026-01-01T00:00:05Z');
  t.endpointSliceUpdate(tcp, false);
  t.endpointSliceUpdate(tcp, true);
  const map: MutableEndpointsMap = new Map();
  const r = applyEndpointsChanges(map, t.checkout());
  assert.equal(r.conntrackCleanupRequired, false);
  assert.equal(r.lastChangeTriggerTimes.size, 0);
  assert.equal(map.size, 0);
});

test('endpoints tracker: removing a port drops it from the map', () => {
  const t = new EndpointsChangeTracker(TEST_NODE, 'IPv4', 0);
  const map: MutableEndpointsMap = new Map();
  const two = makeSlice('ns1', 'svc1', 1, (s) => {
    s.ports = [slicePort('a', 80), slicePort('b', 81)];
    s.endpoints = [endpoint('10.0.0.1')];
  });
  const one = makeSlice('ns1', 'svc1', 1, (s) => {
    s.ports = [slicePort('a', 80)];
    s.endpoints = [endpoint('10.0.0.1')];
  });
  t.endpointSliceUpdate(two, false);
  applyEndpointsChanges(map, t.checkout());
  assert.equal(map.size, 2);
  t.endpointSliceUpdate(one, false);
  applyEndpointsChanges(map, t.checkout());
  assert.deepEqual([...map.keys()], ['ns1/svc1:a/TCP']);
});

test('lastChangeTriggerTime parses RFC 3339 and rejects junk', () => {
  const s = slice([], undefined, '2026-01-01T00:00:00Z');
  assert.equal(lastChangeTriggerTime(s), Date.parse('2026-01-01T00:00:00Z'));
  assert.equal(lastChangeTriggerTime(slice([], undefined, 'yesterday')), null);
  assert.equal(lastChangeTriggerTime(slice([])), null);
});
