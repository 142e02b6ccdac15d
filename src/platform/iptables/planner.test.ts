// IptablesPlanner: the driver on the one reconciler. The failure rule, full
// syncs starting from the live chain list (or from what the reconciler
// knows), and partial syncs rewriting a changed Service's port only when
// its render changed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { SyncState } from '../../core/types.js';
import { service, slice } from '../../../test/cases/fixtures.js';
import { scenarioConfig } from '../../../test/cases/resolve.js';
import { DEFAULT_IPTABLES_OPTIONS } from '../../dataplane/iptables/renderer.js';
import { endpointChainName, serviceChainName } from '../../dataplane/iptables/names.js';
import { IptablesPlanner } from './planner.js';

const CONFIG = scenarioConfig(
  { name: 'planner', refs: [], family: 'IPv4', setup: { services: [], slices: [] }, flows: [] },
  'iptables',
);
const p80 = [{ name: 'p80', port: 80 }];
const SVC1 = serviceChainName('ns1/svc1:p80', 'TCP');
const SEP1 = endpointChainName('ns1/svc1:p80', 'TCP', '10.1.0.1:80');
const SVC2 = serviceChainName('ns1/svc2:p80', 'TCP');
const SEP2 = endpointChainName('ns1/svc2:p80', 'TCP', '10.2.0.1:80');

function state(names: string[], fullSync: boolean, changed: string[] = []): SyncState {
  return syncStateFromObjects({
    services: names.map((n, i) => service(n, { clusterIP: `172.30.0.${i + 1}` }, p80)),
    slices: names.map((n, i) => slice(n, p80, [{ ip: `10.${i + 1}.0.1` }])),
    family: 'IPv4',
    nodeIPs: { IPv4: '192.168.0.2' },
    fullSync,
    changedServices: changed,
  });
}
const input = (s: SyncState) => ({ state: s, config: CONFIG, options: DEFAULT_IPTABLES_OPTIONS });
const declared = (text: string) => [...text.matchAll(/^:(KUBE-(?:SVC|SEP)-\w+) /gm)].map((m) => m[1]).sort();

test('the first plan is full and starts from the live chain list: our stale chains go, foreign ones stay', () => {
  const p = new IptablesPlanner();
  assert.equal(p.needsLive(), true);
  const r = p.plan(input(state(['svc1'], false)), false, ['KUBE-SEP-OLD', 'FOREIGN', SVC1]);
  assert.equal(r.partial, false);
  assert.deepEqual(r.deletedChains, ['KUBE-SEP-OLD']);
  assert.deepEqual(declared(r.restoreText), [SEP1, SVC1, 'KUBE-SEP-OLD'].sort());
  assert.deepEqual([...p.chains()].sort(), [SEP1, SVC1].sort());
  assert.equal(p.needsLive(), false);
});

test('a full plan without a chain list rewrites every chain it knows and deletes withdrawn ones', () => {
  const p = new IptablesPlanner();
  p.plan(input(state(['svc1', 'svc2'], true)), true, []);
  const s = state(['svc1'], true);
  const r = p.plan(input(s), true);
  assert.equal(r.partial, false);
  assert.deepEqual(r.deletedChains, [SEP2, SVC2].sort());
  assert.ok(r.restoreText.includes(`-A ${SEP1} `), 'unchanged, rewritten all the same');
  assert.equal(p.plan(input(s), true).restoreText, p.plan(input(s), true).restoreText);
});

test('a full plan deletes a leftover of ours it finds in the live list; a partial plan does not read the list', () => {
  const p = new IptablesPlanner();
  const s = state(['svc1'], true);
  p.plan(input(s), true, []);
  const partial = p.plan(input({ ...s, fullSync: false, changedServices: new Set() }), false, ['KUBE-SVC-LEFTOVER']);
  assert.deepEqual(partial.deletedChains, []);
  const full = p.plan(input(s), true, [SVC1, SEP1, 'KUBE-SVC-LEFTOVER', 'FOREIGN']);
  assert.deepEqual(full.deletedChains, ['KUBE-SVC-LEFTOVER']);
  assert.deepEqual(declared(full.restoreText), [SEP1, SVC1, 'KUBE-SVC-LEFTOVER'].sort());
  assert.deepEqual(p.plan(input(s), true, [SVC1, SEP1, 'FOREIGN']).deletedChains, []);
});

test('after failed() the next plan is full whatever the caller asks, and adopts the live list', () => {
  const p = new IptablesPlanner();
  p.plan(input(state(['svc1', 'svc2'], true)), true, []);
  p.failed();
  assert.equal(p.needsLive(), true);
  assert.deepEqual([...p.chains()], [], 'nothing known after a failure');
  const r = p.plan(input(state(['svc1'], false, [])), false, [SVC1, SEP1, SVC2, SEP2]);
  assert.equal(r.partial, false);
  assert.deepEqual(r.deletedChains, [SEP2, SVC2].sort());
  assert.deepEqual(declared(r.restoreText), [SEP1, SEP2, SVC1, SVC2].sort());
});

test("a partial plan writes a changed Service's port only when its render changed", () => {
  const p = new IptablesPlanner();
  const first = state(['svc1', 'svc2'], true);
  p.plan(input(first), true, []);
  // The engine keeps the objects of a Service whose change left its ports and endpoints as they were.
  const same = p.plan(input({ ...first, fullSync: false, changedServices: new Set(['ns1/svc1']) }), false);
  assert.equal(same.partial, true);
  assert.deepEqual(declared(same.restoreText), []);
  assert.deepEqual(same.deletedChains, []);
  const fresh = p.plan(input(state(['svc1', 'svc2'], false, ['ns1/svc1'])), false);
  assert.deepEqual(declared(fresh.restoreText), [SEP1, SVC1].sort(), 'new objects: rewritten, svc2 untouched');
  const gone = p.plan(input(state(['svc2'], false, ['ns1/svc1'])), false);
  assert.deepEqual(gone.deletedChains, [SEP1, SVC1].sort());
  assert.deepEqual([...p.chains()].sort(), [SEP2, SVC2].sort());
});
