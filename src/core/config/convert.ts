// Conversion between the v1alpha1 file format and the resolved (internal)
// configuration, as upstream's hand-written conversion.go: the sync periods
// and masqueradeAll of the *selected mode's* section become the single
// syncPeriod/minSyncPeriod/masqueradeAll, and clusterCIDR is split on commas.
// Converting back writes them into the selected mode's section only; the
// other sections' sync periods come out as 0s (upstream does the same, and
// defaulting fills them in again when the file is read back).

import { formatDuration, parseDuration, durationToMillis, type Duration } from './duration.js';
import {
  GROUP_VERSION,
  KIND,
  NODE_PORT_ADDRESSES_PRIMARY,
  type KubeProxyConfigurationV1Alpha1,
  type ResolvedConfig,
  type ResolvedTiming,
} from './types.js';

function dur(s: string): Duration {
  return parseDuration(s);
}

function clone<T>(v: T): T {
  return structuredClone(v);
}

/** v1alpha1 (already defaulted) -> resolved; does not apply platform defaults. */
export function v1alpha1ToResolved(inp: KubeProxyConfigurationV1Alpha1): ResolvedConfig {
  const sections = { ipvs: inp.ipvs, nftables: inp.nftables } as const;
  const modeSection = inp.mode === 'ipvs' || inp.mode === 'nftables' ? sections[inp.mode] : inp.iptables;
  const masqueradeAll = inp.mode === 'nftables' ? inp.nftables.masqueradeAll : inp.iptables.masqueradeAll;
  const ct = inp.conntrack;
  return {
    featureGates: { ...inp.featureGates },
    clientConnection: { ...inp.clientConnection },
    logging: clone(inp.logging),
    hostnameOverride: inp.hostnameOverride,
    bindAddress: inp.bindAddress,
    healthzBindAddress: inp.healthzBindAddress,
    metricsBindAddress: inp.metricsBindAddress,
    bindAddressHardFail: inp.bindAddressHardFail,
    enableProfiling: inp.enableProfiling,
    showHiddenMetricsForVersion: inp.showHiddenMetricsForVersion,
    mode: inp.mode,
    iptables: { masqueradeBit: inp.iptables.masqueradeBit, localhostNodePorts: inp.iptables.localhostNodePorts },
    ipvs: {
      scheduler: inp.ipvs.scheduler,
      excludeCIDRs: [...(inp.ipvs.excludeCIDRs ?? [])],
      strictARP: inp.ipvs.strictARP,
      tcpTimeout: dur(inp.ipvs.tcpTimeout),
      tcpFinTimeout: dur(inp.ipvs.tcpFinTimeout),
      udpTimeout: dur(inp.ipvs.udpTimeout),
    },
    nftables: { masqueradeBit: inp.nftables.masqueradeBit },
    winkernel: { ...inp.winkernel },
    windowsRunAsService: inp.windowsRunAsService,
    linux: {
      masqueradeAll,
      oomScoreAdj: inp.oomScoreAdj,
      conntrack: {
        maxPerCore: ct.maxPerCore,
        min: ct.min,
        tcpEstablishedTimeout: ct.tcpEstablishedTimeout === null ? null : dur(ct.tcpEstablishedTimeout),
        tcpCloseWaitTimeout: ct.tcpCloseWaitTimeout === null ? null : dur(ct.tcpCloseWaitTimeout),
        tcpBeLiberal: ct.tcpBeLiberal,
        udpTimeout: dur(ct.udpTimeout),
        udpStreamTimeout: dur(ct.udpStreamTimeout),
      },
    },
    detectLocalMode: inp.detectLocalMode,
    detectLocal: {
      bridgeInterface: inp.detectLocal.bridgeInterface,
      interfaceNamePrefix: inp.detectLocal.interfaceNamePrefix,
      clusterCIDRs: inp.clusterCIDR.length > 0 ? inp.clusterCIDR.split(',') : [],
    },
    nodePortAddresses: [...(inp.nodePortAddresses ?? [])],
    syncPeriod: dur(modeSection.syncPeriod),
    minSyncPeriod: dur(modeSection.minSyncPeriod),
    configSyncPeriod: dur(inp.configSyncPeriod),
    portRange: inp.portRange,
  };
}

/** resolved -> v1alpha1, as upstream's Convert_config_..._To_v1alpha1_... */
export function resolvedToV1Alpha1(inp: ResolvedConfig): KubeProxyConfigurationV1Alpha1 {
  const f = formatDuration;
  const ct = inp.linux.conntrack;
  const out: KubeProxyConfigurationV1Alpha1 = {
    apiVersion: GROUP_VERSION,
    kind: KIND,
    featureGates: { ...inp.featureGates },
    clientConnection: { ...inp.clientConnection },
    logging: clone(inp.logging),
    hostnameOverride: inp.hostnameOverride,
    bindAddress: inp.bindAddress,
    healthzBindAddress: inp.healthzBindAddress,
    metricsBindAddress: inp.metricsBindAddress,
    bindAddressHardFail: inp.bindAddressHardFail,
    enableProfiling: inp.enableProfiling,
    showHiddenMetricsForVersion: inp.showHiddenMetricsForVersion,
    mode: inp.mode,
    iptables: {
      masqueradeBit: inp.iptables.masqueradeBit,
      masqueradeAll: false,
      localhostNodePorts: inp.iptables.localhostNodePorts,
      syncPeriod: '0s',
      minSyncPeriod: '0s',
    },
    ipvs: {
      syncPeriod: '0s',
      minSyncPeriod: '0s',
      scheduler: inp.ipvs.scheduler,
      excludeCIDRs: inp.ipvs.excludeCIDRs.length > 0 ? [...inp.ipvs.excludeCIDRs] : null,
      strictARP: inp.ipvs.strictARP,
      tcpTimeout: f(inp.ipvs.tcpTimeout),
      tcpFinTimeout: f(inp.ipvs.tcpFinTimeout),
      udpTimeout: f(inp.ipvs.udpTimeout),
    },
    nftables: {
      masqueradeBit: inp.nftables.masqueradeBit,
      masqueradeAll: false,
      syncPeriod: '0s',
      minSyncPeriod: '0s',
    },
    winkernel: { ...inp.winkernel },
    detectLocalMode: inp.detectLocalMode,
    detectLocal: {
      bridgeInterface: inp.detectLocal.bridgeInterface,
      interfaceNamePrefix: inp.detectLocal.interfaceNamePrefix,
    },
    clusterCIDR: inp.detectLocal.clusterCIDRs.join(','),
    nodePortAddresses: inp.nodePortAddresses.length > 0 ? [...inp.nodePortAddresses] : null,
    oomScoreAdj: inp.linux.oomScoreAdj,
    conntrack: {
      maxPerCore: ct.maxPerCore,
      min: ct.min,
      tcpEstablishedTimeout: ct.tcpEstablishedTimeout === null ? null : f(ct.tcpEstablishedTimeout),
      tcpCloseWaitTimeout: ct.tcpCloseWaitTimeout === null ? null : f(ct.tcpCloseWaitTimeout),
      tcpBeLiberal: ct.tcpBeLiberal,
      udpTimeout: f(ct.udpTimeout),
      udpStreamTimeout: f(ct.udpStreamTimeout),
    },
    configSyncPeriod: f(inp.configSyncPeriod),
    portRange: inp.portRange,
    windowsRunAsService: inp.windowsRunAsService,
  };
  if (inp.mode === 'nftables') out.nftables.masqueradeAll = inp.linux.masqueradeAll;
  else out.iptables.masqueradeAll = inp.linux.masqueradeAll;
  const section = inp.mode === 'ipvs' ? out.ipvs : inp.mode === 'nftables' ? out.nftables : out.iptables;
  section.syncPeriod = f(inp.syncPeriod);
  section.minSyncPeriod = f(inp.minSyncPeriod);
  return out;
}

/**
 * Upstream platformApplyDefaults (Linux): mode "" -> iptables; nftables with
 * no nodePortAddresses -> ["primary"]; detectLocalMode "" -> ClusterCIDR.
 * Mutates and returns config.
 */
export function platformApplyDefaults(config: ResolvedConfig): ResolvedConfig {
  if (config.mode === '') config.mode = 'iptables';
  // Our ebpf mode takes nftables' default: NodePorts on the node's primary IPs.
  if ((config.mode === 'nftables' || config.mode === 'ebpf') && config.nodePortAddresses.length === 0) {
    config.nodePortAddresses = [NODE_PORT_ADDRESSES_PRIMARY];
  }
  if (config.detectLocalMode === '') config.detectLocalMode = 'ClusterCIDR';
  return config;
}

/**
 * The masquerade bit the selected mode uses: nftables reads
 * nftables.masqueradeBit, every other mode iptables.masqueradeBit (upstream
 * server_linux.go). Note --iptables-masquerade-bit therefore does not affect
 * nftables mode, as upstream.
 */
export function masqueradeBitOf(config: ResolvedConfig): number {
  const bit = config.mode === 'nftables' ? config.nftables.masqueradeBit : config.iptables.masqueradeBit;
  return bit ?? 14;
}

export function timingOf(config: ResolvedConfig): ResolvedTiming {
  return {
    syncPeriodMs: durationToMillis(config.syncPeriod),
    minSyncPeriodMs: durationToMillis(config.minSyncPeriod),
    configSyncPeriodMs: durationToMillis(config.configSyncPeriod),
  };
}
