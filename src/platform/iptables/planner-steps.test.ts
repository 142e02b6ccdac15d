// The planner run in slices (planSteps under runSliced, the event loop turning
// between steps, as IptablesDataplane runs it) gives the same restore input,
// byte for byte, as the planner run in one go (plan), over a sequence of full
// and partial syncs of a varied cluster: Service types, multi-port Services,
// traffic policies, affinity, external IPs, ports without endpoints, local
// and terminating endpoints, Services added, changed and deleted, a stale
// chain in the live list; in and out of large-cluster mode. Each input is
// also applied to a Fake, so a broken one fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { EndpointSlice, Service } from '../../core/api.js';
import { nodeInfoFromNode } from '../../core/nodeinfo.js';
import { finish, type Steps } from '../../core/steps.js';
import type { Dataplane, SyncState } from '../../core/types.js';
import { FamilyState } from '../../engine/familystate.js';
import { chainsFromSave, DEFAULT_IPTABLES_OPTIONS, Fake, type IptablesRender } from '../../dataplane/iptables/index.js';
import { LOCAL, TEST_NODE_NAME, service, slice, type EpDef } from '../../../test/cases/fixtures.js';
import { scenarioConfig } from '../../../test/cases/resolve.js';
import { runSliced } from '../slices.js';
import { IptablesPlanner } from './planner.js';

const CONFIG = scenarioConfig(
  { name: 'steps', refs: [], family: 'IPv4', setup: { services: [], slices: [] }, flows: [] },
  'iptables',
);
const N = 600;
const ip = (a: number, i: number) => `${a}.${(i >> 8) & 255}.${i & 255}.${1 + (i >> 16)}`;

/** Service i, one of seven shapes; `v` varies what a change alters. */
function svc(i: number, v = 0): Service {
  const name = `s${i}`;
  const clusterIP = ip(172, i);
  switch (i % 7) {
    case 0:
      return service(name, { clusterIP }, [{ name: 'http', port: 80 + v, targetPort: 8080 }]);
    case 1:
      return service(name, { type: 'NodePort', clusterIP }, [
        { name: 'http', port: 80, targetPort: 8080, nodePort: 30000 + (i % 2000) },
        { name: 'dns', port: 53, protocol: 'UDP', targetPort: 5353, nodePort: 32000 + (i % 700) },
      ]);
    case 2:
      return service(
        name,
        {
          type: 'LoadBalancer',
          clusterIP,
          externalTrafficPolicy: 'Local',
          healthCheckNodePort: 31000 + (i % 900),
          loadBalancerSourceRanges: ['203.0.113.0/25'],
          lb: [ip(198, i)],
        },
        [{ name: 'https', port: 443, targetPort: 8443, nodePort: 30000 + (i % 2000) }],
      );
    case 3:
      return service(name, { clusterIP, externalIPs: [ip(192, i)], sessionAffinity: 'ClientIP' }, [
        { name: 'http', port: 80, targetPort: 8080 },
      ]);
    case 4:
      return service(name, { clusterIP }, [{ name: 'none', port: 81 }]);
    case 5:
      return service(name, { type: 'NodePort', clusterIP, internalTrafficPolicy: 'Local' }, [
        { name: 'http', port: 80, targetPort: 8080, nodePort: 31900 + (i % 99) },
      ]);
    default:
      return service(name, { clusterIP }, [
        { name: 'a', port: 1000 },
        { name: 'b', port: 1001, protocol: 'SCTP' },
      ]);
  }
}

/** Its endpoints: 0-4 of them, some on this node, some terminating; none for shape 4. */
function eps(i: number, v = 0): EndpointSlice | null {
  if (i % 7 === 4) return null;
  const n = (i + v) % 5;
  const list: EpDef[] = [];
  for (let e = 0; e < n; e++) {
    const local = (i + e + v) % 3 === 0;
    list.push({ ip: ip(10, i * 5 + e + v * 7), ...(local ? { node: LOCAL } : {}), terminating: e === 3 });
  }
  const ports =
    i % 7 === 1
      ? [
          { name: 'http', port: 8080 },
          { name: 'dns', port: 5353, protocol: 'UDP' as const },
        ]
      : i % 7 === 2
        ? [{ name: 'https', port: 8443 }]
        : i % 7 === 6
          ? [
              { name: 'a', port: 1000 },
              { name: 'b', port: 1001, protocol: 'SCTP' as const },
            ]
          : [{ name: 'http', port: 8080 }];
  return slice(`s${i}`, ports, list);
}

/** Drives the steps with a turn of the event loop after every one, counting them. */
async function stepped<T>(steps: Steps<T>): Promise<{ value: T; steps: number }> {
  let n = 0;
  function* counted(): Steps<T> {
    for (;;) {
      const r = steps.next();
      if (r.done) return r.value;
      n++;
      yield;
    }
  }
  const value = await runSliced(counted(), 0);
  return { value, steps: n };
}

const fields = (r: IptablesRender) => {
  const { restoreParts: _parts, restoreText: _text, ...rest } = r;
  return rest;
};

async function sequence(largeClusterThreshold: number): Promise<{ syncs: number; largeCluster: boolean[] }> {
  const options = { ...DEFAULT_IPTABLES_OPTIONS, largeClusterThreshold };
  const dp = { family: 'IPv4', mode: 'iptables' } as unknown as Dataplane;
  const fam = new FamilyState(
    dp,
    TEST_NODE_NAME,
    0,
    () => {},
    () => {},
  );
  const node = nodeInfoFromNode(TEST_NODE_NAME, null, { IPv4: '192.168.0.2' });
  const put = (i: number, v = 0) => {
    fam.services.update(null, svc(i, v));
    const s = eps(i, v);
    if (s) fam.endpointsTracker.endpointSliceUpdate(s, false);
  };
  const next = (fullSync: boolean): SyncState => {
    const changes = fam.checkout();
    return finish(fam.stateSteps({ node, changedServices: changes.updatedServices, fullSync, serviceCIDRs: [] }));
  };
  const oneGo = new IptablesPlanner();
  const sliced = new IptablesPlanner();
  const fake = new Fake();
  const largeCluster: boolean[] = [];
  let syncs = 0;
  const both = async (state: SyncState, full: boolean, live: string[] | null) => {
    const a = oneGo.plan({ state, config: CONFIG, options }, full, live);
    const b = await stepped(sliced.planSteps({ state, config: CONFIG, options }, full, live));
    assert.equal(b.value.restoreText, a.restoreText, `sync ${syncs}: the same bytes`);
    assert.deepEqual(b.value.restoreParts, a.restoreParts, `sync ${syncs}: the same pieces`);
    assert.deepEqual(fields(b.value), fields(a), `sync ${syncs}: the same counts`);
    // A full render of every port takes several steps (at most 250 ports rendered in one).
    if (!a.partial) assert.ok(b.steps >= state.services.size / 250, `sync ${syncs}: ${b.steps} steps`);
    fake.restore(a.restoreText, { noflush: true });
    fam.succeeded(state, full ? 0 : null);
    largeCluster.push(a.largeClusterMode);
    syncs++;
    return a;
  };

  for (let i = 0; i < N; i++) put(i);
  // Cold: a full sync from a live list holding a stale chain of ours and a foreign one.
  const cold = await both(next(true), true, ['KUBE-SEP-STALE0000000000', 'FOREIGN']);
  assert.deepEqual(cold.deletedChains, ['KUBE-SEP-STALE0000000000']);
  // Endpoints move in 40 Services: top-level rules unchanged except where a port loses its last endpoint.
  for (let i = 0; i < 40; i++) {
    const s = eps(i * 29, 1);
    if (s) fam.endpointsTracker.endpointSliceUpdate(s, false);
  }
  const moved = await both(next(false), false, null);
  assert.equal(moved.partial, true);
  // Services deleted, added and changed (a port number): the top-level chains change.
  for (let i = 0; i < 10; i++) {
    fam.services.update(svc(i * 97), null);
    const s = eps(i * 97);
    if (s) fam.endpointsTracker.endpointSliceUpdate(s, true);
    put(N + i);
    fam.services.update(svc(i * 7 + 700), svc(i * 7 + 700, 1));
  }
  const churned = await both(next(false), false, null);
  assert.ok(churned.deletedChains.length > 0, 'deleted Services withdraw their chains');
  // Only endpoints again: in large-cluster mode the top-level chains are kept.
  for (let i = 0; i < 5; i++) {
    const s = eps(i * 13 + 1, 2);
    if (s) fam.endpointsTracker.endpointSliceUpdate(s, false);
  }
  await both(next(false), false, null);
  // A periodic full sync from the Fake's chain list.
  await both(next(true), true, chainsFromSave(fake.save('nat'), 'nat'));
  return { syncs, largeCluster };
}

test('the sliced plan writes the same restore input as the plan in one go, in large-cluster mode', async () => {
  const r = await sequence(DEFAULT_IPTABLES_OPTIONS.largeClusterThreshold);
  assert.equal(r.syncs, 5);
  assert.deepEqual(r.largeCluster, [true, true, true, true, true]);
});

test('the sliced plan writes the same restore input as the plan in one go, below large-cluster mode', async () => {
  const r = await sequence(1e9);
  assert.deepEqual(r.largeCluster, [false, false, false, false, false]);
});
