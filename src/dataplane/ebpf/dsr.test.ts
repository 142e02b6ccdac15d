// --ebpf-lb-mode=dsr, pure side: what the planner writes for the programs'
// DSR (src/bpf/dsr.h): CFG_DSR in the family's settings, and for an
// external port with externalTrafficPolicy Cluster a local set holding this
// node's endpoints with their membership entries (how the programs tell an
// endpoint on this node); in snat mode neither. The endpoint choice is
// unchanged: the svc entry's cluster set and its flags stay as they were.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { DataplaneConfig } from '../../core/types.js';
import { endpoint, makeService, makeSlice, slicePort, svcPort, withClusterIP } from '../../../test/support/fixtures.js';
import { Fake } from './fake.js';
import { trace } from './trace.js';
import * as L from './layout.js';
import { EbpfPlanner } from '../../platform/ebpf/planner.js';

const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.244.0.0/16'] },
  nodePortAddresses: null,
  localhostNodePorts: false,
  localIPs: ['192.168.0.10'],
};

/**
 * NodePort Services "np" (30080) and "itp" (30081, internalTrafficPolicy Local) and a ClusterIP one "cip",
 * each with an endpoint here and one elsewhere.
 */
const STATE = syncStateFromObjects({
  services: [
    withClusterIP(
      makeService('default', 'np', (s) => {
        s.spec.type = 'NodePort';
        s.spec.ports = [svcPort('http', 80, 'TCP', { targetPort: 8080, nodePort: 30080 })];
      }),
      '10.96.0.1',
    ),
    withClusterIP(
      makeService('default', 'cip', (s) => {
        s.spec.ports = [svcPort('http', 80, 'TCP', { targetPort: 8080 })];
      }),
      '10.96.0.2',
    ),
    // internalTrafficPolicy Local, externalTrafficPolicy Cluster: its local set is the iTP one, with members.
    withClusterIP(
      makeService('default', 'itp', (s) => {
        s.spec.type = 'NodePort';
        s.spec.internalTrafficPolicy = 'Local';
        s.spec.ports = [svcPort('http', 80, 'TCP', { targetPort: 8080, nodePort: 30081 })];
      }),
      '10.96.0.3',
    ),
  ],
  slices: ['np', 'cip', 'itp'].map((name, i) =>
    makeSlice('default', name, 1, (s) => {
      s.endpoints = [
        endpoint(`10.244.1.${i + 1}`, { nodeName: 'node-a', ready: true }),
        endpoint(`10.244.2.${i + 1}`, { nodeName: 'node-b', ready: true }),
      ];
      s.ports = [slicePort('http', 8080)];
    }),
  ),
  family: 'IPv4',
  nodeName: 'node-a',
  serviceCIDRs: ['10.96.0.0/12'],
});

function planned(dsr: boolean) {
  const planner = new EbpfPlanner(CONFIG, { dsr });
  const fake = new Fake();
  fake.apply(planner.plan({ state: STATE }).ops);
  const svc = (addr: string, port: number) => {
    const v = fake.lookup('svc', L.encodeSvcKey({ addr, port, proto: 'TCP' }));
    return v && L.decodeSvcValue(v);
  };
  const member = (setId: number, addr: string) =>
    fake.lookup('members', L.encodeMemberKey({ setId, addr, port: 8080 })) !== null;
  const flags = L.decodeCfgValue(fake.lookup('cfg', L.encodeU32(0))!).flags;
  /** The tracer's masquerade verdict for a new connection from `src` to the node's NodePort. */
  const masq = (src: string) => trace(fake, { src, dst: '192.168.0.10', port: 30080 }, CONFIG.localIPs).masq;
  return { svc, member, flags, masq };
}

test("dsr mode: CFG_DSR, and a local set of this node's endpoints for the NodePort, with members", () => {
  const p = planned(true);
  assert.equal(p.flags & L.CFG_DSR, L.CFG_DSR);
  const np = p.svc('0.0.0.0', 30080)!;
  assert.ok(np.localSet !== 0 && np.clusterSet !== 0);
  assert.equal(np.flags & L.SVC_LOCAL_POLICY, 0, 'still eTP Cluster: the programs choose from the cluster set');
  assert.deepEqual([p.member(np.localSet, '10.244.1.1'), p.member(np.localSet, '10.244.2.1')], [true, false]);
  const itp = p.svc('0.0.0.0', 30081)!;
  assert.deepEqual([p.member(itp.localSet, '10.244.1.3'), p.member(itp.localSet, '10.244.2.3')], [true, false]);
  assert.equal(p.masq('203.0.113.7'), false, 'the tracer: a client from outside is not masqueraded');
  assert.equal(p.masq('10.244.1.77'), true, 'the tracer: a pod is');
  assert.equal(p.svc('10.96.0.2', 80)!.localSet, 0, 'not external: no local set');
});

test('snat mode (the default): no CFG_DSR, no local set for an eTP Cluster port', () => {
  const p = planned(false);
  assert.equal(p.flags & L.CFG_DSR, 0);
  const np = p.svc('0.0.0.0', 30080)!;
  assert.equal(np.localSet, 0);
  assert.equal(p.masq('203.0.113.7'), true);
});
