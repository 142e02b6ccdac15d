// `diff` with an ebpf proxy stopped reads where the pinned maps send the
// datapath canary, per family: here the maps are the ebpf Fake, filled by the
// mode's own planner from a state that holds each family's canary.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canaryTarget, withCanaryState } from '../../../core/canary.js';
import { syncStateFromObjects } from '../../../core/snapshot.js';
import type { IPFamily } from '../../../core/types.js';
import { Fake as EbpfFake } from '../../../dataplane/ebpf/fake.js';
import { EbpfPlanner } from '../../../platform/ebpf/planner.js';
import { NODE_CONFIG4, SERVICE_CIDR, SERVICE_CIDR_V6, TEST_NODE, makeNode } from '../../../../test/support/fixtures.js';
import { ebpfCanaryEndpoint } from './explain.js';

function mapsWithCanary(family: IPFamily, ip: string, port: number): EbpfFake {
  const state = syncStateFromObjects({
    services: [],
    slices: [],
    family,
    node: makeNode(TEST_NODE),
    serviceCIDRs: [family === 'IPv4' ? SERVICE_CIDR : SERVICE_CIDR_V6],
    fullSync: true,
  });
  const config = { ...NODE_CONFIG4, family, nodePortAddresses: [], localIPs: [ip] };
  const fake = new EbpfFake();
  fake.apply(
    new EbpfPlanner(config).plan({ state: withCanaryState(state, canaryTarget(family, TEST_NODE, ip, port)) }).ops,
  );
  return fake;
}

test("the pinned maps name each family's canary listener; a family without a canary has none", () => {
  assert.deepEqual(ebpfCanaryEndpoint(mapsWithCanary('IPv4', '192.168.77.12', 40001), 'IPv4'), [
    '192.168.77.12',
    40001,
  ]);
  const v6 = mapsWithCanary('IPv6', 'fd00:77::12', 40002);
  assert.deepEqual(ebpfCanaryEndpoint(v6, 'IPv6'), ['fd00:77::12', 40002]);
  assert.equal(ebpfCanaryEndpoint(v6, 'IPv4'), null);
});
