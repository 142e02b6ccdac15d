import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nodeInfoFromNode } from '../core/nodeinfo.js';
import { buildSyncState, countNoLocalEndpoints } from '../core/snapshot.js';
import { finish } from '../core/steps.js';
import type { Dataplane, SyncState } from '../core/types.js';
import {
  TEST_NODE,
  endpoint,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
} from '../../test/support/fixtures.js';
import { FamilyState } from './familystate.js';

const NODE = nodeInfoFromNode(TEST_NODE, null, { IPv4: '192.168.0.2' });

function family(): FamilyState {
  return new FamilyState(
    { family: 'IPv4' } as Dataplane,
    TEST_NODE,
    0,
    () => {},
    () => {},
  );
}

/** A small deterministic generator, so a failure names a seed that reproduces it. */
function rng(seed: number): (n: number) => number {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x % n;
  };
}

function service(i: number, variant: number) {
  return makeService('ns', `s${i}`, (s) => {
    withClusterIP(s, `172.30.${i >> 8}.${i & 255}`);
    const ports = [svcPort('a', 80), svcPort('dns', 53, 'UDP')];
    s.spec.ports = variant % 3 === 0 ? ports : variant % 3 === 1 ? ports.slice(0, 1) : [...ports, svcPort('b', 81)];
    if (variant % 2 === 1) s.spec.internalTrafficPolicy = 'Local';
    if (variant % 4 === 2) {
      s.spec.type = 'LoadBalancer';
      s.spec.externalTrafficPolicy = 'Local';
      s.spec.healthCheckNodePort = 30000 + i;
      for (const p of s.spec.ports) p.nodePort = 31000 + i * 3 + (p.port ?? 53) - 53;
    }
  });
}

function slice(i: number, variant: number) {
  return makeSlice('ns', `s${i}`, 1, (s) => {
    s.endpoints = Array.from({ length: 1 + (variant % 3) }, (_, e) =>
      endpoint(`10.1.${i & 255}.${e + 1}`, { nodeName: (variant + e) % 2 === 0 ? TEST_NODE : 'other' }),
    );
    s.ports = [slicePort('a', 8080), slicePort('dns', 5353, 'UDP'), slicePort('b', 8081)];
    s.metadata.resourceVersion = String(variant);
  });
}

/** What a state says, as plain data in key order (the live maps keep insertion order). */
function contents(st: SyncState) {
  const keys = [...st.services.keys()].sort();
  return keys.map((k) => ({
    k,
    sp: st.services.get(k),
    eps: st.endpoints.get(k),
    cat: st.categorized.get(k),
  }));
}

test('a partial sync changes the snapshot in place and ends where a whole build would', () => {
  for (const seed of [1, 2, 3, 4]) {
    const r = rng(seed);
    const f = family();
    const live = new Map<number, number>();
    for (let i = 0; i < 40; i++) {
      const v = r(12);
      live.set(i, v);
      f.services.update(null, service(i, v));
      f.endpointsTracker.endpointSliceUpdate(slice(i, v), false);
    }
    f.checkout();
    let last = finish(f.stateSteps({ node: NODE, fullSync: true, changedServices: new Set(), serviceCIDRs: [] }));
    for (let round = 0; round < 30; round++) {
      // A few Services change, appear or go; the rest stay as they were.
      for (let c = 0; c < 1 + r(3); c++) {
        const i = r(50);
        const old = live.get(i);
        const op = r(4);
        if (old !== undefined && op === 0) {
          f.services.update(service(i, old), null);
          f.endpointsTracker.endpointSliceUpdate(slice(i, old), true);
          live.delete(i);
        } else {
          const v = r(12);
          f.services.update(old === undefined ? null : service(i, old), service(i, v));
          if (op !== 1) f.endpointsTracker.endpointSliceUpdate(slice(i, v), false);
          live.set(i, v);
        }
      }
      const changes = f.checkout();
      const st = finish(
        f.stateSteps({ node: NODE, fullSync: false, changedServices: changes.updatedServices, serviceCIDRs: [] }),
      );
      const whole = buildSyncState({
        family: 'IPv4',
        services: f.servicePorts,
        endpoints: f.endpoints,
        node: NODE,
        changedServices: changes.updatedServices,
        fullSync: false,
        serviceCIDRs: [],
      });
      const at = `seed ${seed} round ${round}`;
      assert.deepEqual(contents(st), contents(whole), at);
      assert.deepEqual([...st.changedServicePorts!].sort(), [...whole.changedServicePorts!].sort(), at);
      assert.deepEqual(f.snapshot.noLocalEndpoints(), countNoLocalEndpoints(whole), at);
      const hc = [...whole.services].filter(([, sp]) => sp.healthCheckNodePort !== 0).map(([k]) => k);
      assert.deepEqual([...f.snapshot.healthCheckedPorts()].sort(), hc.sort(), at);
      if (changes.updatedServices.size <= 10) assert.equal(st.services, last.services, `${at}: changed in place`);
      last = st;
    }
  }
});

test('a port whose Service did not change keeps its categories; a rebuild swaps in fresh maps at its end', () => {
  const f = family();
  for (let i = 0; i < 20; i++) {
    f.services.update(null, service(i, 0));
    f.endpointsTracker.endpointSliceUpdate(slice(i, 0), false);
  }
  f.checkout();
  const first = finish(f.stateSteps({ node: NODE, fullSync: true, changedServices: new Set(), serviceCIDRs: [] }));
  const catOf = (st: SyncState, k: string) => st.categorized.get(k);
  const before = catOf(first, 'ns/s1:a');
  const other = catOf(first, 'ns/s2:a');
  f.endpointsTracker.endpointSliceUpdate(slice(1, 1), false);
  const ch = f.checkout();
  const partial = finish(
    f.stateSteps({ node: NODE, fullSync: false, changedServices: ch.updatedServices, serviceCIDRs: [] }),
  );
  assert.deepEqual([...partial.changedServicePorts!].sort(), ['ns/s1:a', 'ns/s1:dns']);
  assert.notEqual(catOf(partial, 'ns/s1:a'), before);
  assert.equal(catOf(partial, 'ns/s2:a'), other);
  // A full sync builds new maps and leaves the ones handed out before as they were.
  const held = [...partial.services.keys()];
  const full = finish(f.stateSteps({ node: NODE, fullSync: true, changedServices: new Set(), serviceCIDRs: [] }));
  assert.notEqual(full.services, partial.services);
  assert.deepEqual([...partial.services.keys()], held);
  assert.equal(catOf(full, 'ns/s2:a'), other, 'same port, endpoints and node: categories kept');
  // Another node object recategorizes everything.
  const moved = finish(
    f.stateSteps({ node: { ...NODE }, fullSync: false, changedServices: new Set(), serviceCIDRs: [] }),
  );
  assert.notEqual(catOf(moved, 'ns/s2:a'), other);
});
