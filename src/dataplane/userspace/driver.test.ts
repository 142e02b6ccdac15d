// The userspace driver with the one reconciler: what each Service owns, the
// order of the operations, the partial transactions, and that a full sync's
// transaction is the whole table renderRules writes for the same state.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { SyncState } from '../../core/types.js';
import { Reconciler } from '../../engine/reconciler.js';
import { NODE_IP, service, slice } from '../../../test/cases/fixtures.js';
import { PACKET_FLOW_SCENARIOS } from '../../../test/cases/packetflow.js';
import { UNIT_CONFIG } from '../../../test/dataplane/userspace-fixtures.js';
import { scenarioConfig, scenarioSyncState } from '../../../test/cases/resolve.js';
import {
  desiredObjects,
  listenerWork,
  portalTransaction,
  UserspaceDriver,
  type UserspaceKind,
  type UserspaceOp,
  type UserspaceValue,
} from './driver.js';
import { listenerKey, planUserspace } from './plan.js';
import { renderRules } from './rules.js';

const CFG = UNIT_CONFIG;
const LA = listenerKey('ns1/a:p', 'TCP', 'cluster');

/** Service a (ClusterIP 172.30.0.41, NodePort 30080, externalIP 192.168.99.11) with these endpoints; b without any. */
function state(eps: string[], opts: { changed?: string[]; withB?: boolean; bExternal?: boolean } = {}): SyncState {
  const services = [
    service('a', { clusterIP: '172.30.0.41', type: 'NodePort', externalIPs: ['192.168.99.11'] }, [
      { name: 'p', port: 80, nodePort: 30080 },
    ]),
  ];
  if (opts.withB !== false)
    services.push(
      service('b', { clusterIP: '172.30.0.42', ...(opts.bExternal ? { externalIPs: ['192.168.99.11'] } : {}) }, [
        { name: 'p', port: 80 },
      ]),
    );
  return syncStateFromObjects({
    services,
    slices: eps.length
      ? [
          slice(
            'a',
            [{ name: 'p', port: 8080 }],
            eps.map((ip) => ({ ip })),
          ),
        ]
      : [],
    family: 'IPv4',
    nodeIPs: { IPv4: NODE_IP },
    ...(opts.changed ? { fullSync: false, changedServices: opts.changed } : {}),
  });
}

const show = (ops: readonly UserspaceOp[]) =>
  ops.map((op) => `${op.op} ${op.kind} ${op.key}${op.op === 'put' && op.before !== undefined ? ' (changed)' : ''}`);
const ports = new Map([[LA, 40001]]);
const port = (k: string) => ports.get(k);

function reconciler() {
  return new Reconciler<UserspaceKind, UserspaceValue>(new UserspaceDriver(CFG).spec);
}

describe('userspace driver', () => {
  it('each Service owns its listeners and portals; a partial sync asks only for the changed ones', () => {
    const full = desiredObjects(state(['10.180.0.1']), true);
    assert.deepEqual(
      full.owners.map(([owner, objs]) => [owner, objs.map((o) => `${o.kind} ${o.key}`)]),
      [
        [
          'ns1/a',
          [`listener ${LA}`, 'portal 172.30.0.41 . tcp . 80', 'portal 192.168.99.11 . tcp . 80', 'portal tcp . 30080'],
        ],
        ['ns1/b', ['portal 172.30.0.42 . tcp . 80']],
      ],
    );
    const partial = desiredObjects(state(['10.180.0.1'], { changed: ['ns1/b', 'ns1/gone'] }), false);
    assert.deepEqual(
      partial.owners.map(([owner, objs]) => [owner, objs.length]),
      [
        ['ns1/b', 1],
        ['ns1/gone', 0],
      ],
    );
  });

  it('listeners before portals; an endpoint change is a listener update only; removal deletes portals, then the listener', () => {
    const r = reconciler();
    assert.deepEqual(show(r.plan(desiredObjects(state(['10.180.0.1']), true).owners, true).ops), [
      `put listener ${LA}`,
      'put portal 172.30.0.41 . tcp . 80',
      'put portal 192.168.99.11 . tcp . 80',
      'put portal tcp . 30080',
      'put portal 172.30.0.42 . tcp . 80',
    ]);
    const moved = r.plan(desiredObjects(state(['10.180.0.2'], { changed: ['ns1/a'] }), false).owners, false);
    assert.deepEqual(show(moved.ops), [`put listener ${LA} (changed)`]);
    assert.deepEqual(
      listenerWork(moved.ops).update.map((l) => l.endpoints.map((e) => e.key)),
      [['10.180.0.2:8080']],
    );
    const none = r.plan(desiredObjects(state([], { changed: ['ns1/a'] }), false).owners, false);
    assert.deepEqual(show(none.ops), [
      'put portal 172.30.0.41 . tcp . 80 (changed)',
      'put portal 192.168.99.11 . tcp . 80 (changed)',
      'put portal tcp . 30080 (changed)',
      `delete listener ${LA}`,
    ]);
    assert.deepEqual(listenerWork(none.ops).close, [LA]);
  });

  it('a partial transaction moves a changed portal between maps and deletes a removed one', () => {
    const r = reconciler();
    r.plan(desiredObjects(state([]), true).owners, true);
    const back = r.plan(desiredObjects(state(['10.180.0.1'], { changed: ['ns1/a'] }), false).owners, false);
    const { tx, unserved } = portalTransaction(back.ops, port, CFG, 'elements');
    assert.deepEqual(unserved, []);
    assert.deepEqual(tx.toString().trimEnd().split('\n'), [
      'delete element ip kube-proxy-userspace no-endpoint-services { 172.30.0.41 . tcp . 80 }',
      'delete element ip kube-proxy-userspace no-endpoint-services { 192.168.99.11 . tcp . 80 }',
      'delete element ip kube-proxy-userspace no-endpoint-nodeports { tcp . 30080 }',
      'add element ip kube-proxy-userspace service-portals { 172.30.0.41 . tcp . 80 : 40001 }',
      'add element ip kube-proxy-userspace service-portals { 192.168.99.11 . tcp . 80 : 40001 }',
      'add element ip kube-proxy-userspace nodeport-portals { tcp . 30080 : 40001 }',
    ]);
    const gone = r.plan(
      desiredObjects(state(['10.180.0.1'], { changed: ['ns1/b'], withB: false }), false).owners,
      false,
    );
    assert.deepEqual(portalTransaction(gone.ops, port, CFG, 'elements').tx.toString().trimEnd().split('\n'), [
      'delete element ip kube-proxy-userspace no-endpoint-services { 172.30.0.42 . tcp . 80 }',
    ]);
  });

  it('a full sync over memory changes only the elements of what changed', () => {
    const r = reconciler();
    r.plan(desiredObjects(state(['10.180.0.1']), true).owners, true);
    const again = r.plan(desiredObjects(state(['10.180.0.1'], { withB: false }), true).owners, true);
    assert.deepEqual(portalTransaction(again.ops, port, CFG, 'elements').tx.toString().trimEnd().split('\n'), [
      'delete element ip kube-proxy-userspace no-endpoint-services { 172.30.0.42 . tcp . 80 }',
    ]);
  });

  it('a portal whose listener has no port is refused and reported unserved', () => {
    const r = reconciler();
    const plan = r.plan(desiredObjects(state(['10.180.0.1']), true).owners, true);
    const { tx, unserved } = portalTransaction(plan.ops, () => undefined, CFG, 'replace');
    assert.deepEqual(unserved, ['172.30.0.41 . tcp . 80', '192.168.99.11 . tcp . 80', 'tcp . 30080']);
    assert.match(tx.toString(), /no-endpoint-services \{ 172\.30\.0\.41 \. tcp \. 80 : goto reject-chain \}/);
  });

  it('an address two Services claim goes to the first in key order, also after the other changes', () => {
    const r = reconciler();
    const first = r.plan(desiredObjects(state(['10.180.0.1'], { bExternal: true }), true).owners, true);
    const tx = portalTransaction(first.ops, port, CFG, 'replace').tx.toString();
    assert.match(tx, /service-portals \{ 192\.168\.99\.11 \. tcp \. 80 : 40001 \}/);
    assert.doesNotMatch(tx, /no-endpoint-services \{ 192\.168\.99\.11 /);
    const again = r.plan(
      desiredObjects(state(['10.180.0.1'], { bExternal: true, changed: ['ns1/b'] }), false).owners,
      false,
    );
    assert.deepEqual(show(again.ops), []);
    const aGone = r.plan([['ns1/a', []]], false);
    assert.ok(show(aGone.ops).includes('put portal 192.168.99.11 . tcp . 80 (changed)'), 'b takes the address over');
    assert.match(
      portalTransaction(aGone.ops, port, CFG, 'elements').tx.toString(),
      /no-endpoint-services \{ 192\.168\.99\.11 /,
    );
  });

  it('a full sync writes exactly the whole table renderRules writes, for every packet-flow scenario', () => {
    for (const s of PACKET_FLOW_SCENARIOS) {
      const config = scenarioConfig(s, 'userspace');
      const st = scenarioSyncState(s);
      const driver = new UserspaceDriver(config);
      const ops = new Reconciler(driver.spec).plan(driver.desired(st, true), true).ops;
      const plan = planUserspace(st);
      const given = new Map([...plan.listeners.keys()].map((k, i) => [k, 40000 + i]));
      assert.deepEqual(
        listenerWork(ops).open.map((l) => l.key),
        [...plan.listeners.keys()],
        s.name,
      );
      assert.equal(
        driver.transaction(ops, (k) => given.get(k), 'replace').tx.toString(),
        renderRules(plan, given, config).toString(),
        s.name,
      );
    }
  });
});
