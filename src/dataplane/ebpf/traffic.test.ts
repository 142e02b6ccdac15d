// Per-Service traffic counters, pure side: the driver's CFG_TRAFFIC switch
// and the kpt_traffic entries TrafficCounterPlan writes into the Fake (the
// first N service ports in key order, zeroed when they start being counted,
// left alone by syncs that do not change the selection).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../core/types.js';
import { endpoint, makeService, makeSlice, slicePort, svcPort, withClusterIP } from '../../../test/support/fixtures.js';
import { liveEntries } from './driver.js';
import { Fake } from './fake.js';
import * as L from './layout.js';
import { EbpfPlanner } from '../../platform/ebpf/planner.js';
import { TrafficCounterPlan } from './traffic.js';

const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.244.0.0/16'] },
  nodePortAddresses: null,
  localhostNodePorts: false,
  localIPs: ['192.168.0.10'],
};

/** ClusterIP services (name -> endpoint count), one TCP port "http" each; SCTP for names starting with "sctp". */
function state(svcs: Record<string, number>, changed?: string[]): SyncState {
  const names = Object.keys(svcs);
  return syncStateFromObjects({
    services: names.map((name, i) =>
      withClusterIP(
        makeService('default', name, (s) => {
          s.spec.ports = [svcPort('http', 80, name.startsWith('sctp') ? 'SCTP' : 'TCP', { targetPort: 8080 })];
        }),
        `10.96.0.${i + 1}`,
      ),
    ),
    slices: names.map((name) =>
      makeSlice('default', name, 1, (s) => {
        s.endpoints = Array.from({ length: svcs[name]! }, (_, j) =>
          endpoint(`10.244.${j}.${names.indexOf(name) + 1}`, { nodeName: 'node-a', ready: true }),
        );
        s.ports = [slicePort('http', 8080)];
      }),
    ),
    family: 'IPv4',
    nodeName: 'node-a',
    serviceCIDRs: ['10.96.0.0/12'],
    ...(changed ? { changedServices: changed.map((n) => `default/${n}`), fullSync: false } : {}),
  });
}

/** One family's datapath in memory: planner, traffic plan, Fake. */
function node(max: number) {
  const fake = new Fake();
  const planner = new EbpfPlanner(CONFIG, { trafficCounters: true });
  const plan = new TrafficCounterPlan('IPv4', max);
  const sync = (s: SyncState) => {
    const r = planner.plan({ state: s });
    fake.apply(r.ops);
    const live = plan.needsLive() ? fake.dump('traffic').map(([k]) => L.decodeU32(k)) : undefined;
    const ops = plan.update(s, r.full, (k) => planner.idOf(k), live);
    fake.apply(ops);
    return ops;
  };
  /** Counted ports with their values, as a scrape reads them. */
  const counted = () =>
    Object.fromEntries(
      [...plan.counted].map(([id, slot]) => {
        const v = fake.lookup('traffic', L.encodeU32(id));
        return [slot.servicePort, v ? `${L.decodeTrafficValue(v).conns}/${L.decodeTrafficValue(v).bytes}` : 'none'];
      }),
    );
  /** What the programs do: add to the port's entry. */
  const count = (servicePort: string, conns: bigint, bytes: bigint) => {
    const id = planner.idOf(servicePort)!;
    const old = L.decodeTrafficValue(fake.lookup('traffic', L.encodeU32(id))!);
    fake.apply([
      {
        map: 'traffic',
        op: 'update',
        key: L.encodeU32(id),
        value: L.encodeTrafficValue({ conns: old.conns + conns, bytes: old.bytes + bytes }),
      },
    ]);
  };
  return { fake, planner, plan, sync, counted, count };
}

test('the driver sets CFG_TRAFFIC only when asked to count', () => {
  const cfgFlags = (r: EbpfPlanner) => {
    const f = new Fake();
    f.apply(r.plan({ state: state({ a: 1 }) }).ops);
    return L.decodeCfgValue(f.lookup('cfg', L.encodeU32(0))!).flags;
  };
  assert.equal(cfgFlags(new EbpfPlanner(CONFIG, { trafficCounters: true })) & L.CFG_TRAFFIC, L.CFG_TRAFFIC);
  assert.equal(cfgFlags(new EbpfPlanner(CONFIG)) & L.CFG_TRAFFIC, 0);
});

test('the first N service ports in key order get a zeroed entry; the rest are untracked and have none', () => {
  const n = node(2);
  n.sync(state({ c: 1, a: 1, b: 1, d: 1 }));
  assert.deepEqual(n.counted(), { 'default/a:http': '0/0', 'default/b:http': '0/0' });
  assert.equal(n.plan.untracked, 2);
  assert.equal(n.fake.size('traffic'), 2);
  assert.match(n.fake.print(['traffic', 'cfg']), /kpt_traffic:\n {2}svc \d+ => conns 0 bytes 0/);
  assert.match(n.fake.print(['cfg']), /enabled\|detect-cidr\|traffic/);
});

test('syncs that keep the selection write nothing, so counts survive partial syncs', () => {
  const n = node(2);
  n.sync(state({ a: 1, b: 1, c: 1 }));
  n.count('default/a:http', 3n, 300n);
  assert.deepEqual(n.sync(state({ a: 2, b: 1, c: 1 }, ['a'])), [], 'an endpoint added');
  assert.deepEqual(n.sync(state({ a: 2, b: 1, c: 1, d: 1 }, ['d'])), [], 'a Service past the cap added');
  assert.deepEqual(n.sync({ ...state({ a: 2, b: 1, c: 1, d: 1 }), fullSync: true }), [], 'a full sync');
  assert.deepEqual(n.counted(), { 'default/a:http': '3/300', 'default/b:http': '0/0' });
  assert.equal(n.plan.untracked, 2);
});

test('a port that sorts in pushes the last one out; one that leaves and comes back starts at zero', () => {
  const n = node(2);
  n.sync(state({ b: 1, c: 1 }));
  n.count('default/b:http', 1n, 60n);
  n.count('default/c:http', 2n, 120n);
  const ops = n.sync(state({ a: 1, b: 1, c: 1 }, ['a']));
  assert.deepEqual(
    ops.map((o) => o.op),
    ['delete', 'update'],
  );
  assert.deepEqual(n.counted(), { 'default/a:http': '0/0', 'default/b:http': '1/60' });
  n.sync(state({ b: 1, c: 1 }, ['a']));
  assert.deepEqual(n.counted(), { 'default/b:http': '1/60', 'default/c:http': '0/0' }, 'c again, from zero');
});

test("an id handed to another port is recreated, so the new port never inherits the old one's counts", () => {
  const n = node(5);
  n.sync(state({ a: 1, b: 1 }));
  const idB = n.planner.idOf('default/b:http');
  n.count('default/b:http', 4n, 400n);
  n.sync(state({ a: 1, z: 1 }, ['b', 'z']));
  assert.equal(n.planner.idOf('default/z:http'), idB, 'the driver reuses the freed id');
  assert.deepEqual(n.counted(), { 'default/a:http': '0/0', 'default/z:http': '0/0' });
});

test('after a restart the counted ports keep their entries and counts (ids recovered from the maps)', () => {
  const n = node(2);
  n.sync(state({ a: 1, b: 1, c: 1 }));
  n.count('default/a:http', 7n, 700n);
  const planner = new EbpfPlanner(CONFIG, { trafficCounters: true });
  const plan = new TrafficCounterPlan('IPv4', 2);
  const live = liveEntries((m) => n.fake.dump(m));
  const r = planner.plan({ state: state({ a: 1, b: 1, c: 1 }), live });
  n.fake.apply(r.ops);
  const ids = n.fake.dump('traffic').map(([k]) => L.decodeU32(k));
  assert.deepEqual(
    plan.update(state({ a: 1, b: 1, c: 1 }), r.full, (k) => planner.idOf(k), ids),
    [],
  );
  const a = L.decodeTrafficValue(n.fake.lookup('traffic', L.encodeU32(planner.idOf('default/a:http')!))!);
  assert.deepEqual(a, { conns: 7n, bytes: 700n });
  // A smaller cap after the restart drops the entries past it.
  const smaller = new TrafficCounterPlan('IPv4', 1);
  const ops = smaller.update(state({ a: 1, b: 1, c: 1 }), true, (k) => planner.idOf(k), ids);
  assert.deepEqual(
    ops.map((o) => [o.op, L.decodeU32(o.key)]),
    [['delete', planner.idOf('default/b:http')]],
  );
});

test('SCTP ports count against the cap but get no entry (the programs do not translate SCTP)', () => {
  const n = node(2);
  n.sync(state({ a: 1, sctp1: 1, x: 1 }));
  assert.deepEqual(n.counted(), { 'default/a:http': '0/0' });
  assert.equal(n.plan.untracked, 1);
});

test('clearOps deletes only the family of the datapath that stopped counting; a huge N counts every port', () => {
  const v6 = L.ID_RANGE.IPv6[0] + 5;
  const ops = TrafficCounterPlan.clearOps('IPv4', [3, v6, 9]);
  assert.deepEqual(
    ops.map((o) => L.decodeU32(o.key)),
    [3, 9],
  );
  // A huge N still fits the map: both families' entries together stay within its 65536.
  const big = new TrafficCounterPlan('IPv4', 10 ** 9);
  const many = state(Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`s${i}`, 1])));
  const r = new EbpfPlanner(CONFIG, { trafficCounters: true });
  r.plan({ state: many });
  assert.equal(big.update(many, true, (k) => r.idOf(k), []).length, 40);
});
