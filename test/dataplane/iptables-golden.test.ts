// Golden tests for the iptables renderer: a NodePort Service with two
// endpoints (the worked example) byte for byte, plus layout variants (IPv6,
// detectors, options).
//
// Provenance: iptables-golden-worked.txt is generated from the iptables driver
// (`KPT_UPDATE_GOLDEN=1` rewrites it; review the diff before committing) and
// was reviewed line by line against upstream's own expectation for the same
// kind of Service: ns3/svc3 of TestOverallIPTablesRules
// (pkg/proxy/iptables/proxier_test.go), which iptables-overall.test.ts
// reproduces byte for byte.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig } from '../../src/core/types.js';
import { DEFAULT_IPTABLES_OPTIONS, type IptablesRenderInput } from '../../src/dataplane/iptables/index.js';
import { IptablesPlanner } from '../../src/platform/iptables/planner.js';

/** One planner for the file, as one dataplane keeps one (its memo spans the renders). */
const planner = new IptablesPlanner();
/** A full sync starting from an empty nat table. */
const fullRender = (input: IptablesRenderInput) => planner.plan(input, true, []);

const GOLDEN = new URL('./iptables-golden-worked.txt', import.meta.url.replace('/dist/', '/'));

export function workedExampleObjects() {
  const services = [
    {
      metadata: { namespace: 'default', name: 'web' },
      spec: {
        type: 'NodePort',
        clusterIP: '10.96.100.10',
        clusterIPs: ['10.96.100.10'],
        ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, nodePort: 30080 }],
        externalTrafficPolicy: 'Cluster',
        sessionAffinity: 'None',
      },
    },
  ];
  const slices = [
    {
      metadata: { namespace: 'default', name: 'web-abc', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      endpoints: [
        { addresses: ['10.244.1.5'], conditions: { ready: true }, nodeName: 'node-a' },
        { addresses: ['10.244.2.7'], conditions: { ready: true }, nodeName: 'node-b' },
      ],
    },
  ];
  return { services, slices };
}

export const WORKED_CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 1 << 14,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.244.0.0/16'] },
  nodePortAddresses: null,
  localhostNodePorts: true,
  localIPs: ['127.0.0.1', '192.168.0.10'],
};

function workedState() {
  const { services, slices } = workedExampleObjects();
  return syncStateFromObjects({
    services,
    slices,
    family: 'IPv4',
    nodeName: 'node-a',
    nodeIPs: { IPv4: '192.168.0.10' },
  });
}

test('the worked example is rendered byte for byte as the golden', () => {
  const r = fullRender({
    state: workedState(),
    config: WORKED_CONFIG,
    options: DEFAULT_IPTABLES_OPTIONS,
  });
  if (process.env['KPT_UPDATE_GOLDEN'] === '1') writeFileSync(GOLDEN, r.restoreText);
  assert.equal(r.restoreText, readFileSync(GOLDEN, 'utf8'));
  assert.equal(r.partial, false);
  assert.equal(r.filterRules, 4);
  assert.equal(r.natRules, 17);
  assert.deepEqual([...planner.chains()].sort(), [
    'KUBE-EXT-CDGGSHYLG3RE2FKL',
    'KUBE-SEP-2RIJ5GIYXEFH6G4D',
    'KUBE-SEP-AFGSLHOD2HFNCBX4',
    'KUBE-SVC-CDGGSHYLG3RE2FKL',
  ]);
});

test('options: no --random-fully, be_liberal drops the INVALID rule, no nfacct counters', () => {
  const r = fullRender({
    state: workedState(),
    config: WORKED_CONFIG,
    options: {
      ...DEFAULT_IPTABLES_OPTIONS,
      randomFully: false,
      beLiberal: true,
      nfacct: { ctStateInvalidDropped: false, localhostNodePortsAccepted: false },
    },
  });
  assert.match(r.restoreText, /-j MASQUERADE\n/);
  assert.doesNotMatch(r.restoreText, /INVALID/);
  assert.doesNotMatch(r.restoreText, /nfacct/);
  const r2 = fullRender({
    state: workedState(),
    config: WORKED_CONFIG,
    options: {
      ...DEFAULT_IPTABLES_OPTIONS,
      nfacct: { ctStateInvalidDropped: false, localhostNodePortsAccepted: true },
    },
  });
  assert.match(r2.restoreText, /\n-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP\n/);
});

test('local detectors: bridge, prefix and none', () => {
  const render = (localDetector: DataplaneConfig['localDetector']) =>
    fullRender({
      state: workedState(),
      config: { ...WORKED_CONFIG, localDetector },
      options: DEFAULT_IPTABLES_OPTIONS,
    }).restoreText;
  assert.match(render({ kind: 'bridge', interfaceName: 'cbr0' }), /--dport 80 ! -i cbr0 -j KUBE-MARK-MASQ\n/);
  assert.match(render({ kind: 'prefix', interfacePrefix: 'veth' }), /--dport 80 ! -i veth\+ -j KUBE-MARK-MASQ\n/);
  const none = render({ kind: 'none' });
  assert.doesNotMatch(none, /-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default\/web:http cluster IP"/);
  const all = fullRender({
    state: workedState(),
    config: { ...WORKED_CONFIG, masqueradeAll: true },
    options: DEFAULT_IPTABLES_OPTIONS,
  }).restoreText;
  assert.match(
    all,
    /-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default\/web:http cluster IP" -m tcp -p tcp -d 10.96.100.10 --dport 80 -j KUBE-MARK-MASQ\n/,
  );
});

test('nodePortAddresses: per-IP jumps, loopback only with localhost NodePorts, MatchAll variants', () => {
  const render = (cfg: Partial<DataplaneConfig>) =>
    fullRender({
      state: workedState(),
      config: { ...WORKED_CONFIG, localIPs: ['127.0.0.1', '192.168.0.10', '10.1.0.1'], ...cfg },
      options: DEFAULT_IPTABLES_OPTIONS,
    });
  const np =
    '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain"';
  const per = render({ nodePortAddresses: ['192.168.0.0/24', '127.0.0.0/8'] });
  assert.ok(
    per.restoreText.includes(`${np} -d 127.0.0.1 -j KUBE-NODEPORTS\n${np} -d 192.168.0.10 -j KUBE-NODEPORTS\n`),
  );
  assert.ok(per.filterChains.includes('KUBE-FIREWALL'));
  // without loopback in nodePortAddresses, localhost NodePorts are forced off
  const noLo = render({ nodePortAddresses: ['192.168.0.0/24'] });
  assert.ok(!noLo.filterChains.includes('KUBE-FIREWALL'));
  assert.doesNotMatch(noLo.restoreText, /127\.0\.0\.0\/8 --dport 30080/);
  const off = render({ localhostNodePorts: false });
  assert.ok(off.restoreText.includes(`${np} -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS\n`));
  const offPer = render({ localhostNodePorts: false, nodePortAddresses: ['0.0.0.0/0'] });
  assert.ok(offPer.restoreText.includes('! -d 127.0.0.0/8 -j KUBE-NODEPORTS\n'), 'a zero CIDR means MatchAll');
});

test('IPv6 family: no KUBE-FIREWALL, ! -d ::1/128, [ip]:port endpoints', () => {
  const services = [
    {
      metadata: { namespace: 'ns1', name: 'svc1' },
      spec: {
        type: 'NodePort',
        clusterIP: 'fd00:172:30::41',
        clusterIPs: ['fd00:172:30::41'],
        ipFamilies: ['IPv6'],
        ports: [{ name: 'p80', port: 80, protocol: 'TCP', targetPort: 80, nodePort: 3001 }],
      },
    },
  ];
  const slices = [
    {
      metadata: { namespace: 'ns1', name: 'svc1-x', labels: { 'kubernetes.io/service-name': 'svc1' } },
      addressType: 'IPv6',
      ports: [{ name: 'p80', port: 80, protocol: 'TCP' }],
      endpoints: [{ addresses: ['fd00:10:180::1'], conditions: { ready: true }, nodeName: 'test-node' }],
    },
  ];
  const state = syncStateFromObjects({ services, slices, family: 'IPv6', nodeIPs: { IPv6: '2001:db8::1' } });
  const r = fullRender({
    state,
    options: DEFAULT_IPTABLES_OPTIONS,
    config: {
      family: 'IPv6',
      masqueradeMark: 0x4000,
      masqueradeAll: false,
      localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8', 'fd00:10::/64'] },
      nodePortAddresses: null,
      localhostNodePorts: true,
      localIPs: ['::1', '2001:db8::1'],
    },
  });
  assert.ok(!r.filterChains.includes('KUBE-FIREWALL'));
  assert.match(r.restoreText, /-m addrtype --dst-type LOCAL ! -d ::1\/128 -j KUBE-NODEPORTS\n/);
  assert.match(r.restoreText, /-j DNAT --to-destination \[fd00:10:180::1\]:80\n/);
  assert.match(r.restoreText, /! -s fd00:10::\/64 -j KUBE-MARK-MASQ/);
  assert.doesNotMatch(r.restoreText, /nfacct-name localhost_nps/);
});
