// KubeProxyConfiguration in two shapes, as upstream has them:
//
// * KubeProxyConfigurationV1Alpha1: the public file format
//   (kubeproxy.config.k8s.io/v1alpha1, staging config/v1alpha1/types.go), with
//   the JSON field names. Durations are Go duration strings, as in the file.
// * ResolvedConfig: upstream's internal type (pkg/proxy/apis/config/types.go):
//   one syncPeriod/minSyncPeriod chosen by mode, a `linux` block, clusterCIDRs
//   as a list, durations as nanoseconds. This is what the rest of the program
//   reads; conversion between the two lives in convert.ts.

import type { ProxyMode } from '../types.js';
import type { Duration } from './duration.js';

export const GROUP_VERSION = 'kubeproxy.config.k8s.io/v1alpha1';
export const KIND = 'KubeProxyConfiguration';

/** Mode as written in a file or flag; "" means the platform default (iptables). */
export type ProxyModeV1Alpha1 = '' | ProxyMode;
export type LocalMode = '' | 'ClusterCIDR' | 'NodeCIDR' | 'BridgeInterface' | 'InterfaceNamePrefix';

export const NODE_PORT_ADDRESSES_PRIMARY = 'primary';
export const NODE_PORT_ADDRESSES_LOCALHOST = 'localhost';
export const NODE_PORT_ADDRESSES_ALL = 'all';

export interface ClientConnectionConfiguration {
  kubeconfig: string;
  acceptContentTypes: string;
  contentType: string;
  qps: number;
  burst: number;
}

export interface VModuleItem {
  filePattern: string;
  verbosity: number;
}

export interface LoggingOptionsV1 {
  text?: { splitStream?: boolean; infoBufferSize?: string };
  json?: { splitStream?: boolean; infoBufferSize?: string };
}

/** component-base LoggingConfiguration (logs/api/v1). */
export interface LoggingConfiguration {
  format: string;
  /** Go duration string in the file, e.g. "5s". */
  flushFrequency: string;
  verbosity: number;
  vmodule?: VModuleItem[] | null;
  options?: LoggingOptionsV1;
}

export interface KubeProxyConfigurationV1Alpha1 {
  apiVersion: string;
  kind: string;
  featureGates: Record<string, boolean>;
  clientConnection: ClientConnectionConfiguration;
  logging: LoggingConfiguration;
  hostnameOverride: string;
  bindAddress: string;
  healthzBindAddress: string;
  metricsBindAddress: string;
  bindAddressHardFail: boolean;
  enableProfiling: boolean;
  showHiddenMetricsForVersion: string;
  mode: ProxyModeV1Alpha1;
  iptables: {
    masqueradeBit: number | null;
    masqueradeAll: boolean;
    localhostNodePorts: boolean | null;
    syncPeriod: string;
    minSyncPeriod: string;
  };
  ipvs: {
    syncPeriod: string;
    minSyncPeriod: string;
    scheduler: string;
    excludeCIDRs: string[] | null;
    strictARP: boolean;
    tcpTimeout: string;
    tcpFinTimeout: string;
    udpTimeout: string;
  };
  nftables: {
    masqueradeBit: number | null;
    masqueradeAll: boolean;
    syncPeriod: string;
    minSyncPeriod: string;
  };
  winkernel: {
    networkName: string;
    sourceVip: string;
    enableDSR: boolean;
    rootHnsEndpointName: string;
    forwardHealthCheckVip: boolean;
  };
  detectLocalMode: LocalMode;
  detectLocal: { bridgeInterface: string; interfaceNamePrefix: string };
  /** Comma-separated, at most one CIDR per family. */
  clusterCIDR: string;
  nodePortAddresses: string[] | null;
  oomScoreAdj: number | null;
  conntrack: {
    maxPerCore: number | null;
    min: number | null;
    tcpEstablishedTimeout: string | null;
    tcpCloseWaitTimeout: string | null;
    tcpBeLiberal: boolean;
    udpTimeout: string;
    udpStreamTimeout: string;
  };
  configSyncPeriod: string;
  portRange: string;
  windowsRunAsService: boolean;
}

export interface ConntrackConfig {
  maxPerCore: number | null;
  min: number | null;
  /** ns; null = leave as is. */
  tcpEstablishedTimeout: Duration | null;
  tcpCloseWaitTimeout: Duration | null;
  tcpBeLiberal: boolean;
  udpTimeout: Duration;
  udpStreamTimeout: Duration;
}

/**
 * The effective configuration (upstream's internal KubeProxyConfiguration after
 * platformApplyDefaults and the hostname override). Durations are nanoseconds;
 * the *Ms fields are the same values in milliseconds for the injected Clock.
 */
export interface ResolvedConfig {
  featureGates: Record<string, boolean>;
  clientConnection: ClientConnectionConfiguration;
  logging: LoggingConfiguration;
  /** Trimmed and lower-cased when set from the flag; "" = use the OS hostname. */
  hostnameOverride: string;
  /** The node's primary IP override; no socket is bound to it. */
  bindAddress: string;
  /** "ip:port"; "" disables the server. */
  healthzBindAddress: string;
  metricsBindAddress: string;
  bindAddressHardFail: boolean;
  enableProfiling: boolean;
  showHiddenMetricsForVersion: string;
  /** Never "" once resolved (platformApplyDefaults picks iptables). */
  mode: ProxyModeV1Alpha1;
  iptables: { masqueradeBit: number | null; localhostNodePorts: boolean | null };
  ipvs: {
    scheduler: string;
    excludeCIDRs: string[];
    strictARP: boolean;
    tcpTimeout: Duration;
    tcpFinTimeout: Duration;
    udpTimeout: Duration;
  };
  nftables: { masqueradeBit: number | null };
  winkernel: KubeProxyConfigurationV1Alpha1['winkernel'];
  windowsRunAsService: boolean;
  linux: { masqueradeAll: boolean; oomScoreAdj: number | null; conntrack: ConntrackConfig };
  detectLocalMode: LocalMode;
  detectLocal: { bridgeInterface: string; interfaceNamePrefix: string; clusterCIDRs: string[] };
  /** CIDRs and keywords (primary, localhost, all); [] = all local IPs. */
  nodePortAddresses: string[];
  syncPeriod: Duration;
  minSyncPeriod: Duration;
  configSyncPeriod: Duration;
  portRange: string;
}

/** The few values most consumers need, with the mode-dependent choices made. */
export interface ResolvedTiming {
  syncPeriodMs: number;
  minSyncPeriodMs: number;
  configSyncPeriodMs: number;
}
