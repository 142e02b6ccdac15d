import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultV1Alpha1 } from './defaults.js';
import { platformApplyDefaults, v1alpha1ToResolved } from './convert.js';
import { SECOND } from './duration.js';
import { ConfigValidationError, formatFieldError } from './field.js';
import type { ResolvedConfig } from './types.js';
import { validateConfig } from './validate.js';

function base(): ResolvedConfig {
  return platformApplyDefaults(v1alpha1ToResolved(defaultV1Alpha1()));
}

function errorsOf(mutate: (c: ResolvedConfig) => void): string[] {
  const c = base();
  mutate(c);
  return validateConfig(c).errors.map(formatFieldError);
}

/** Each rule: a mutation that must fail with exactly `message`, and one that must pass. */
const RULES: Array<{
  name: string;
  bad: (c: ResolvedConfig) => void;
  message: string;
  good: (c: ResolvedConfig) => void;
}> = [
  {
    name: 'iptables.masqueradeBit range',
    bad: (c) => {
      c.iptables.masqueradeBit = 32;
    },
    message: 'iptables.masqueradeBit: Invalid value: 32: must be within the range [0, 31]',
    good: (c) => {
      c.iptables.masqueradeBit = 31;
    },
  },
  {
    name: 'iptables.masqueradeBit negative',
    bad: (c) => {
      c.iptables.masqueradeBit = -1;
    },
    message: 'iptables.masqueradeBit: Invalid value: -1: must be within the range [0, 31]',
    good: (c) => {
      c.iptables.masqueradeBit = 0;
    },
  },
  {
    name: 'nftables.masqueradeBit (nftables mode)',
    bad: (c) => {
      c.mode = 'nftables';
      c.nftables.masqueradeBit = 32;
    },
    message: 'nftables.masqueradeBit: Invalid value: 32: must be within the range [0, 31]',
    good: (c) => {
      c.mode = 'nftables';
      c.nftables.masqueradeBit = 5;
    },
  },
  {
    name: 'syncPeriod > 0',
    bad: (c) => {
      c.syncPeriod = 0;
      c.minSyncPeriod = 0;
    },
    message: 'iptables.syncPeriod: Invalid value: 0s: must be greater than 0',
    good: (c) => {
      c.syncPeriod = SECOND;
      c.minSyncPeriod = 0;
    },
  },
  {
    name: 'minSyncPeriod >= 0',
    bad: (c) => {
      c.minSyncPeriod = -SECOND;
    },
    message: 'iptables.minSyncPeriod: Invalid value: -1s: must be greater than or equal to 0',
    good: (c) => {
      c.minSyncPeriod = 0;
    },
  },
  {
    name: 'minSyncPeriod <= syncPeriod (ipvs section)',
    bad: (c) => {
      c.mode = 'ipvs';
      c.syncPeriod = SECOND;
      c.minSyncPeriod = 2 * SECOND;
    },
    message: 'ipvs.syncPeriod: Invalid value: 2s: must be greater than or equal to ipvs.minSyncPeriod',
    good: (c) => {
      c.mode = 'ipvs';
      c.syncPeriod = 2 * SECOND;
      c.minSyncPeriod = 2 * SECOND;
    },
  },
  {
    name: 'sync periods reported under nftables',
    bad: (c) => {
      c.mode = 'nftables';
      c.syncPeriod = 0;
      c.minSyncPeriod = 0;
    },
    message: 'nftables.syncPeriod: Invalid value: 0s: must be greater than 0',
    good: (c) => {
      c.mode = 'nftables';
    },
  },
  {
    name: 'configSyncPeriod > 0',
    bad: (c) => {
      c.configSyncPeriod = 0;
    },
    message: 'configSyncPeriod: Invalid value: 0s: must be greater than 0',
    good: (c) => {
      c.configSyncPeriod = 1;
    },
  },
  {
    name: 'oomScoreAdj range',
    bad: (c) => {
      c.linux.oomScoreAdj = 1001;
    },
    message: 'oomScoreAdj: Invalid value: 1001: must be within the range [-1000, 1000]',
    good: (c) => {
      c.linux.oomScoreAdj = -1000;
    },
  },
  {
    name: 'conntrack.maxPerCore >= 0',
    bad: (c) => {
      c.linux.conntrack.maxPerCore = -1;
    },
    message: 'conntrack.maxPerCore: Invalid value: -1: must be greater than or equal to 0',
    good: (c) => {
      c.linux.conntrack.maxPerCore = 0;
    },
  },
  {
    name: 'conntrack.min >= 0',
    bad: (c) => {
      c.linux.conntrack.min = -1;
    },
    message: 'conntrack.min: Invalid value: -1: must be greater than or equal to 0',
    good: (c) => {
      c.linux.conntrack.min = 0;
    },
  },
  {
    name: 'conntrack.tcpEstablishedTimeout >= 0',
    bad: (c) => {
      c.linux.conntrack.tcpEstablishedTimeout = -SECOND;
    },
    message: 'conntrack.tcpEstablishedTimeout: Invalid value: -1s: must be greater than or equal to 0',
    good: (c) => {
      c.linux.conntrack.tcpEstablishedTimeout = 0;
    },
  },
  {
    name: 'conntrack.tcpCloseWaitTimeout >= 0',
    bad: (c) => {
      c.linux.conntrack.tcpCloseWaitTimeout = -SECOND;
    },
    message: 'conntrack.tcpCloseWaitTimeout: Invalid value: -1s: must be greater than or equal to 0',
    good: (c) => {
      c.linux.conntrack.tcpCloseWaitTimeout = null;
    },
  },
  {
    name: 'conntrack.udpTimeout >= 0',
    bad: (c) => {
      c.linux.conntrack.udpTimeout = -SECOND;
    },
    message: 'conntrack.udpTimeout: Invalid value: -1s: must be greater than or equal to 0',
    good: (c) => {
      c.linux.conntrack.udpTimeout = 30 * SECOND;
    },
  },
  {
    name: 'conntrack.udpStreamTimeout >= 0',
    bad: (c) => {
      c.linux.conntrack.udpStreamTimeout = -SECOND;
    },
    message: 'conntrack.udpStreamTimeout: Invalid value: -1s: must be greater than or equal to 0',
    good: (c) => {
      c.linux.conntrack.udpStreamTimeout = 120 * SECOND;
    },
  },
  {
    name: 'mode',
    bad: (c) => {
      c.mode = 'kernelspace' as ResolvedConfig['mode'];
    },
    message:
      'mode: Invalid value: "kernelspace": must be iptables, ipvs, nftables, userspace, ebpf or blank (blank means the best-available proxy [currently iptables])',
    good: (c) => {
      c.mode = 'userspace';
    },
  },
  {
    name: 'clientConnection.burst >= 0',
    bad: (c) => {
      c.clientConnection.burst = -1;
    },
    message: 'clientConnection.burst: Invalid value: -1: must be greater than or equal to 0',
    good: (c) => {
      c.clientConnection.burst = 0;
    },
  },
  {
    name: 'bindAddress is an IP',
    bad: (c) => {
      c.bindAddress = '10.10.12.11:2000';
    },
    message: 'bindAddress: Invalid value: "10.10.12.11:2000": not a valid textual representation of an IP address',
    good: (c) => {
      c.bindAddress = 'fd00::1';
    },
  },
  {
    name: 'healthzBindAddress is IP:port',
    bad: (c) => {
      c.healthzBindAddress = '0.0.0.0';
    },
    message: 'healthzBindAddress: Invalid value: "0.0.0.0": must be IP:port',
    good: (c) => {
      c.healthzBindAddress = '';
    },
  },
  {
    name: 'healthzBindAddress IP',
    bad: (c) => {
      c.healthzBindAddress = '123.456.789.10:8080';
    },
    message: 'healthzBindAddress: Invalid value: "123.456.789.10": must be a valid IP',
    good: (c) => {
      c.healthzBindAddress = '[::]:8080';
    },
  },
  {
    name: 'metricsBindAddress port range',
    bad: (c) => {
      c.metricsBindAddress = '127.0.0.1:0';
    },
    message: 'metricsBindAddress: Invalid value: "0": must be a valid port',
    good: (c) => {
      c.metricsBindAddress = '127.0.0.1:65535';
    },
  },
  {
    name: 'metricsBindAddress port number',
    bad: (c) => {
      c.metricsBindAddress = '127.0.0.1:foo';
    },
    message: 'metricsBindAddress: Invalid value: "foo": must be a valid port',
    good: (c) => {
      c.metricsBindAddress = '';
    },
  },
  {
    name: 'portRange',
    bad: (c) => {
      c.portRange = '2000-300';
    },
    message: 'portRange: Invalid value: "2000-300": must be a valid port range (e.g. 300-2000)',
    good: (c) => {
      c.portRange = '300-2000';
    },
  },
  {
    name: 'nodePortAddresses entries',
    bad: (c) => {
      c.nodePortAddresses = ['192.168.0.0/16', 'invalid'];
    },
    message:
      "nodePortAddresses[1]: Invalid value: \"invalid\": must be a valid CIDR or one of the keywords 'primary', 'localhost', 'all'",
    good: (c) => {
      c.nodePortAddresses = ['primary', 'localhost', '10.0.0.0/8', 'fd00::/64', 'all'];
    },
  },
  {
    name: 'showHiddenMetricsForVersion',
    bad: (c) => {
      c.showHiddenMetricsForVersion = '1.20';
    },
    message:
      'showHiddenMetricsForVersion: Invalid value: "1.20": --show-hidden-metrics-for-version must be omitted or have the value \'1.36\'. Only the previous minor version is allowed',
    good: (c) => {
      c.showHiddenMetricsForVersion = '1.36';
    },
  },
  {
    name: 'detectLocalMode',
    bad: (c) => {
      c.detectLocalMode = 'Foo' as ResolvedConfig['detectLocalMode'];
    },
    message:
      'detectLocalMode: Unsupported value: "Foo": supported values: "ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix", ""',
    good: (c) => {
      c.detectLocalMode = 'NodeCIDR';
    },
  },
  {
    name: 'BridgeInterface needs a bridge',
    bad: (c) => {
      c.detectLocalMode = 'BridgeInterface';
    },
    message: 'detectLocal.bridgeInterface: Invalid value: "": must not be empty',
    good: (c) => {
      c.detectLocalMode = 'BridgeInterface';
      c.detectLocal.bridgeInterface = 'cbr0';
    },
  },
  {
    name: 'InterfaceNamePrefix needs a prefix',
    bad: (c) => {
      c.detectLocalMode = 'InterfaceNamePrefix';
    },
    message: 'detectLocal.interfaceNamePrefix: Invalid value: "": must not be empty',
    good: (c) => {
      c.detectLocalMode = 'InterfaceNamePrefix';
      c.detectLocal.interfaceNamePrefix = 'veth';
    },
  },
  {
    name: 'clusterCIDR malformed',
    bad: (c) => {
      c.detectLocal.clusterCIDRs = ['192.168.0.0/16', 'invalid'];
    },
    message:
      'clusterCIDR: Invalid value: "192.168.0.0/16,invalid": must be a valid CIDR block (e.g. 10.100.0.0/16 or fde4:8dba:82e1::/48)',
    good: (c) => {
      c.detectLocal.clusterCIDRs = ['192.168.0.0/16', 'fd00:10::/48'];
    },
  },
  {
    name: 'clusterCIDR single-stack pair',
    bad: (c) => {
      c.detectLocal.clusterCIDRs = ['192.168.0.0/16', '10.0.0.0/8'];
    },
    message:
      'clusterCIDR: Invalid value: "192.168.0.0/16,10.0.0.0/8": must be a either a single CIDR or dual-stack pair of CIDRs (e.g. [10.100.0.0/16, fde4:8dba:82e1::/48]',
    good: (c) => {
      c.detectLocal.clusterCIDRs = ['10.0.0.0/8'];
    },
  },
  {
    name: 'clusterCIDR at most two',
    bad: (c) => {
      c.detectLocal.clusterCIDRs = ['10.0.0.0/8', 'fd00::/48', '10.1.0.0/16'];
    },
    message:
      'clusterCIDR: Invalid value: "10.0.0.0/8,fd00::/48,10.1.0.0/16": must be a either a single CIDR or dual-stack pair of CIDRs (e.g. [10.100.0.0/16, fde4:8dba:82e1::/48]',
    good: (c) => {
      c.detectLocal.clusterCIDRs = ['fd00::/48'];
    },
  },
  {
    name: 'ipvs scheduler (ipvs mode)',
    bad: (c) => {
      c.mode = 'ipvs';
      c.ipvs.scheduler = 'foo';
    },
    message:
      'ipvs.scheduler: Invalid value: "foo": must be in [rr wrr lc wlc lblc lblcr sh dh sed nq mh ], blank means the default algorithm method (currently rr)',
    good: (c) => {
      c.mode = 'ipvs';
      c.ipvs.scheduler = 'mh';
    },
  },
  {
    name: 'ipvs excludeCIDRs',
    bad: (c) => {
      c.mode = 'ipvs';
      c.ipvs.excludeCIDRs = ['192.168.0.0/16', 'invalid'];
    },
    message: 'ipvs.excludeCIDRs[1]: Invalid value: "invalid": must be a valid CIDR',
    good: (c) => {
      c.mode = 'ipvs';
      c.ipvs.excludeCIDRs = ['fd00::/64'];
    },
  },
  {
    name: 'ipvs tcpTimeout',
    bad: (c) => {
      c.mode = 'ipvs';
      c.ipvs.tcpTimeout = -SECOND;
    },
    message: 'ipvs.tcpTimeout: Invalid value: -1s: must be greater than or equal to 0',
    good: (c) => {
      c.mode = 'ipvs';
      c.ipvs.tcpTimeout = 900 * SECOND;
    },
  },
  {
    name: 'ipvs tcpFinTimeout',
    bad: (c) => {
      c.mode = 'ipvs';
      c.ipvs.tcpFinTimeout = -SECOND;
    },
    message: 'ipvs.tcpFinTimeout: Invalid value: -1s: must be greater than or equal to 0',
    good: (c) => {
      c.mode = 'ipvs';
      c.ipvs.tcpFinTimeout = SECOND;
    },
  },
  {
    name: 'ipvs udpTimeout',
    bad: (c) => {
      c.mode = 'ipvs';
      c.ipvs.udpTimeout = -SECOND;
    },
    message: 'ipvs.udpTimeout: Invalid value: -1s: must be greater than or equal to 0',
    good: (c) => {
      c.mode = 'ipvs';
      c.ipvs.udpTimeout = SECOND;
    },
  },
  {
    name: 'logging.format',
    bad: (c) => {
      c.logging.format = 'invalid';
    },
    message: 'logging.format: Unsupported value: "invalid": supported values: "json", "text"',
    good: (c) => {
      c.logging.format = 'json';
    },
  },
  {
    name: 'logging.vmodule pattern',
    bad: (c) => {
      c.logging.vmodule = [{ filePattern: '', verbosity: 2 }];
    },
    message: 'logging.vmodule[0].filePattern: Invalid value: "": must not be empty',
    good: (c) => {
      c.logging.vmodule = [{ filePattern: 'proxier', verbosity: 2 }];
    },
  },
];

for (const rule of RULES) {
  test(`validation rule: ${rule.name}`, () => {
    assert.deepEqual(errorsOf(rule.bad), [rule.message]);
    assert.deepEqual(errorsOf(rule.good), []);
  });
}

test('ipvs-only rules do not apply in other modes', () => {
  assert.deepEqual(
    errorsOf((c) => {
      c.ipvs.scheduler = 'foo';
      c.ipvs.tcpTimeout = -SECOND;
    }),
    [],
  );
  assert.deepEqual(
    errorsOf((c) => {
      c.nftables.masqueradeBit = 40;
    }),
    [],
  );
});

test('the defaults validate, and several errors aggregate into one KPT_CONFIG_INVALID', () => {
  assert.deepEqual(validateConfig(base()).errors, []);
  const c = base();
  c.iptables.masqueradeBit = 32;
  c.linux.oomScoreAdj = 5000;
  const err = new ConfigValidationError(validateConfig(c).errors);
  assert.equal(err.code, 'KPT_CONFIG_INVALID');
  assert.equal(err.fieldErrors.length, 2);
  assert.match(err.message, /^\[iptables\.masqueradeBit: .*, oomScoreAdj: .*\]$/);
});

test('unknown feature gates are a warning, known ones pass silently', () => {
  const c = base();
  c.featureGates = { NoSuchGate: true, AllAlpha: false };
  const r = validateConfig(c);
  assert.deepEqual(r.errors, []);
  assert.equal(r.warnings.length, 1);
  assert.match(r.warnings[0]!, /NoSuchGate/);
});

test('ipvs mode needs the KubeProxyIPVS gate (default on)', () => {
  assert.deepEqual(
    errorsOf((c) => {
      c.mode = 'ipvs';
    }),
    [],
  );
  assert.deepEqual(
    errorsOf((c) => {
      c.mode = 'ipvs';
      c.featureGates = { KubeProxyIPVS: false };
    }),
    ['mode: Invalid value: "ipvs": ipvs mode needs the KubeProxyIPVS feature gate, which is disabled'],
  );
  const c = base();
  c.featureGates = { KubeProxyIPVS: true, AllowServiceExternalIPs: false, NFTablesNetlink: true };
  assert.deepEqual(validateConfig(c).warnings, [], 'the gates are known');
});

test('KubeProxyNFTablesLocalhostNodePorts is known and built: no warning either way', () => {
  for (const on of [true, false]) {
    const c = base();
    c.mode = 'nftables';
    c.featureGates = { KubeProxyNFTablesLocalhostNodePorts: on };
    assert.deepEqual(validateConfig(c).warnings, [], `gate ${on}`);
  }
});
