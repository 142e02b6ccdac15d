// The iptables driver's own contract (driver.ts): which owners a draft lists
// and with which chains and values, which live chains are ours, and how the
// reconciler's operations become restore text. Whole renders are pinned by
// the goldens under test/dataplane and the partial-sync tests beside it
// (partial.test.ts, repeated.test.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { SyncState } from '../../core/types.js';
import { BugError } from '../../core/errors.js';
import { service, slice } from '../../../test/cases/fixtures.js';
import { scenarioConfig } from '../../../test/cases/resolve.js';
import { IptablesDriver, type ChainObject, type ChainOp, type IptablesDraft } from './driver.js';
import { endpointChainName, serviceChainName } from './names.js';
import { DEFAULT_IPTABLES_OPTIONS } from './renderer.js';

const CONFIG = scenarioConfig(
  { name: 'driver', refs: [], family: 'IPv4', setup: { services: [], slices: [] }, flows: [] },
  'iptables',
);
const p80 = [{ name: 'p80', port: 80 }];
const two = [
  { name: 'a', port: 80 },
  { name: 'b', port: 81 },
];

function state(fullSync = true, changed?: string[]): SyncState {
  return syncStateFromObjects({
    services: [
      service('svc1', { clusterIP: '172.30.0.1' }, p80),
      service('svc2', { clusterIP: '172.30.0.2' }, p80),
      service('svc3', { clusterIP: '172.30.0.3' }, two),
    ],
    slices: [slice('svc1', p80, [{ ip: '10.1.0.1' }]), slice('svc3', two, [{ ip: '10.3.0.1' }])],
    family: 'IPv4',
    nodeIPs: { IPv4: '192.168.0.2' },
    fullSync,
    ...(changed ? { changedServices: changed } : {}),
  });
}

const owners = (d: IptablesDraft) => new Map<string, readonly ChainObject[]>([...d]);
const draftOf = (driver: IptablesDriver, s: SyncState, full: boolean) =>
  driver.desired({ state: s, config: CONFIG, options: DEFAULT_IPTABLES_OPTIONS }, full);
const puts = (objects: readonly ChainObject[]): ChainOp[] =>
  objects.map((o) => ({ op: 'put', kind: o.kind, key: o.key, value: o.value }));

test('a full draft lists every Service with its chains, one generation per port', () => {
  const wanted = owners(draftOf(new IptablesDriver(), state(), true));
  assert.deepEqual([...wanted.keys()].sort(), ['ns1/svc1', 'ns1/svc2', 'ns1/svc3']);
  assert.deepEqual(wanted.get('ns1/svc2'), [], 'no endpoints: no chains, but the Service is listed');
  const svc1 = wanted.get('ns1/svc1')!;
  assert.deepEqual(svc1.map((o) => o.key).sort(), [
    endpointChainName('ns1/svc1:p80', 'TCP', '10.1.0.1:80'),
    serviceChainName('ns1/svc1:p80', 'TCP'),
  ]);
  assert.ok(svc1.every((o) => o.kind === 'chain' && o.value === svc1[0]!.value));
  const svc3 = wanted.get('ns1/svc3')!;
  const byPort = (port: string) => svc3.filter((o) => o.key === serviceChainName(`ns1/svc3:${port}`, 'TCP'))[0]!;
  assert.equal(svc3.length, 4, 'both ports of the Service');
  assert.notEqual(byPort('a').value, byPort('b').value);
});

test('a partial draft lists only the changed Services; a port rendered from the same objects keeps its generation', () => {
  const driver = new IptablesDriver();
  const first = state();
  const full = owners(draftOf(driver, first, true));
  const changed = new Set(['ns1/svc1', 'ns1/gone']);
  const again = owners(draftOf(driver, { ...first, fullSync: false, changedServices: changed }, false));
  assert.deepEqual([...again.keys()].sort(), ['ns1/gone', 'ns1/svc1']);
  assert.deepEqual(again.get('ns1/gone'), [], 'a deleted Service withdraws its chains');
  assert.deepEqual(again.get('ns1/svc1'), full.get('ns1/svc1'), 'the memo stands for the same rules');
  const fresh = owners(draftOf(driver, state(false, ['ns1/svc1']), false));
  assert.notEqual(fresh.get('ns1/svc1')![0]!.value, full.get('ns1/svc1')![0]!.value, 'new objects: a new generation');
});

test('live: our service chains only, their content unknown', () => {
  assert.deepEqual(new IptablesDriver().live(['KUBE-SERVICES', 'KUBE-SVC-A', 'FOREIGN', 'KUBE-SEP-B']), [
    { kind: 'chain', key: 'KUBE-SVC-A', value: null },
    { kind: 'chain', key: 'KUBE-SEP-B', value: null },
  ]);
});

test("translate: a put writes its port whole (rendered again when recalled), deletes are declared and -X'd in order", () => {
  const driver = new IptablesDriver();
  const first = state();
  const fullDraft = draftOf(driver, first, true);
  const full = fullDraft.translate(puts([...owners(fullDraft).values()].flat()), true).restoreText;
  const svc1 = owners(fullDraft).get('ns1/svc1')!;
  const partial = draftOf(driver, { ...first, fullSync: false, changedServices: new Set(['ns1/svc1']) }, false);
  const r = partial.translate(
    [
      ...puts(svc1.slice(0, 1)),
      { op: 'delete', kind: 'chain', key: 'KUBE-SEP-ZZZ', before: 1 },
      { op: 'delete', kind: 'chain', key: 'KUBE-SEP-AAA', before: null },
    ],
    false,
  );
  assert.equal(r.partial, true);
  const svcChain = serviceChainName('ns1/svc1:p80', 'TCP');
  const rulesOf = (text: string, chain: string) => text.split('\n').filter((l) => l.startsWith(`-A ${chain} `));
  for (const o of svc1) {
    assert.ok(r.restoreText.includes(`:${o.key} - [0:0]\n`), o.key);
    assert.deepEqual(rulesOf(r.restoreText, o.key), rulesOf(full, o.key), o.key);
  }
  assert.ok(rulesOf(r.restoreText, svcChain).length > 0);
  assert.ok(!r.restoreText.includes(`:${serviceChainName('ns1/svc3:a', 'TCP')} `), 'no put, not written');
  assert.deepEqual(r.deletedChains, ['KUBE-SEP-AAA', 'KUBE-SEP-ZZZ']);
  assert.match(r.restoreText, /\n-X KUBE-SEP-AAA\n-X KUBE-SEP-ZZZ\n/);
  assert.equal(r.natChains, 6, 'every service chain in the table after the restore');
});

test('translate refuses a plan of the other kind (a full plan of a partial draft would withdraw the rest)', () => {
  const draft = draftOf(new IptablesDriver(), state(false, []), false);
  assert.throws(() => draft.translate([], true), BugError);
});
