// IPVS mode against the shared packet-flow table: each scenario is planned
// by IpvsDriver and the reconciler, loaded into the IPVS Fake (virtual servers, ipsets,
// kube-ipvs0 addresses, iptables rules) and every flow traced through it.
// Where IPVS behaves differently from the iptables and nftables modes (no
// pod short-circuit for eTP Local, port unreachable instead of DROP, the
// #97081 fallback), the table carries `expected.ipvs` with the reason.
import { runPacketFlowTable } from '../cases/runtable.js';
import { scenarioConfig, scenarioSyncState } from '../cases/resolve.js';
import { Fake, trace } from '../../src/dataplane/ipvs/index.js';
import { LOCAL_IPS_V4, LOCAL_IPS_V6 } from '../cases/fixtures.js';
import { loadState } from '../support/ipvsload.js';

runPacketFlowTable({
  mode: 'ipvs',
  load: (s) => {
    const fake = new Fake({ nodeAddresses: [...LOCAL_IPS_V4, ...LOCAL_IPS_V6] });
    loadState(fake, scenarioSyncState(s), scenarioConfig(s, 'ipvs'));
    return fake;
  },
  trace: (fake, packet, localIPs) => trace(fake, packet, localIPs),
});
