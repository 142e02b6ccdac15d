// Partial syncs (upstream MinimizeIPTablesRestore / TestSyncProxyRulesRepeated):
// the filter table is always complete, nat rewrites the top-level chains (in
// large-cluster mode only when they change) but only the service chains of
// changed services, and stale chains are deleted.
// Each render is applied to the fake, so invalid payloads fail here too.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Service, EndpointSlice } from '../../core/api.js';
import { syncStateFromObjects } from '../../core/snapshot.js';
import {
  chainsFromSave,
  DEFAULT_IPTABLES_OPTIONS,
  Fake,
  IPTABLES_JUMP_CHAINS,
  jumpRuleArgs,
  IptablesDriver,
  type IptablesRender,
} from './index.js';
import { Reconciler } from '../../engine/reconciler.js';
import { IptablesPlanner } from '../../platform/iptables/planner.js';
import { endpointChainName, serviceChainName } from './names.js';
import { LOCAL, LOCAL_IPS_V4, service, slice } from '../../../test/cases/fixtures.js';
import { scenarioConfig } from '../../../test/cases/resolve.js';
import { trace as tracePacket } from './trace.js';

const config = scenarioConfig(
  { name: 'p', refs: [], family: 'IPv4', setup: { services: [], slices: [] }, flows: [] },
  'iptables',
);
const p80 = [{ name: 'p80', port: 80 }];
const svc1 = service('svc1', { clusterIP: '172.30.0.41' }, p80);
const svc2 = service('svc2', { type: 'NodePort', clusterIP: '172.30.0.42' }, [
  { name: 'p80', port: 80, nodePort: 3002 },
]);
const slice1 = slice('svc1', p80, [{ ip: '10.180.0.1', node: LOCAL }]);
const slice2a = slice('svc2', p80, [{ ip: '10.180.0.2' }]);
const slice2b = slice('svc2', p80, [{ ip: '10.180.0.2' }, { ip: '10.180.0.3' }]);

/** One dataplane's planner and the table it writes. */
class Syncer {
  readonly fake = new Fake();
  readonly planner = new IptablesPlanner();
  last: IptablesRender | null = null;

  sync(services: Service[], slices: EndpointSlice[], changed: string[], fullSync: boolean): IptablesRender {
    const state = syncStateFromObjects({
      services,
      slices,
      family: 'IPv4',
      nodeIPs: { IPv4: '192.168.0.2' },
      fullSync,
      changedServices: changed,
    });
    const r = this.planner.plan(
      { state, config, options: DEFAULT_IPTABLES_OPTIONS },
      fullSync,
      chainsFromSave(this.fake.save('nat'), 'nat'),
    );
    try {
      this.fake.restore(r.restoreText);
    } catch (e) {
      this.planner.failed();
      throw e;
    }
    if (!r.partial) {
      for (const j of IPTABLES_JUMP_CHAINS) {
        if (!j.onlyIfChainRendered || r.filterChains.includes(j.to))
          this.fake.ensureRule('prepend', j.table, j.from, jumpRuleArgs(j));
      }
    }
    this.last = r;
    return r;
  }
}

const natSection = (t: string) => t.slice(t.indexOf('*nat'));
const filterSection = (t: string) => t.slice(0, t.indexOf('*nat'));
const trace = (f: Fake, dst: string, port = 80) => tracePacket(f, { src: '10.0.0.2', dst, port }, LOCAL_IPS_V4).output;

test('a partial sync writes only the changed service chains, and keeps the rest working', () => {
  const s = new Syncer();
  const full = s.sync([svc1, svc2], [slice1, slice2a], [], true);
  assert.equal(full.partial, false);
  const svc1Chain = serviceChainName('ns1/svc1:p80', 'TCP');
  const svc2Chain = serviceChainName('ns1/svc2:p80', 'TCP');
  assert.ok(full.restoreText.includes(`:${svc1Chain} - [0:0]`));

  const part = s.sync([svc1, svc2], [slice1, slice2b], ['ns1/svc2'], false);
  assert.equal(part.partial, true);
  const nat = natSection(part.restoreText);
  assert.ok(!nat.includes(`:${svc1Chain} `), 'unchanged service chain not declared');
  assert.ok(
    !nat.includes(`-A ${svc1Chain} -m comment --comment "ns1/svc1:p80 -> `),
    'unchanged endpoint rules not written',
  );
  assert.ok(nat.includes(`:${svc2Chain} - [0:0]`));
  assert.ok(
    nat.includes('-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP"'),
    'top-level chains always complete',
  );
  assert.equal(filterSection(part.restoreText), filterSection(full.restoreText), 'filter table always complete');
  assert.ok(part.natRulesTotal > part.natRules);
  assert.ok([...s.planner.chains()].includes(svc1Chain), 'unchanged chains stay active');
  assert.equal(trace(s.fake, '172.30.0.41'), '10.180.0.1:80');
  assert.equal(trace(s.fake, '172.30.0.42'), '10.180.0.2:80, 10.180.0.3:80');
});

test("the changed service's chains are re-written even if only its endpoints changed; removed endpoints' chains are deleted", () => {
  const s = new Syncer();
  s.sync([svc1, svc2], [slice1, slice2b], [], true);
  const gone = endpointChainName('ns1/svc2:p80', 'TCP', '10.180.0.3:80');
  assert.ok(s.fake.hasChain('nat', gone));
  const r = s.sync([svc1, svc2], [slice1, slice2a], ['ns1/svc2'], false);
  assert.deepEqual(r.deletedChains, [gone]);
  assert.ok(natSection(r.restoreText).includes(`:${gone} - [0:0]\n`));
  assert.ok(r.restoreText.includes(`-X ${gone}\n`));
  assert.ok(!s.fake.hasChain('nat', gone));
  assert.equal(trace(s.fake, '172.30.0.42'), '10.180.0.2:80');
});

test("a deleted service's chains are declared and deleted, and its traffic no longer matches", () => {
  const s = new Syncer();
  s.sync([svc1, svc2], [slice1, slice2a], [], true);
  const r = s.sync([svc1], [slice1], ['ns1/svc2'], false);
  const svc2Chains = ['KUBE-EXT', 'KUBE-SVC'].map((p) => `${p}-${serviceChainName('ns1/svc2:p80', 'TCP').slice(9)}`);
  const sep = endpointChainName('ns1/svc2:p80', 'TCP', '10.180.0.2:80');
  assert.deepEqual(r.deletedChains, [...svc2Chains, sep].sort());
  for (const c of r.deletedChains) assert.ok(!s.fake.hasChain('nat', c), c);
  assert.equal(trace(s.fake, '172.30.0.42'), '');
  assert.equal(trace(s.fake, '172.30.0.41'), '10.180.0.1:80');
  // -X lines come before the final nodeports rule, as upstream writes them
  assert.match(
    r.restoreText,
    /-X [^\n]+\n-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports[^\n]+\nCOMMIT\n$/,
  );
});

test('stale chains are found from memory even without iptables-save, and only ours', () => {
  // Stale: our service chains in the live list that no Service wants.
  const driver = new IptablesDriver();
  const reconciler = new Reconciler(driver.spec);
  reconciler.adopt(driver.live(['KUBE-SVC-B', 'KUBE-SERVICES', 'MY-CHAIN', 'KUBE-SEP-A', 'KUBE-SVC-A']));
  const ops = reconciler.plan([['ns1/a', [{ kind: 'chain', key: 'KUBE-SVC-A', value: 1 }]]], true).ops;
  assert.deepEqual(
    ops
      .filter((op) => op.op === 'delete')
      .map((op) => op.key)
      .sort(),
    ['KUBE-SEP-A', 'KUBE-SVC-B'],
  );
  const s = new Syncer();
  s.sync([svc1, svc2], [slice1, slice2a], [], true);
  const state = syncStateFromObjects({
    services: [svc1],
    slices: [slice1],
    family: 'IPv4',
    nodeIPs: { IPv4: '192.168.0.2' },
    fullSync: false,
    changedServices: ['ns1/svc2'],
  });
  const r = s.planner.plan({ state, config, options: DEFAULT_IPTABLES_OPTIONS }, false, null);
  assert.equal(r.deletedChains.length, 3);
});

test('no memory (first sync or after a failure) or fullSync means a full nat section', () => {
  const state = syncStateFromObjects({
    services: [svc1, svc2],
    slices: [slice1, slice2a],
    family: 'IPv4',
    fullSync: false,
    changedServices: [],
  });
  const planner = new IptablesPlanner();
  const input = (st: typeof state) => ({ state: st, config, options: DEFAULT_IPTABLES_OPTIONS });
  const r = planner.plan(input(state), false, []);
  assert.equal(r.partial, false);
  assert.ok(r.restoreText.includes(`:${serviceChainName('ns1/svc1:p80', 'TCP')} - [0:0]`));
  const r2 = planner.plan(input({ ...state, fullSync: true }), true, []);
  assert.equal(r2.partial, false);
  const r3 = planner.plan(input(state), false, []);
  assert.equal(r3.partial, true);
  assert.equal(r3.natRulesTotal, r.natRules, 'total nat rules count what is in the kernel');
  planner.failed();
  const r4 = planner.plan(input(state), false, []);
  assert.equal(r4.partial, false, 'after a failure');
  assert.equal(r4.restoreText, r.restoreText);
});

test('large-cluster mode: a partial sync that changes no top-level rule leaves KUBE-SERVICES and KUBE-NODEPORTS alone', () => {
  // Threshold 0: every sync here is in large-cluster mode.
  const options = { ...DEFAULT_IPTABLES_OPTIONS, largeClusterThreshold: 0 };
  const fake = new Fake();
  const planner = new IptablesPlanner();
  const sync = (services: Service[], slices: EndpointSlice[], changed: string[], fullSync: boolean) => {
    const state = syncStateFromObjects({
      services,
      slices,
      family: 'IPv4',
      nodeIPs: { IPv4: '192.168.0.2' },
      fullSync,
      changedServices: changed,
    });
    const r = planner.plan({ state, config, options }, fullSync, chainsFromSave(fake.save('nat'), 'nat'));
    fake.restore(r.restoreText);
    if (!r.partial) for (const j of IPTABLES_JUMP_CHAINS) fake.ensureRule('prepend', j.table, j.from, jumpRuleArgs(j));
    return r;
  };
  /** One full sync of the same objects into a fresh table: its render and the table it leaves. */
  const freshSync = (services: Service[], slices: EndpointSlice[]) => {
    const f = new Fake();
    const state = syncStateFromObjects({ services, slices, family: 'IPv4', nodeIPs: { IPv4: '192.168.0.2' } });
    const r = new IptablesPlanner().plan({ state, config, options }, true, []);
    f.restore(r.restoreText);
    for (const j of IPTABLES_JUMP_CHAINS) f.ensureRule('prepend', j.table, j.from, jumpRuleArgs(j));
    return { render: r, save: f.save() };
  };
  const fresh = (services: Service[], slices: EndpointSlice[]) => freshSync(services, slices).save;
  const full = sync([svc1, svc2], [slice1, slice2a], [], true);
  assert.equal(full.natTopKept, false, 'a full sync writes them');
  const topLines = natSection(full.restoreText).match(/^-A KUBE-(SERVICES|NODEPORTS) /gm)!.length;
  assert.ok(topLines >= 4, 'svc1 cluster IP, svc2 cluster IP and NodePort, the jump to KUBE-NODEPORTS');
  assert.equal(full.natTopRules, topLines);

  // One more endpoint for svc2: only its own chains change.
  const one = sync([svc1, svc2], [slice1, slice2b], ['ns1/svc2'], false);
  assert.equal(one.natTopKept, true);
  const nat = natSection(one.restoreText);
  assert.doesNotMatch(nat, /^:KUBE-SERVICES |^:KUBE-NODEPORTS |^-A KUBE-SERVICES |^-A KUBE-NODEPORTS /m);
  assert.ok(nat.includes(`:${serviceChainName('ns1/svc2:p80', 'TCP')} - [0:0]`));
  assert.equal(
    one.natRulesTotal,
    freshSync([svc1, svc2], [slice1, slice2b]).render.natRules,
    'kept rules are still counted in the total',
  );
  assert.equal(one.natTopRules, topLines);
  assert.equal(fake.save(), fresh([svc1, svc2], [slice1, slice2b]), 'the table a full sync would leave');
  assert.equal(trace(fake, '172.30.0.42'), '10.180.0.2:80, 10.180.0.3:80');

  // svc1 loses its endpoints: its cluster IP rule leaves KUBE-SERVICES, which is written whole.
  const gone = sync([svc1, svc2], [slice2b], ['ns1/svc1'], false);
  assert.equal(gone.natTopKept, false);
  assert.match(natSection(gone.restoreText), /^:KUBE-SERVICES - \[0:0\]$/m);
  assert.equal(fake.save(), fresh([svc1, svc2], [slice2b]));

  // After a failed restore the next sync is full, and writes them again.
  planner.failed();
  assert.equal(sync([svc1, svc2], [slice2b], [], false).natTopKept, false);
  assert.equal(sync([svc1, svc2], [slice1, slice2b], ['ns1/svc1'], false).natTopKept, false, 'svc1 is back');
  assert.equal(sync([svc1, svc2], [slice1, slice2a], ['ns1/svc2'], false).natTopKept, true);
  assert.equal(fake.save(), fresh([svc1, svc2], [slice1, slice2a]));
});

test('outside large-cluster mode every partial sync writes the top-level chains whole, as upstream does', () => {
  const s = new Syncer();
  s.sync([svc1, svc2], [slice1, slice2a], [], true);
  const r = s.sync([svc1, svc2], [slice1, slice2b], ['ns1/svc2'], false);
  assert.equal(r.largeClusterMode, false);
  assert.equal(r.natTopKept, false);
  assert.match(natSection(r.restoreText), /^:KUBE-SERVICES - \[0:0\]$/m);
});
