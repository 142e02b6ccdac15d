import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultV1Alpha1, setDefaultsV1Alpha1, zeroV1Alpha1 } from './defaults.js';

// Upstream's v1alpha1 defaults (pkg/proxy/apis/config/v1alpha1/defaults.go).
test('defaults equal upstream v1alpha1 defaults', () => {
  const c = defaultV1Alpha1();
  assert.equal(c.apiVersion, 'kubeproxy.config.k8s.io/v1alpha1');
  assert.equal(c.kind, 'KubeProxyConfiguration');
  assert.deepEqual(c.featureGates, {});
  assert.deepEqual(c.clientConnection, {
    kubeconfig: '',
    acceptContentTypes: '',
    contentType: 'application/vnd.kubernetes.protobuf',
    qps: 5,
    burst: 10,
  });
  assert.equal(c.logging.format, 'text');
  assert.equal(c.logging.flushFrequency, '5s');
  assert.equal(c.logging.verbosity, 0);
  assert.equal(c.hostnameOverride, '');
  assert.equal(c.bindAddress, '0.0.0.0');
  assert.equal(c.healthzBindAddress, '0.0.0.0:10256');
  assert.equal(c.metricsBindAddress, '127.0.0.1:10249');
  assert.equal(c.bindAddressHardFail, false);
  assert.equal(c.enableProfiling, false);
  assert.equal(c.mode, '');
  assert.deepEqual(c.iptables, {
    masqueradeBit: 14,
    masqueradeAll: false,
    localhostNodePorts: true,
    syncPeriod: '30s',
    minSyncPeriod: '1s',
  });
  assert.deepEqual(c.ipvs, {
    syncPeriod: '30s',
    minSyncPeriod: '0s',
    scheduler: '',
    excludeCIDRs: null,
    strictARP: false,
    tcpTimeout: '0s',
    tcpFinTimeout: '0s',
    udpTimeout: '0s',
  });
  assert.deepEqual(c.nftables, { masqueradeBit: 14, masqueradeAll: false, syncPeriod: '30s', minSyncPeriod: '1s' });
  assert.equal(c.detectLocalMode, '');
  assert.equal(c.clusterCIDR, '');
  assert.equal(c.nodePortAddresses, null);
  assert.equal(c.oomScoreAdj, -999);
  assert.deepEqual(c.conntrack, {
    maxPerCore: 32768,
    min: 131072,
    tcpEstablishedTimeout: '24h0m0s',
    tcpCloseWaitTimeout: '1h0m0s',
    tcpBeLiberal: false,
    udpTimeout: '0s',
    udpStreamTimeout: '0s',
  });
  assert.equal(c.configSyncPeriod, '15m0s');
  assert.equal(c.portRange, '');
});

test('an IPv6 bindAddress selects the IPv6 healthz and metrics defaults', () => {
  const c = zeroV1Alpha1();
  c.bindAddress = 'fd00::1';
  setDefaultsV1Alpha1(c);
  assert.equal(c.healthzBindAddress, '[::]:10256');
  assert.equal(c.metricsBindAddress, '[::1]:10249');
});

test('a bind address without port gets the default port appended', () => {
  const c = zeroV1Alpha1();
  c.healthzBindAddress = '10.0.0.1';
  c.metricsBindAddress = 'fd00::2';
  setDefaultsV1Alpha1(c);
  assert.equal(c.healthzBindAddress, '10.0.0.1:10256');
  assert.equal(c.metricsBindAddress, '[fd00::2]:10249');
});

test('explicit values are kept; zero durations and nil pointers are defaulted', () => {
  const c = zeroV1Alpha1();
  c.iptables.masqueradeBit = 0;
  c.conntrack.maxPerCore = 0;
  c.conntrack.tcpEstablishedTimeout = '0s'; // pointer set: "leave as is"
  c.iptables.minSyncPeriod = '0s'; // plain duration: zero means unset, like upstream
  c.ipvs.minSyncPeriod = '0s';
  setDefaultsV1Alpha1(c);
  assert.equal(c.iptables.masqueradeBit, 0);
  assert.equal(c.conntrack.maxPerCore, 0);
  assert.equal(c.conntrack.tcpEstablishedTimeout, '0s');
  assert.equal(c.iptables.minSyncPeriod, '1s');
  assert.equal(c.ipvs.minSyncPeriod, '0s');
});
