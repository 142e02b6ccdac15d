// The shared packet-flow table (test/cases/packetflow.ts) against the
// userspace mode: the driver's objects planned by the reconciler -> listeners opened in the
// Fake -> the table's transaction -> Fake.run (userspace-fixtures.ts) -> trace. The relay terminates every
// connection, so some of the table's promises do not hold for this mode;
// each is listed below with the reason (README "What userspace mode does not do").
import { runPacketFlowTable } from '../cases/runtable.js';
import { trace } from '../../src/dataplane/userspace/index.js';
import { loadScenario } from './userspace-fixtures.js';

const isEndpointList = (output: string) => output !== '' && !['REJECT', 'DROP', 'ACCEPT'].includes(output);

const NO_SHORT_CIRCUIT =
  'userspace cannot short-circuit pod and node traffic to external addresses under externalTrafficPolicy Local: ' +
  'a listener cannot tell where a flow came from or was sent to, so every flow to such a portal uses the local endpoints only';
const NO_SOURCE_RANGES = 'userspace does not enforce loadBalancerSourceRanges (not implemented)';

runPacketFlowTable({
  mode: 'userspace',
  load: (s) => loadScenario(s).fake,
  trace: (fake, packet, localIPs) => trace(fake, packet, localIPs),
  skip: [
    {
      reason:
        'userspace does not preserve client IP: the relay opens a new connection from the node, so every endpoint sees the node as the client',
      part: 'masq',
      when: (_s, _f, want) => !want.masq && isEndpointList(want.output),
    },
    {
      reason: 'userspace has no SCTP relay: Node has no SCTP sockets',
      scenarios: ['ClusterIPGeneral'],
      flows: ['clusterIP with TCP, UDP, SCTP on one port (SCTP)'],
    },
    {
      reason: 'userspace writes no rule for unallocated ServiceCIDR addresses (as iptables): they are routed on',
      scenarios: ['ClusterIPGeneral'],
      flows: ['unallocated IP inside the ServiceCIDR'],
    },
    {
      reason: NO_SOURCE_RANGES,
      scenarios: ['LoadBalancer with loadBalancerSourceRanges'],
      flows: [
        'LB traffic from outside the ranges is dropped (first IP)',
        'LB traffic from outside the ranges is dropped (second IP)',
        'pod to LB IP is subject to the ranges',
      ],
    },
    {
      reason: NO_SOURCE_RANGES,
      scenarios: [
        'LoadBalancer (IPv6): source ranges and eTP Local',
        'BadIPs (leading zeros are parsed sloppily and normalised)',
      ],
      flows: ['external outside the range to LB IP'],
    },
    {
      reason: NO_SHORT_CIRCUIT,
      scenarios: ['ExternalTrafficPolicyLocal'],
      flows: ['pod to external IP (short-circuit)', 'pod to LB IP (short-circuit)', 'pod to nodePort (short-circuit)'],
    },
    {
      reason: NO_SHORT_CIRCUIT,
      scenarios: ['InternalExternalMasquerade', 'InternalExternalMasquerade (masqueradeAll)'],
      flows: ['svc2: pod to nodePort', 'svc2: pod to LB', 'svc2: node to nodePort', 'svc2: node to LB'],
    },
    {
      reason: NO_SHORT_CIRCUIT,
      scenarios: ['InternalExternalMasquerade (no LocalTrafficDetector)'],
      flows: ['svc2: node to nodePort', 'svc2: node to LB'],
    },
    {
      reason: NO_SHORT_CIRCUIT,
      scenarios: ['TracePacket: eTP Local external IP without local endpoints'],
      flows: ['node to external IP is short-circuited to the cluster chain'],
    },
    {
      reason: NO_SHORT_CIRCUIT,
      scenarios: ['LoadBalancer (IPv6): source ranges and eTP Local'],
      flows: ['eTP Local: pod to LB IP is short-circuited'],
    },
    {
      reason:
        'userspace writes no ACCEPT rule for health check node ports: its table has no filter rule that could drop them',
      scenarios: ['HealthCheckNodePort', 'HealthCheckNodePort (nodePortAddresses 127.0.0.0/8)'],
    },
  ],
});
