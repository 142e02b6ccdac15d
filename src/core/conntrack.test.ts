// Modelled on upstream pkg/proxy/conntrack/cleanup_test.go: for each stale
// UDP flow type (ClusterIP, externalIP, LB IP, NodePort) an entry is deleted
// iff its reply source is not a serving endpoint.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { staleUDPFlows } from './conntrack.js';
import type { ConntrackFlow } from './conntrack.js';
import { syncStateFromObjects } from './snapshot.js';
import {
  SERVING_TERMINATING,
  TERMINATING_NOT_SERVING,
  endpoint,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
  withLoadBalancerIngress,
} from '../../test/support/fixtures.js';

const CLUSTER_IP = '172.30.0.41';
const EXT_IP = '192.168.99.11';
const LB_IP = '1.2.3.4';
const NODE_PORT = 30053;
const SERVING = '10.180.0.1';
const TERMINATING_SERVING = '10.180.0.2';
const NOT_SERVING = '10.180.0.3';
const GONE = '10.180.0.9';

function state(udp = true) {
  const svc = makeService('ns1', 'dns', (s) => {
    withClusterIP(s, CLUSTER_IP);
    s.spec.type = 'LoadBalancer';
    s.spec.externalIPs = [EXT_IP];
    s.spec.ports = [svcPort('dns', 53, udp ? 'UDP' : 'TCP', { nodePort: NODE_PORT })];
  });
  withLoadBalancerIngress(svc, LB_IP);
  const slice = makeSlice('ns1', 'dns', 1, (s) => {
    s.ports = [slicePort('dns', 53, udp ? 'UDP' : 'TCP')];
    s.endpoints = [
      endpoint(SERVING),
      endpoint(TERMINATING_SERVING, SERVING_TERMINATING),
      endpoint(NOT_SERVING, TERMINATING_NOT_SERVING),
    ];
  });
  return syncStateFromObjects({ services: [svc], slices: [slice], family: 'IPv4' });
}

const flow = (
  origDst: string,
  origDstPort: number,
  replySrc: string,
  replySrcPort = 53,
  proto = 'UDP',
): ConntrackFlow => ({ proto, origDst, origDstPort, replySrc, replySrcPort });

for (const [what, dst, port] of [
  ['ClusterIP', CLUSTER_IP, 53],
  ['externalIP', EXT_IP, 53],
  ['LB IP', LB_IP, 53],
  ['NodePort', '192.168.0.2', NODE_PORT],
] as const) {
  test(`${what}: entries to a non-serving backend are stale, to serving backends kept`, () => {
    const flows = [
      flow(dst, port, SERVING),
      flow(dst, port, TERMINATING_SERVING),
      flow(dst, port, NOT_SERVING),
      flow(dst, port, GONE),
      flow(dst, port, SERVING, 54),
    ];
    assert.deepEqual(staleUDPFlows(state(), flows), [flows[2], flows[3], flows[4]]);
  });
}

test('non-UDP entries, other ports and other destinations are never touched', () => {
  const flows = [
    flow(CLUSTER_IP, 53, GONE, 53, 'TCP'),
    flow(CLUSTER_IP, 54, GONE),
    flow('172.30.0.99', 53, GONE),
    flow('bogus', 53, GONE),
  ];
  assert.deepEqual(staleUDPFlows(state(), flows), []);
});

test('TCP services produce no deletions', () => {
  assert.deepEqual(staleUDPFlows(state(false), [flow(CLUSTER_IP, 53, GONE)]), []);
});

test('a UDP service without serving endpoints: every entry to it is stale (kubernetes #139629)', () => {
  const svc = makeService('ns1', 'dns', (s) => {
    withClusterIP(s, CLUSTER_IP);
    s.spec.type = 'NodePort';
    s.spec.ports = [svcPort('dns', 53, 'UDP', { nodePort: NODE_PORT })];
  });
  const slice = makeSlice('ns1', 'dns', 1, (s) => {
    s.ports = [slicePort('dns', 53, 'UDP')];
    s.endpoints = [endpoint(NOT_SERVING, TERMINATING_NOT_SERVING)];
  });
  const st = syncStateFromObjects({ services: [svc], slices: [slice], family: 'IPv4' });
  const flows = [flow(CLUSTER_IP, 53, GONE), flow('192.168.0.2', NODE_PORT, NOT_SERVING), flow(CLUSTER_IP, 54, GONE)];
  assert.deepEqual(staleUDPFlows(st, flows), [flows[0], flows[1]]);
  // Without any slice at all, too.
  const bare = syncStateFromObjects({ services: [svc], slices: [], family: 'IPv4' });
  assert.deepEqual(staleUDPFlows(bare, flows), [flows[0], flows[1]]);
});

test('deleted UDP service ports: every entry to their frontends is stale (kubernetes #141371)', () => {
  const before = state();
  const deleted = [...before.services.values()];
  const empty = syncStateFromObjects({ services: [], slices: [], family: 'IPv4' });
  const flows = [
    flow(CLUSTER_IP, 53, SERVING),
    flow(EXT_IP, 53, SERVING),
    flow(LB_IP, 53, SERVING),
    flow('192.168.0.2', NODE_PORT, SERVING),
    flow(CLUSTER_IP, 54, SERVING),
  ];
  assert.deepEqual(staleUDPFlows(empty, flows, deleted), flows.slice(0, 4));
  assert.deepEqual(staleUDPFlows(empty, flows), [], 'without the deleted ports nothing is known');
  // A deleted TCP port never matches.
  const tcp = [...state(false).services.values()];
  assert.deepEqual(staleUDPFlows(empty, flows, tcp), []);
});

test('a current Service reusing a deleted frontend wins', () => {
  const deleted = [...state().services.values()];
  // The same ClusterIP:53 now belongs to a new Service served by SERVING.
  const now = state();
  assert.deepEqual(staleUDPFlows(now, [flow(CLUSTER_IP, 53, SERVING)], deleted), []);
  assert.equal(staleUDPFlows(now, [flow(CLUSTER_IP, 53, GONE)], deleted).length, 1);
});

test('flow IPs are normalised before comparison', () => {
  assert.deepEqual(staleUDPFlows(state(), [flow('172.30.0.041', 53, '10.180.0.001')]), []);
  assert.equal(staleUDPFlows(state(), [flow('172.30.0.041', 53, '10.180.0.009')]).length, 1);
});
