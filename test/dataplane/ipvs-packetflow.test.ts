// IPVS mode against the shared packet-flow table: each scenario is rendered
// by IpvsRenderer, loaded into the IPVS Fake (virtual servers, ipsets,
// kube-ipvs0 addresses, iptables rules) and every flow traced through it.
// Where IPVS behaves differently from the iptables and nftables modes (no
// pod short-circuit for eTP Local, port unreachable instead of DROP, the
// #97081 fallback), the table carries `expected.ipvs` with the reason.
import { runPacketFlowTable } from '../cases/runtable.js';
import { scenarioConfig, scenarioSyncState } from '../cases/resolve.js';
import { Fake, IpvsRenderer, loadRender, trace } from '../../src/dataplane/ipvs/index.js';
import { LOCAL_IPS_V4, LOCAL_IPS_V6 } from '../cases/fixtures.js';

runPacketFlowTable({
  mode: 'ipvs',
  load: (s) => {
    const fake = new Fake({ nodeAddresses: [...LOCAL_IPS_V4, ...LOCAL_IPS_V6] });
    const render = new IpvsRenderer().render({ state: scenarioSyncState(s), config: scenarioConfig(s, 'ipvs') });
    loadRender(fake, render, s.family);
    return fake;
  },
  trace: (fake, packet, localIPs) => trace(fake, packet, localIPs),
});
