import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultV1Alpha1 } from './defaults.js';
import { resolvedToV1Alpha1, v1alpha1ToResolved } from './convert.js';
import { decodeConfigFile } from './decode.js';
import { encodeConfigYAML } from './encode.js';

// Upstream pkg/proxy/apis/config/scheme/testdata/KubeProxyConfiguration/after/v1alpha1.yaml:
// an empty v1alpha1 object defaulted, converted to internal and back, encoded.
// (The ipvs.ipSet block of newer upstream is not part of our API and is left out.)
const UPSTREAM_AFTER = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
bindAddress: 0.0.0.0
bindAddressHardFail: false
clientConnection:
  acceptContentTypes: ""
  burst: 10
  contentType: application/vnd.kubernetes.protobuf
  kubeconfig: ""
  qps: 5
clusterCIDR: ""
configSyncPeriod: 15m0s
conntrack:
  maxPerCore: 32768
  min: 131072
  tcpBeLiberal: false
  tcpCloseWaitTimeout: 1h0m0s
  tcpEstablishedTimeout: 24h0m0s
  udpStreamTimeout: 0s
  udpTimeout: 0s
detectLocal:
  bridgeInterface: ""
  interfaceNamePrefix: ""
detectLocalMode: ""
enableProfiling: false
healthzBindAddress: 0.0.0.0:10256
hostnameOverride: ""
iptables:
  localhostNodePorts: true
  masqueradeAll: false
  masqueradeBit: 14
  minSyncPeriod: 1s
  syncPeriod: 30s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: ""
  strictARP: false
  syncPeriod: 0s
  tcpFinTimeout: 0s
  tcpTimeout: 0s
  udpTimeout: 0s
kind: KubeProxyConfiguration
logging:
  flushFrequency: 5s
  format: text
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
metricsBindAddress: 127.0.0.1:10249
mode: ""
nftables:
  masqueradeAll: false
  masqueradeBit: 14
  minSyncPeriod: 0s
  syncPeriod: 0s
nodePortAddresses: null
oomScoreAdj: -999
portRange: ""
showHiddenMetricsForVersion: ""
winkernel:
  enableDSR: false
  forwardHealthCheckVip: false
  networkName: ""
  rootHnsEndpointName: ""
  sourceVip: ""
`;

test('defaulted config through internal and back encodes exactly as upstream testdata', () => {
  assert.equal(encodeConfigYAML(resolvedToV1Alpha1(v1alpha1ToResolved(defaultV1Alpha1()))), UPSTREAM_AFTER);
});

test('upstream "after" file decodes strictly and re-encodes unchanged', () => {
  const { config, warnings } = decodeConfigFile(UPSTREAM_AFTER);
  assert.deepEqual(warnings, []);
  assert.equal(encodeConfigYAML(resolvedToV1Alpha1(v1alpha1ToResolved(config))), UPSTREAM_AFTER);
});

test('strings that YAML 1.1 would read as other types are quoted', () => {
  const c = defaultV1Alpha1();
  c.hostnameOverride = 'yes';
  c.portRange = '0x10';
  const back = decodeConfigFile(encodeConfigYAML(c)).config;
  assert.equal(back.hostnameOverride, 'yes');
  assert.equal(back.portRange, '0x10');
});
