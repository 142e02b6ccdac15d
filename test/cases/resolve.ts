// Turning a packet-flow Scenario into what a datapath renders: the SyncState
// (through the real intake code, syncStateFromObjects) and the resolved
// DataplaneConfig for one mode. Mode defaults: nodePortAddresses is "all" for
// iptables/ipvs and "primary" for nftables (upstream platformApplyDefaults in cmd/kube-proxy/app/server_linux.go) and ebpf.

import { parseCIDR } from '../../src/core/ip.js';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig, ProxyMode, SyncState } from '../../src/core/types.js';
import {
  LOCAL_IPS_V4,
  LOCAL_IPS_V6,
  NODE_IP,
  NODE_IP6,
  POD_CIDR,
  POD_CIDR6,
  SERVICE_CIDR,
  SERVICE_CIDR6,
  TEST_NODE_NAME,
} from './fixtures.js';
import type { Scenario } from './packetflow.js';

export function scenarioSyncState(s: Scenario): SyncState {
  return syncStateFromObjects({
    services: s.setup.services,
    slices: s.setup.slices,
    family: s.family,
    nodeName: TEST_NODE_NAME,
    nodeIPs: { IPv4: NODE_IP, IPv6: NODE_IP6 },
    serviceCIDRs: [SERVICE_CIDR, SERVICE_CIDR6],
  });
}

export function scenarioLocalIPs(s: Scenario): readonly string[] {
  return s.family === 'IPv4' ? LOCAL_IPS_V4 : LOCAL_IPS_V6;
}

/** Expand nodePortAddresses keywords (upstream expandNodePortAddressKeywords) for the scenario's family. */
function expandNodePortAddresses(raw: readonly string[], v4: boolean): string[] {
  const out: string[] = [];
  for (const r of raw) {
    if (r === 'primary') out.push(v4 ? `${NODE_IP}/32` : `${NODE_IP6}/128`);
    else if (r === 'localhost') out.push(v4 ? '127.0.0.0/8' : '::1/128');
    else if (r === 'all') out.push(v4 ? '0.0.0.0/0' : '::/0');
    else {
      const c = parseCIDR(r);
      if (c && c.family === (v4 ? 'IPv4' : 'IPv6')) out.push(c.text);
    }
  }
  return out;
}

export function scenarioConfig(s: Scenario, mode: ProxyMode): DataplaneConfig {
  const v4 = s.family === 'IPv4';
  const c = s.setup.config ?? {};
  const rawNpa = c.nodePortAddresses ?? (mode === 'nftables' || mode === 'ebpf' ? ['primary'] : null);
  return {
    family: s.family,
    masqueradeMark: 0x4000,
    masqueradeAll: c.masqueradeAll ?? false,
    localDetector: c.detectLocal === false ? { kind: 'none' } : { kind: 'cidr', cidrs: [v4 ? POD_CIDR : POD_CIDR6] },
    nodePortAddresses: rawNpa === null ? null : expandNodePortAddresses(rawNpa, v4),
    // As resolveDataplaneConfig: only iptables serves NodePorts on localhost (nftables ignores the setting).
    localhostNodePorts: mode === 'iptables' ? (c.localhostNodePorts ?? true) : false,
    localIPs: scenarioLocalIPs(s),
  };
}
