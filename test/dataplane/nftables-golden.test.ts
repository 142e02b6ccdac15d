// Golden test: reference 4.2 "Worked example - nftables" reproduced byte for
// byte by renderer -> Fake.dump() (the form upstream's TestOverallNFTablesRules
// compares against). The expected text is copied verbatim from the reference
// into nftables-golden.txt.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig } from '../../src/core/types.js';
import { Fake } from '../../src/dataplane/nftables/fake.js';
import { NftablesRenderer } from '../../src/dataplane/nftables/renderer.js';
import { endpoint, makeNode, makeService, makeSlice, slicePort, svcPort, withClusterIP } from '../support/fixtures.js';

const golden = readFileSync(new URL('./nftables-golden.txt', import.meta.url.replace('/dist/', '/')), 'utf8');

export function workedExample() {
  const svc = withClusterIP(makeService('default', 'web', (s) => {
    s.spec.type = 'NodePort';
    s.spec.ports = [svcPort('http', 80, 'TCP', { targetPort: 8080, nodePort: 30080 })];
  }), '10.96.100.10');
  const slice = makeSlice('default', 'web', 1, (s) => {
    s.endpoints = [endpoint('10.244.1.5', { nodeName: 'node-a', ready: true }), endpoint('10.244.2.7', { nodeName: 'node-b', ready: true })];
    s.ports = [slicePort('http', 8080)];
  });
  const state = syncStateFromObjects({
    services: [svc], slices: [slice], family: 'IPv4', nodeName: 'node-a',
    node: makeNode('node-a', { internalIPs: ['192.168.0.10'] }), serviceCIDRs: ['10.96.0.0/12'],
  });
  const config: DataplaneConfig = {
    family: 'IPv4', masqueradeMark: 1 << 14, masqueradeAll: false,
    localDetector: { kind: 'cidr', cidrs: ['10.244.0.0/16'] },
    nodePortAddresses: ['192.168.0.10/32'], localhostNodePorts: false,
    localIPs: ['127.0.0.1', '192.168.0.10'],
  };
  return { state, config };
}

test('full sync of the worked example dumps exactly as reference 4.2', () => {
  const { state, config } = workedExample();
  const fake = new Fake('ip');
  const r = new NftablesRenderer(config);
  const { tx, partial } = r.render(state, 0, null);
  assert.equal(partial, false);
  fake.run(tx);
  assert.equal(fake.dump(), golden);
});

test('first sync re-creates base chains once; a second full sync does not', () => {
  const { state, config } = workedExample();
  const fake = new Fake('ip');
  const r = new NftablesRenderer(config);
  const first = r.render(state, 0, null).tx;
  fake.run(first);
  assert.match(first.toString(), /^delete chain ip kube-proxy nat-prerouting$/m);
  const second = r.render(state, 10, null).tx;
  assert.doesNotMatch(second.toString(), /^delete chain/m);
  // Elements are already there: a full sync against our memory re-adds none.
  assert.doesNotMatch(second.toString(), /^add element/m);
  fake.run(second);
  assert.equal(fake.dump(), golden);
});

test('nodePortAddresses MatchAll deletes nodeport-ips and dispatches NodePorts by fib', () => {
  const { state, config } = workedExample();
  const fake = new Fake('ip');
  const r = new NftablesRenderer({ ...config, nodePortAddresses: null });
  fake.run(r.render(state, 0, null).tx);
  const dump = fake.dump();
  assert.doesNotMatch(dump, /nodeport-ips/);
  assert.match(dump, /^add rule ip kube-proxy services fib daddr type local ip daddr != 127\.0\.0\.0\/8 meta l4proto \. th dport vmap @service-nodeports$/m);
  assert.match(dump, /^add rule ip kube-proxy nodeport-endpoints-check ip daddr != 127\.0\.0\.0\/8 meta l4proto \. th dport vmap @no-endpoint-nodeports$/m);
});
