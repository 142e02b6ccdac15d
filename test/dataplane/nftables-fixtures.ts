// Shared nftables test inputs: the worked example (a NodePort Service with a local
// and a remote endpoint) whose full sync the nftables goldens hold.
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../src/core/types.js';
import type { PacketFlowSkip } from '../cases/runtable.js';
import { endpoint, makeNode, makeService, makeSlice, slicePort, svcPort, withClusterIP } from '../support/fixtures.js';

/**
 * default/web NodePort 80->8080 (nodePort 30080), clusterIP 10.96.100.10,
 * endpoints 10.244.1.5 (local, node-a) and 10.244.2.7; node IP 192.168.0.10,
 * ServiceCIDR 10.96.0.0/12, ClusterCIDR detector 10.244.0.0/16. With
 * `withEmpty`, also default/empty (10.96.100.11, dns 53/UDP) without endpoints.
 */
export function workedExample(withEmpty = false): { state: SyncState; config: DataplaneConfig } {
  const svc = withClusterIP(
    makeService('default', 'web', (s) => {
      s.spec.type = 'NodePort';
      s.spec.ports = [svcPort('http', 80, 'TCP', { targetPort: 8080, nodePort: 30080 })];
    }),
    '10.96.100.10',
  );
  const empty = withClusterIP(
    makeService('default', 'empty', (s) => {
      s.spec.ports = [svcPort('dns', 53, 'UDP')];
    }),
    '10.96.100.11',
  );
  const slice = makeSlice('default', 'web', 1, (s) => {
    s.endpoints = [
      endpoint('10.244.1.5', { nodeName: 'node-a', ready: true }),
      endpoint('10.244.2.7', { nodeName: 'node-b', ready: true }),
    ];
    s.ports = [slicePort('http', 8080)];
  });
  const state = syncStateFromObjects({
    services: withEmpty ? [svc, empty] : [svc],
    slices: [slice],
    family: 'IPv4',
    nodeName: 'node-a',
    node: makeNode('node-a', { internalIPs: ['192.168.0.10'] }),
    serviceCIDRs: ['10.96.0.0/12'],
  });
  const config: DataplaneConfig = {
    family: 'IPv4',
    masqueradeMark: 1 << 14,
    masqueradeAll: false,
    localDetector: { kind: 'cidr', cidrs: ['10.244.0.0/16'] },
    nodePortAddresses: ['192.168.0.10/32'],
    localhostNodePorts: false,
    localIPs: ['127.0.0.1', '192.168.0.10'],
  };
  return { state, config };
}

/** The packet-flow cases nftables does not honour, with the reason (see test/cases/runtable.ts). */
export const NFTABLES_FLOW_SKIPS: readonly PacketFlowSkip[] = [
  {
    reason:
      'nftables writes no ACCEPT rule for health check node ports: its table has no filter rule that could drop them (upstream does the same)',
    scenarios: ['HealthCheckNodePort', 'HealthCheckNodePort (nodePortAddresses 127.0.0.0/8)'],
  },
];
