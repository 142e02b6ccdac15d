// v1alpha1 defaulting, as upstream SetDefaults_KubeProxyConfiguration
// (pkg/proxy/apis/config/v1alpha1/defaults.go) plus component-base's
// SetRecommendedLoggingConfiguration. Like Go, "unset" means the zero value:
// a zero duration or empty string gets the default, so e.g. an explicit
// `iptables.minSyncPeriod: 0s` in a file becomes 1s (upstream does the same).

import { parseIP } from '../ip.js';
import { parseDuration } from './duration.js';
import { appendPortIfNeeded } from './hostport.js';
import { GROUP_VERSION, KIND, type KubeProxyConfigurationV1Alpha1 } from './types.js';

export const PROXY_HEALTHZ_PORT = 10256;
export const PROXY_STATUS_PORT = 10249;
/** qos.KubeProxyOOMScoreAdj */
export const KUBE_PROXY_OOM_SCORE_ADJ = -999;

/** A v1alpha1 object with every field at its Go zero value (what decoding starts from). */
export function zeroV1Alpha1(): KubeProxyConfigurationV1Alpha1 {
  return {
    apiVersion: GROUP_VERSION,
    kind: KIND,
    featureGates: {},
    clientConnection: { kubeconfig: '', acceptContentTypes: '', contentType: '', qps: 0, burst: 0 },
    logging: { format: '', flushFrequency: '0s', verbosity: 0 },
    hostnameOverride: '',
    bindAddress: '',
    healthzBindAddress: '',
    metricsBindAddress: '',
    bindAddressHardFail: false,
    enableProfiling: false,
    showHiddenMetricsForVersion: '',
    mode: '',
    iptables: {
      masqueradeBit: null,
      masqueradeAll: false,
      localhostNodePorts: null,
      syncPeriod: '0s',
      minSyncPeriod: '0s',
    },
    ipvs: {
      syncPeriod: '0s',
      minSyncPeriod: '0s',
      scheduler: '',
      excludeCIDRs: null,
      strictARP: false,
      tcpTimeout: '0s',
      tcpFinTimeout: '0s',
      udpTimeout: '0s',
    },
    nftables: { masqueradeBit: null, masqueradeAll: false, syncPeriod: '0s', minSyncPeriod: '0s' },
    winkernel: {
      networkName: '',
      sourceVip: '',
      enableDSR: false,
      rootHnsEndpointName: '',
      forwardHealthCheckVip: false,
    },
    detectLocalMode: '',
    detectLocal: { bridgeInterface: '', interfaceNamePrefix: '' },
    clusterCIDR: '',
    nodePortAddresses: null,
    oomScoreAdj: null,
    conntrack: {
      maxPerCore: null,
      min: null,
      tcpEstablishedTimeout: null,
      tcpCloseWaitTimeout: null,
      tcpBeLiberal: false,
      udpTimeout: '0s',
      udpStreamTimeout: '0s',
    },
    configSyncPeriod: '0s',
    portRange: '',
    windowsRunAsService: false,
  };
}

/** True for "0s", "0", "", null and other spellings of a zero duration. */
function isZeroDuration(s: string | null): boolean {
  if (s === null || s === '') return true;
  try {
    return parseDuration(s) === 0;
  } catch {
    return false; // not ours to judge here: decoding rejects bad durations
  }
}

/** Default healthz/metrics hosts for a bind address (IPv6 variants unless it is IPv4). */
export function defaultBindHosts(bindAddress: string): { healthz: string; metrics: string } {
  return parseIP(bindAddress)?.family === 'IPv4'
    ? { healthz: '0.0.0.0', metrics: '127.0.0.1' }
    : { healthz: '[::]', metrics: '[::1]' };
}

/** Upstream SetDefaults_KubeProxyConfiguration; mutates and returns obj. */
export function setDefaultsV1Alpha1(obj: KubeProxyConfigurationV1Alpha1): KubeProxyConfigurationV1Alpha1 {
  if (obj.bindAddress === '') obj.bindAddress = '0.0.0.0';
  const hosts = defaultBindHosts(obj.bindAddress);
  obj.healthzBindAddress =
    obj.healthzBindAddress === ''
      ? `${hosts.healthz}:${PROXY_HEALTHZ_PORT}`
      : appendPortIfNeeded(obj.healthzBindAddress, PROXY_HEALTHZ_PORT);
  obj.metricsBindAddress =
    obj.metricsBindAddress === ''
      ? `${hosts.metrics}:${PROXY_STATUS_PORT}`
      : appendPortIfNeeded(obj.metricsBindAddress, PROXY_STATUS_PORT);
  obj.oomScoreAdj ??= KUBE_PROXY_OOM_SCORE_ADJ;

  const ipt = obj.iptables;
  if (isZeroDuration(ipt.syncPeriod)) ipt.syncPeriod = '30s';
  if (isZeroDuration(ipt.minSyncPeriod)) ipt.minSyncPeriod = '1s';
  ipt.masqueradeBit ??= 14;
  ipt.localhostNodePorts ??= true;
  if (isZeroDuration(obj.ipvs.syncPeriod)) obj.ipvs.syncPeriod = '30s';
  const nft = obj.nftables;
  if (isZeroDuration(nft.syncPeriod)) nft.syncPeriod = '30s';
  if (isZeroDuration(nft.minSyncPeriod)) nft.minSyncPeriod = '1s';
  nft.masqueradeBit ??= 14;

  const ct = obj.conntrack;
  ct.maxPerCore ??= 32 * 1024;
  ct.min ??= 128 * 1024;
  ct.tcpEstablishedTimeout ??= '24h0m0s';
  ct.tcpCloseWaitTimeout ??= '1h0m0s';
  if (isZeroDuration(obj.configSyncPeriod)) obj.configSyncPeriod = '15m0s';

  const cc = obj.clientConnection;
  if (cc.contentType === '') cc.contentType = 'application/vnd.kubernetes.protobuf';
  if (cc.qps === 0) cc.qps = 5;
  if (cc.burst === 0) cc.burst = 10;
  setRecommendedLogging(obj.logging);
  return obj;
}

/** component-base logsapi.SetRecommendedLoggingConfiguration. */
export function setRecommendedLogging(l: KubeProxyConfigurationV1Alpha1['logging']): void {
  if (l.format === '') l.format = 'text';
  if (isZeroDuration(l.flushFrequency)) l.flushFrequency = '5s';
  const options = l.options ?? {};
  options.text = { ...options.text, infoBufferSize: options.text?.infoBufferSize ?? '0' };
  options.json = { ...options.json, infoBufferSize: options.json?.infoBufferSize ?? '0' };
  l.options = options;
}

/** A fully defaulted v1alpha1 configuration (what `--write-config-to` starts from). */
export function defaultV1Alpha1(): KubeProxyConfigurationV1Alpha1 {
  return setDefaultsV1Alpha1(zeroV1Alpha1());
}
