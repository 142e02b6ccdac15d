import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultV1Alpha1 } from './defaults.js';
import { platformApplyDefaults, v1alpha1ToResolved } from './convert.js';
import {
  expandNodePortAddresses,
  nftablesLocalhostNodePorts,
  nodePortAddressesForFamily,
  resolveDataplaneConfig,
} from './nodeport.js';
import type { ResolvedConfig } from './types.js';

function config(mutate: (c: ResolvedConfig) => void = () => undefined): ResolvedConfig {
  const c = v1alpha1ToResolved(defaultV1Alpha1());
  mutate(c);
  return platformApplyDefaults(c);
}

test('keywords expand per family', () => {
  const addrs = ['primary', 'localhost', '10.0.0.0/8', 'fd00:1::/64', '192.168.001.0/24'];
  assert.deepEqual(expandNodePortAddresses(addrs, 'IPv4', '10.1.2.3'), [
    '10.1.2.3/32',
    '127.0.0.0/8',
    '10.0.0.0/8',
    '192.168.1.0/24',
  ]);
  assert.deepEqual(expandNodePortAddresses(addrs, 'IPv6', 'FD00::5'), ['fd00::5/128', '::1/128', 'fd00:1::/64']);
  assert.deepEqual(expandNodePortAddresses(['all'], 'IPv4', null), ['0.0.0.0/0']);
  assert.deepEqual(expandNodePortAddresses(['all'], 'IPv6', null), ['::/0']);
});

test('primary skips a missing or loopback node IP, so that family is MatchAll (upstream)', () => {
  assert.deepEqual(expandNodePortAddresses(['primary'], 'IPv4', '127.0.0.1'), []);
  assert.deepEqual(expandNodePortAddresses(['primary'], 'IPv6', '::1'), []);
  assert.equal(nodePortAddressesForFamily(['primary'], 'IPv6', null), null);
  assert.equal(nodePortAddressesForFamily(['primary'], 'IPv4', '127.0.0.1'), null);
  assert.deepEqual(nodePortAddressesForFamily(['primary', 'localhost'], 'IPv6', null), ['::1/128']);
});

test('MatchAll (null): no entry of the family, a zero CIDR, or "all"', () => {
  assert.equal(nodePortAddressesForFamily([], 'IPv4', '10.0.0.1'), null);
  assert.equal(nodePortAddressesForFamily(['fd00::/64'], 'IPv4', '10.0.0.1'), null, 'other family only');
  assert.equal(nodePortAddressesForFamily(['10.0.0.0/8', '0.0.0.0/0'], 'IPv4', null), null);
  assert.equal(nodePortAddressesForFamily(['primary', 'all'], 'IPv6', 'fd00::1'), null);
  assert.deepEqual(nodePortAddressesForFamily(['10.0.0.0/8'], 'IPv4', null), ['10.0.0.0/8']);
});

test('nodePortAddresses defaults: all for iptables/ipvs/userspace, primary for nftables', () => {
  for (const mode of ['', 'iptables', 'ipvs', 'userspace'] as const) {
    const dp = resolveDataplaneConfig(
      config((c) => {
        c.mode = mode;
      }),
      'IPv4',
      ['10.0.0.1'],
      '10.0.0.1',
    );
    assert.equal(dp.nodePortAddresses, null, mode);
  }
  const nft = config((c) => {
    c.mode = 'nftables';
  });
  assert.deepEqual(nft.nodePortAddresses, ['primary']);
  assert.deepEqual(resolveDataplaneConfig(nft, 'IPv4', ['10.0.0.1', '192.168.0.9'], '10.0.0.1').nodePortAddresses, [
    '10.0.0.1/32',
  ]);
  assert.deepEqual(resolveDataplaneConfig(nft, 'IPv6', ['fd00::1'], 'fd00::1').nodePortAddresses, ['fd00::1/128']);
});

test('resolveDataplaneConfig: mark, masqueradeAll, local IPs of the family', () => {
  const c = config((x) => {
    x.iptables.masqueradeBit = 31;
    x.linux.masqueradeAll = true;
  });
  const dp = resolveDataplaneConfig(c, 'IPv6', ['10.0.0.1', 'FD00::0001', 'fd00::1', '::1'], 'fd00::1');
  assert.equal(dp.family, 'IPv6');
  assert.equal(dp.masqueradeMark, 2147483648, 'bit 31 stays positive');
  assert.equal(dp.masqueradeAll, true);
  assert.deepEqual(dp.localIPs, ['fd00::1', '::1']);
  assert.equal(resolveDataplaneConfig(config(), 'IPv4', [], null).masqueradeMark, 0x4000);
});

test('nftables uses nftables.masqueradeBit, the other modes iptables.masqueradeBit', () => {
  const mk = (mode: ResolvedConfig['mode']) =>
    resolveDataplaneConfig(
      config((c) => {
        c.mode = mode;
        c.iptables.masqueradeBit = 3;
        c.nftables.masqueradeBit = 5;
      }),
      'IPv4',
      [],
      null,
    ).masqueradeMark;
  assert.equal(mk('iptables'), 8);
  assert.equal(mk('ipvs'), 8);
  assert.equal(mk('nftables'), 32);
});

test('localhost NodePorts: iptables, IPv4, enabled, and nodePortAddresses covering 127.0.0.0/8', () => {
  const lh = (mutate: (c: ResolvedConfig) => void, family: 'IPv4' | 'IPv6' = 'IPv4') =>
    resolveDataplaneConfig(config(mutate), family, [], '10.0.0.1').localhostNodePorts;
  assert.equal(
    lh(() => undefined),
    true,
  );
  assert.equal(
    lh(() => undefined, 'IPv6'),
    false,
  );
  assert.equal(
    lh((c) => {
      c.iptables.localhostNodePorts = false;
    }),
    false,
  );
  assert.equal(
    lh((c) => {
      c.nodePortAddresses = ['10.0.0.0/8'];
    }),
    false,
  );
  assert.equal(
    lh((c) => {
      c.nodePortAddresses = ['10.0.0.0/8', 'localhost'];
    }),
    true,
  );
  assert.equal(
    lh((c) => {
      c.nodePortAddresses = ['127.0.0.1/32'];
    }),
    true,
  );
  assert.equal(
    lh((c) => {
      c.mode = 'ipvs';
    }),
    false,
  );
  assert.equal(
    lh((c) => {
      c.mode = 'nftables';
      c.nodePortAddresses = ['all'];
    }),
    false,
  );
});

test('local detectors per detectLocalMode and family', () => {
  const det = (mutate: (c: ResolvedConfig) => void, family: 'IPv4' | 'IPv6', podCIDRs: string[] = []) =>
    resolveDataplaneConfig(config(mutate), family, [], null, podCIDRs).localDetector;
  const dual = (c: ResolvedConfig) => {
    c.detectLocal.clusterCIDRs = ['10.244.0.0/16', 'fd00:10::/48'];
  };
  assert.deepEqual(det(dual, 'IPv4'), { kind: 'cidr', cidrs: ['10.244.0.0/16'] });
  assert.deepEqual(det(dual, 'IPv6'), { kind: 'cidr', cidrs: ['fd00:10::/48'] });
  assert.deepEqual(
    det((c) => {
      c.detectLocal.clusterCIDRs = ['10.244.0.0/16'];
    }, 'IPv6'),
    { kind: 'none' },
  );
  assert.deepEqual(
    det(() => undefined, 'IPv4'),
    { kind: 'none' },
    'ClusterCIDR without CIDRs',
  );
  assert.deepEqual(
    det(
      (c) => {
        c.detectLocalMode = 'NodeCIDR';
      },
      'IPv4',
      ['10.244.1.0/24', 'fd00:10:0:1::/64'],
    ),
    { kind: 'cidr', cidrs: ['10.244.1.0/24'] },
  );
  assert.deepEqual(
    det((c) => {
      c.detectLocalMode = 'BridgeInterface';
      c.detectLocal.bridgeInterface = 'cbr0';
    }, 'IPv4'),
    { kind: 'bridge', interfaceName: 'cbr0' },
  );
  assert.deepEqual(
    det((c) => {
      c.detectLocalMode = 'InterfaceNamePrefix';
      c.detectLocal.interfaceNamePrefix = 'veth';
    }, 'IPv6'),
    { kind: 'prefix', interfacePrefix: 'veth' },
  );
});

test('nftablesLocalhostNodePorts: serve needs the gate and an explicit loopback entry of the family', () => {
  const mode = (addrs: string[], family: 'IPv4' | 'IPv6', gates: Record<string, boolean> = {}, m = 'nftables') =>
    nftablesLocalhostNodePorts(
      config((c) => {
        c.mode = m as ResolvedConfig['mode'];
        c.nodePortAddresses = addrs;
        c.featureGates = gates;
      }),
      family,
      family === 'IPv4' ? '192.0.2.10' : '2001:db8::10',
    );
  // On by default (beta in 1.38): with loopback named, served; without it, rejected and counted.
  assert.equal(mode(['primary', 'localhost'], 'IPv4'), 'serve');
  assert.equal(mode(['primary', 'localhost'], 'IPv6'), 'serve');
  assert.equal(mode(['0.0.0.0/0', '127.0.0.1/32'], 'IPv4'), 'serve');
  assert.equal(mode(['127.0.0.1/32'], 'IPv6'), 'reject', 'an IPv4 loopback entry does not opt IPv6 in');
  assert.equal(mode(['::1/128'], 'IPv6'), 'serve');
  assert.equal(mode(['120.0.0.0/5'], 'IPv4'), 'serve', 'a CIDR overlapping 127/8 counts');
  assert.equal(mode([], 'IPv4'), 'reject', 'the default (primary) does not opt in');
  assert.equal(mode(['all'], 'IPv4'), 'reject', "'all' is not an explicit opt-in");
  assert.equal(mode(['primary'], 'IPv6'), 'reject');
  // Gate off, or another mode: nothing changes.
  assert.equal(mode(['localhost'], 'IPv4', { KubeProxyNFTablesLocalhostNodePorts: false }), 'off');
  assert.equal(mode(['localhost'], 'IPv4', { AllBeta: false }), 'off', 'AllBeta=false turns the beta gate off');
  assert.equal(mode(['localhost'], 'IPv4', {}, 'iptables'), 'off');
});
