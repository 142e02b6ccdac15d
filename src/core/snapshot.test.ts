import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildSyncState, countNoLocalEndpoints, syncStateFromObjects } from './snapshot.js';
import {
  EXTERNAL_IP,
  LB_IPS,
  TEST_NODE,
  endpoint,
  makeNode,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
  withLoadBalancerIngress,
} from '../../test/support/fixtures.js';

function lbService() {
  const svc = makeService('ns1', 'svc1', (s) => {
    withClusterIP(s, '172.30.0.41');
    s.spec.type = 'LoadBalancer';
    s.spec.ports = [svcPort('p80', 80, 'TCP', { nodePort: 3001 }), svcPort('dns', 53, 'UDP')];
    s.spec.externalIPs = [EXTERNAL_IP, 'fd00::1'];
    s.spec.externalTrafficPolicy = 'Local';
    s.spec.healthCheckNodePort = 30000;
  });
  return withLoadBalancerIngress(svc, LB_IPS[0], { ip: LB_IPS[1], ipMode: 'Proxy' });
}

test('syncStateFromObjects runs JSON through intake, topology and sorting', () => {
  const slice = makeSlice('ns1', 'svc1', 1, (s) => {
    s.endpoints = [endpoint('10.180.0.8', { nodeName: TEST_NODE }), endpoint('10.180.0.10', { nodeName: 'node2' })];
    s.ports = [slicePort('p80', 80), slicePort('dns', 53, 'UDP')];
  });
  const st = syncStateFromObjects({
    services: [lbService()],
    slices: [slice],
    family: 'IPv4',
    serviceCIDRs: ['172.30.0.0/16', 'fd00::/108'],
  });
  assert.deepEqual([...st.services.keys()], ['ns1/svc1:dns', 'ns1/svc1:p80']);
  const p80 = st.services.get('ns1/svc1:p80')!;
  assert.deepEqual(p80.externalIPs, [EXTERNAL_IP]);
  assert.deepEqual(p80.loadBalancerVIPs, ['1.2.3.4']);
  assert.equal(p80.nodePort, 3001);
  assert.equal(p80.healthCheckNodePort, 30000);
  assert.deepEqual(
    st.endpoints.get('ns1/svc1:p80')!.map((e) => e.key),
    ['10.180.0.10:80', '10.180.0.8:80'],
  );
  const cat = st.categorized.get('ns1/svc1:p80')!;
  assert.deepEqual(
    cat.localEndpoints!.map((e) => e.key),
    ['10.180.0.8:80'],
  );
  assert.deepEqual(
    cat.clusterEndpoints!.map((e) => e.key),
    ['10.180.0.10:80', '10.180.0.8:80'],
  );
  assert.deepEqual(st.serviceCIDRs, ['172.30.0.0/16']);
  assert.equal(st.fullSync, true);
  assert.deepEqual([...st.changedServices], ['ns1/svc1']);
  assert.equal(st.node.name, TEST_NODE);
});

test('syncStateFromObjects keeps the node labels and IPs', () => {
  const st = syncStateFromObjects({
    services: [],
    slices: [],
    family: 'IPv4',
    node: makeNode(TEST_NODE, { zone: 'z1' }),
  });
  assert.equal(st.node.labels['topology.kubernetes.io/zone'], 'z1');
  assert.equal(st.node.nodeIPs.IPv4, '192.168.0.2');
});

test('endpoints of another protocol are not attached to a port', () => {
  const slice = makeSlice('ns1', 'svc1', 1, (s) => {
    s.endpoints = [endpoint('10.180.0.1')];
    s.ports = [slicePort('dns', 53, 'TCP')];
  });
  const st = syncStateFromObjects({ services: [lbService()], slices: [slice], family: 'IPv4' });
  assert.deepEqual(st.endpoints.get('ns1/svc1:dns'), []);
  assert.equal(st.categorized.get('ns1/svc1:dns')!.hasAnyEndpoints, false);
});

test('countNoLocalEndpoints: Local policy without local endpoints counts only when endpoints exist', () => {
  const svc = makeService('ns1', 'itp', (s) => {
    withClusterIP(s, '172.30.0.42');
    s.spec.ports = [svcPort('p80', 80)];
    s.spec.internalTrafficPolicy = 'Local';
  });
  const remote = makeSlice('ns1', 'itp', 1, (s) => {
    s.endpoints = [endpoint('10.180.1.1', { nodeName: 'other' })];
    s.ports = [slicePort('p80', 80)];
  });
  const withRemote = syncStateFromObjects({ services: [svc, lbService()], slices: [remote], family: 'IPv4' });
  assert.deepEqual(countNoLocalEndpoints(withRemote), { internal: 1, external: 0 });
  const none = syncStateFromObjects({ services: [svc], slices: [], family: 'IPv4' });
  assert.deepEqual(countNoLocalEndpoints(none), { internal: 0, external: 0 });
});

test('buildSyncState drops service ports of the other family', () => {
  const v6 = syncStateFromObjects({
    services: [
      makeService('ns1', 's6', (s) => {
        withClusterIP(s, 'fd00::10');
        s.spec.ports = [svcPort('a', 80)];
      }),
    ],
    slices: [],
    family: 'IPv6',
  });
  const st = buildSyncState({
    family: 'IPv4',
    services: v6.services,
    endpoints: new Map(),
    node: v6.node,
    changedServices: new Set(),
    fullSync: false,
    serviceCIDRs: [],
  });
  assert.equal(st.services.size, 0);
  assert.equal(v6.services.get('ns1/s6:a')!.clusterIP, 'fd00::10');
});
