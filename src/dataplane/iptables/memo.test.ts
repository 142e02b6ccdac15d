// The renderer's memo (memo.ts) must never change a byte: renders that reuse
// memoised services (same objects, as the engine keeps them) equal renders of
// structurally equal but fresh objects (no memo hit possible).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { EndpointSlice, Service } from '../../core/api.js';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../core/types.js';
import { LOCAL_IPS_V4, service, slice } from '../../../test/cases/fixtures.js';
import { IptablesPlanner } from '../../platform/iptables/planner.js';
import { DEFAULT_IPTABLES_OPTIONS } from './renderer.js';

const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8'] },
  nodePortAddresses: null,
  localhostNodePorts: true,
  localIPs: LOCAL_IPS_V4,
};

function objects(moved: boolean): { services: Service[]; slices: EndpointSlice[] } {
  const p80 = [{ name: 'p80', port: 80 }];
  const services = [
    service('plain', { clusterIP: '172.30.0.1' }, p80),
    service('np', { type: 'NodePort', clusterIP: '172.30.0.2', externalIPs: ['192.168.99.50'] }, [
      { name: 'p80', port: 80, nodePort: 30002 },
    ]),
    service(
      'lb',
      {
        type: 'LoadBalancer',
        clusterIP: '172.30.0.3',
        externalTrafficPolicy: 'Local',
        healthCheckNodePort: 30100,
        loadBalancerSourceRanges: ['203.0.113.0/25'],
        lb: ['5.6.7.8'],
      },
      [{ name: 'p80', port: 80, nodePort: 30003 }],
    ),
    service('sticky', { clusterIP: '172.30.0.4', sessionAffinity: 'ClientIP' }, p80),
    service('empty', { clusterIP: '172.30.0.5' }, p80),
  ];
  const slices = [
    slice('plain', p80, [{ ip: '10.1.0.1' }, { ip: moved ? '10.1.0.9' : '10.1.0.2' }]),
    slice('np', p80, [{ ip: '10.2.0.1', node: 'test-node' }]),
    slice('lb', p80, [{ ip: '10.3.0.1' }, { ip: '10.3.0.2', node: 'test-node' }]),
    slice('sticky', p80, [{ ip: '10.4.0.1' }, { ip: '10.4.0.2' }]),
  ];
  return { services, slices };
}

function state(moved: boolean, fullSync: boolean): SyncState {
  return syncStateFromObjects({
    ...objects(moved),
    family: 'IPv4',
    nodeIPs: { IPv4: '192.168.0.2' },
    fullSync,
    changedServices: ['ns1/plain'],
  });
}

/** `next` with every service port except the changed one taken (same objects) from `prev`, as the engine does. */
function engineLike(prev: SyncState, next: SyncState, changedKey: string): SyncState {
  const services = new Map(next.services);
  const endpoints = new Map(next.endpoints);
  const categorized = new Map(next.categorized);
  for (const k of prev.services.keys()) {
    if (k === changedKey) continue;
    services.set(k, prev.services.get(k)!);
    endpoints.set(k, prev.endpoints.get(k)!);
    categorized.set(k, prev.categorized.get(k)!);
  }
  return { ...next, services, endpoints, categorized };
}

/** A sync of `s` by one dataplane's planner (full when the state says so, or on its first sync). */
const render = (planner: IptablesPlanner, s: SyncState, config = CONFIG) =>
  planner.plan({ state: s, config, options: DEFAULT_IPTABLES_OPTIONS }, s.fullSync);

test('a partial render reusing memoised services equals one of fresh objects', () => {
  const first = state(false, true);
  const a = new IptablesPlanner();
  render(a, first);
  const reused = render(a, engineLike(first, state(true, false), 'ns1/plain:p80'));
  const b = new IptablesPlanner();
  render(b, state(false, true));
  const fresh = render(b, state(true, false));
  assert.ok(reused.partial);
  assert.equal(reused.restoreText, fresh.restoreText);
  assert.deepEqual({ ...reused }, { ...fresh });
  assert.deepEqual([...a.chains()], [...b.chains()]);
  // The unchanged services' own chains are not rewritten, but their top-level rules are.
  assert.match(reused.restoreText, /-A KUBE-SERVICES .*ns1\/sticky:p80 cluster IP/);
  assert.doesNotMatch(reused.restoreText, /--to-destination 10\.4\.0\.1:80/);
  assert.match(reused.restoreText, /10\.1\.0\.9:80/);
});

test('a full render of the same objects is byte-identical every time (memo hits included)', () => {
  const s = state(false, true);
  const planner = new IptablesPlanner();
  const a = render(planner, s);
  const b = render(planner, s);
  const c = render(planner, state(false, true));
  assert.equal(b.restoreText, a.restoreText);
  assert.equal(c.restoreText, a.restoreText);
});

test('a changed render context invalidates memoised lines', () => {
  const s = state(false, true);
  const planner = new IptablesPlanner();
  render(planner, s);
  const cfg = { ...CONFIG, masqueradeAll: true, localDetector: { kind: 'none' as const }, localhostNodePorts: false };
  const partialState = { ...s, fullSync: false, changedServices: new Set<string>() };
  const reused = render(planner, partialState, cfg);
  const other = new IptablesPlanner();
  render(other, state(false, true), cfg);
  const fresh = render(other, { ...state(false, true), fullSync: false, changedServices: new Set<string>() }, cfg);
  assert.equal(reused.restoreText, fresh.restoreText);
  assert.notEqual(
    reused.restoreText,
    render(planner, { ...s, changedServices: new Set<string>(), fullSync: false }).restoreText,
  );
});
