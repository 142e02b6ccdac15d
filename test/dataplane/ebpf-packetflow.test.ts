// The shared packet-flow table (test/cases/packetflow.ts) against the ebpf
// mode: EbpfPlanner (the driver under the reconciler) -> Fake -> trace. The ebpf mode takes nftables' side
// where the modes differ (REJECT for ports a ClusterIP does not define, DROP
// for unallocated ServiceCIDR addresses, NodePorts on the primary node IP by
// default).
import { scenarioConfig, scenarioSyncState } from '../cases/resolve.js';
import { runPacketFlowTable } from '../cases/runtable.js';
import { Fake, trace } from '../../src/dataplane/ebpf/index.js';
import { EbpfPlanner } from '../../src/platform/ebpf/planner.js';

runPacketFlowTable({
  mode: 'ebpf',
  load: (s) => {
    const fake = new Fake();
    fake.apply(new EbpfPlanner(scenarioConfig(s, 'ebpf')).plan({ state: scenarioSyncState(s) }).ops);
    return fake;
  },
  trace: (fake, packet, localIPs) => trace(fake, packet, localIPs),
  skip: [
    {
      reason:
        'the ebpf mode writes no ACCEPT for health check node ports: nothing of it could drop them (as nftables mode)',
      scenarios: ['HealthCheckNodePort', 'HealthCheckNodePort (nodePortAddresses 127.0.0.0/8)'],
    },
    {
      reason: 'the ebpf programs do not translate SCTP (its CRC32c checksum cannot be updated incrementally)',
      when: (_s, f) => f.protocol === 'SCTP',
    },
  ],
});
