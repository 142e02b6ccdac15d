// The shared packet-flow table (test/cases/packetflow.ts) against the
// nftables mode: NftablesPlanner -> Fake -> trace, once per endpoint
// layout, with the nftables expectations (REJECT for wrong ports, DROP for
// unallocated ServiceCIDR IPs, NodePorts on the primary node IP by default).
import type { Scenario } from '../cases/packetflow.js';
import { scenarioConfig, scenarioSyncState } from '../cases/resolve.js';
import { runPacketFlowTable } from '../cases/runtable.js';
import { ENDPOINT_LAYOUTS, Fake, nftFamily, trace, type EndpointLayout } from '../../src/dataplane/nftables/index.js';
import { NftablesPlanner } from '../../src/platform/nftables/planner.js';
import { NFTABLES_FLOW_SKIPS } from './nftables-fixtures.js';

export function loadScenario(s: Scenario, layout: EndpointLayout): Fake {
  const fake = new Fake(nftFamily(s.family));
  fake.run(new NftablesPlanner(scenarioConfig(s, 'nftables'), layout).plan(scenarioSyncState(s), 0, null).tx);
  return fake;
}

// Every endpoint layout must behave identically (see static.ts EndpointLayout); the production one runs first.
for (const layout of ENDPOINT_LAYOUTS) {
  runPacketFlowTable({
    mode: 'nftables',
    label: `nftables (${layout})`,
    load: (s) => loadScenario(s, layout),
    trace: (fake, packet, localIPs) => trace(fake, packet, localIPs),
    skip: NFTABLES_FLOW_SKIPS,
  });
}
