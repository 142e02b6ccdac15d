// Invariant: after any sequence of partial syncs (and the later stale-chain
// deletion), the table equals what one full sync of the final state writes
// from scratch. Random but seeded sequences of Services with NodePorts,
// external IPs, LB source ranges, affinity, traffic policies and endpoints
// coming and going; both endpoint layouts.
import { ENDPOINT_LAYOUTS } from './static.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import { Fake } from './fake.js';
import { NftablesPlanner } from '../../platform/nftables/planner.js';
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
  withLoadBalancerIngress,
} from '../../../test/support/fixtures.js';

const CONFIG = NODE_CONFIG4;

/** mulberry32: a small seeded PRNG so failures reproduce. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomService(rnd: () => number, i: number) {
  const pick = (p: number) => rnd() < p;
  const svc = withClusterIP(
    makeService('ns', `s${i}`, (s) => {
      const lb = pick(0.3);
      s.spec.type = lb ? 'LoadBalancer' : pick(0.4) ? 'NodePort' : 'ClusterIP';
      s.spec.ports = [
        svcPort('a', 80, pick(0.2) ? 'UDP' : 'TCP', s.spec.type === 'ClusterIP' ? {} : { nodePort: 30000 + i * 2 }),
      ];
      if (pick(0.3))
        s.spec.ports.push(svcPort('b', 443, 'TCP', s.spec.type === 'ClusterIP' ? {} : { nodePort: 30001 + i * 2 }));
      if (pick(0.3)) s.spec.externalIPs = [`192.168.99.${i}`];
      if (lb && pick(0.5)) s.spec.loadBalancerSourceRanges = ['203.0.113.0/25', '192.168.0.0/24'];
      if (pick(0.3)) {
        s.spec.sessionAffinity = 'ClientIP';
        s.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: 60 } };
      }
      if (s.spec.type !== 'ClusterIP' && pick(0.4)) s.spec.externalTrafficPolicy = 'Local';
      if (pick(0.2)) s.spec.internalTrafficPolicy = 'Local';
    }),
    `172.30.0.${i + 1}`,
  );
  if (svc.spec.type === 'LoadBalancer') withLoadBalancerIngress(svc, `1.2.3.${i}`);
  const n = Math.floor(rnd() * 4);
  const slice = makeSlice('ns', `s${i}`, 1, (s) => {
    s.endpoints = Array.from({ length: n }, (_, k) =>
      endpoint(`10.180.${i}.${k + Math.floor(rnd() * 3) * 4}`, {
        nodeName: rnd() < 0.5 ? TEST_NODE : 'other',
        ready: rnd() < 0.8,
        serving: true,
        terminating: rnd() < 0.2,
      }),
    );
    s.ports = [slicePort('a', 8080, svc.spec.ports![0]!.protocol), slicePort('b', 8443)];
  });
  return { svc, slice };
}

for (const layout of ENDPOINT_LAYOUTS) {
  test(`partial syncs converge to the full-sync table (${layout})`, () => {
    for (let seed = 1; seed <= 25; seed++) {
      const rnd = prng(seed);
      const current = new Map<number, ReturnType<typeof randomService>>();
      const fake = new Fake('ip');
      const r = new NftablesPlanner(CONFIG, layout);
      let now = 0;
      const stateOf = (changed: string[] | null) =>
        syncStateFromObjects({
          services: [...current.values()].map((x) => x.svc),
          slices: [...current.values()].map((x) => x.slice),
          family: 'IPv4',
          node: makeNode(TEST_NODE),
          serviceCIDRs: [SERVICE_CIDR],
          fullSync: changed === null,
          ...(changed ? { changedServices: changed } : {}),
        });
      fake.run(r.plan(stateOf(null), now).tx);
      for (let step = 0; step < 12; step++) {
        const changed: string[] = [];
        for (let k = 0; k < 1 + Math.floor(rnd() * 3); k++) {
          const i = Math.floor(rnd() * 6);
          if (current.has(i) && rnd() < 0.3) current.delete(i);
          else current.set(i, randomService(rnd, i));
          changed.push(`ns/s${i}`);
        }
        now += 10;
        fake.run(r.plan(stateOf(changed), now).tx);
        now += 1500; // let stale chains age, then an empty sync deletes them
        fake.run(r.plan(stateOf([]), now).tx);
        const fresh = new Fake('ip');
        fresh.run(new NftablesPlanner(CONFIG, layout).plan(stateOf(null), 0).tx);
        assert.equal(fake.dump(), fresh.dump(), `seed ${seed} step ${step}`);
      }
    }
  });
}
