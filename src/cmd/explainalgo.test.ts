// explain names the balancing of a Service with kube-proxy-ts/lb-algorithm,
// in the nftables and ebpf views (read from the rule, or the svc entry).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../core/snapshot.js';
import type { SyncState } from '../core/types.js';
import { Fake as EbpfFake } from '../dataplane/ebpf/fake.js';
import { Fake as NftFake } from '../dataplane/nftables/fake.js';
import { EbpfPlanner } from '../platform/ebpf/planner.js';
import { NftablesPlanner } from '../platform/nftables/planner.js';
import { explainEbpfMaps } from './modes/ebpf/explain.js';
import { traceNftablesRules } from './explainrules.js';
import { explanationText } from './explainview.js';
import {
  NODE_CONFIG4,
  SERVICE_CIDR,
  TEST_NODE,
  endpoint,
  makeNode,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
} from '../../test/support/fixtures.js';

const CONFIG = NODE_CONFIG4;

function state(algorithm: string | undefined): SyncState {
  return syncStateFromObjects({
    services: [
      withClusterIP(
        makeService('ns', 'web', (s) => {
          if (algorithm) s.metadata.annotations = { 'kube-proxy-ts/lb-algorithm': algorithm };
          s.spec.ports = [svcPort('p80', 80)];
        }),
        '172.30.0.41',
      ),
    ],
    slices: [
      makeSlice('ns', 'web', 1, (s) => {
        s.endpoints = ['10.180.0.1', '10.180.0.2'].map((ip) => endpoint(ip));
        s.ports = [slicePort('p80', 8080)];
      }),
    ],
    family: 'IPv4',
    node: makeNode(TEST_NODE),
    serviceCIDRs: [SERVICE_CIDR],
    fullSync: true,
  });
}

const pkt = { src: '192.168.9.7', dst: '172.30.0.41', port: 80, protocol: 'TCP' as const };

test('nftables and ebpf explain name the balancing of an annotated Service, and nothing for random', () => {
  const nft = (a: string | undefined) => {
    const fake = new NftFake('ip');
    fake.run(new NftablesPlanner(CONFIG).plan(state(a), 0).tx);
    return traceNftablesRules(fake, pkt, CONFIG.localIPs);
  };
  const ebpf = (a: string | undefined) => {
    const fake = new EbpfFake();
    fake.apply(new EbpfPlanner(CONFIG).plan({ state: state(a) }).ops);
    return explainEbpfMaps(fake, pkt, CONFIG.localIPs, { sport: null });
  };
  for (const explain of [nft, ebpf]) {
    const random = explain(undefined);
    assert.equal(random.algorithm, undefined);
    assert.match(random.summary, /DNAT to one of 2 endpoints at random/);
    assert.doesNotMatch(explanationText(random), /Balancing:/);
    const rr = explain('round-robin');
    assert.equal(rr.algorithm, 'round-robin', rr.mode);
    // nftables cannot read numgen's counter; ebpf reads the set's next turn (slot 0 of a new set).
    if (rr.mode === 'nftables') assert.match(rr.summary, /DNAT to one of 2 endpoints in turn \(round-robin\)/);
    else assert.match(rr.summary, /: DNAT to 10\.180\.0\.[12]:8080 \(round-robin\)/);
    assert.match(explanationText(rr), /^Balancing: {2}round-robin$/m);
    const mh = explain('maglev');
    assert.equal(mh.algorithm, 'maglev', mh.mode);
    assert.match(mh.summary, /by the client address and port \(maglev\)/);
    const sh = explain('source-hash');
    assert.equal(sh.algorithm, 'source-hash', sh.mode);
    assert.match(sh.summary, /: DNAT to 10\.180\.0\.[12]:8080 \(source-hash\)/);
  }
});
