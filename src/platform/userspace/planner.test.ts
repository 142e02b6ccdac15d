// When the userspace planner replaces the table and what it adopts first: the first plan, a
// full plan without the drift watch, and the plan after failed(); else elements only.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { SyncState } from '../../core/types.js';
import { listenerKey } from '../../dataplane/userspace/plan.js';
import { service, slice } from '../../../test/cases/fixtures.js';
import { UNIT_CONFIG } from '../../../test/dataplane/userspace-fixtures.js';
import { UserspacePlanner } from './planner.js';

const CFG = UNIT_CONFIG;
const LA = listenerKey('ns1/a:p', 'TCP', 'cluster');

const state = (eps: string[], full = true): SyncState =>
  syncStateFromObjects({
    services: [service('a', { clusterIP: '172.30.0.41' }, [{ name: 'p', port: 80 }])],
    slices: [
      slice(
        'a',
        [{ name: 'p', port: 8080 }],
        eps.map((ip) => ({ ip })),
      ),
    ],
    family: 'IPv4',
    ...(full ? {} : { fullSync: false, changedServices: ['ns1/a'] }),
  });

describe('UserspacePlanner', () => {
  it('replaces the table first, then writes elements only, also on full syncs when drift is watched', () => {
    const p = new UserspacePlanner(CFG);
    const first = p.plan(state(['10.180.0.1']), () => [], true);
    assert.deepEqual([first.full, first.write], [true, 'replace']);
    assert.deepEqual(
      first.work.open.map((l) => l.key),
      [LA],
    );
    const again = p.plan(state(['10.180.0.1']), () => [], true);
    assert.deepEqual(
      [again.full, again.write, again.work.open.length, again.work.portals.length],
      [true, 'elements', 0, 0],
    );
    const moved = p.plan(state(['10.180.0.2'], false), () => [], true);
    assert.deepEqual([moved.full, moved.write], [false, 'elements']);
    assert.deepEqual(
      moved.work.update.map((l) => l.key),
      [LA],
    );
  });

  it('without the drift watch every full sync replaces the table, adopting the listeners held', () => {
    const p = new UserspacePlanner(CFG);
    const first = p.plan(state(['10.180.0.1']), () => [], false);
    const held = first.work.open[0]!;
    const again = p.plan(state(['10.180.0.1']), () => [{ kind: 'listener', key: LA, value: held }], false);
    assert.equal(again.write, 'replace');
    assert.deepEqual([again.work.open.length, again.work.update.length, again.work.close.length], [0, 0, 0]);
    assert.equal(again.work.portals.length, 1, 'every portal is written again');
    assert.equal(p.plan(state(['10.180.0.1'], false), () => [], false).write, 'elements');
  });

  it('after failed(), the next plan adopts what is held and replaces, even for a partial state', () => {
    const p = new UserspacePlanner(CFG);
    p.plan(state(['10.180.0.1']), () => [], true);
    p.failed();
    const stale = p.plan(
      state(['10.180.0.2'], false),
      () => [{ kind: 'listener', key: 'gone/x:p/TCP/cluster', value: null }],
      true,
    );
    assert.deepEqual([stale.full, stale.write], [true, 'replace']);
    assert.deepEqual(stale.work.close, ['gone/x:p/TCP/cluster']);
    assert.deepEqual(
      stale.work.open.map((l) => l.key),
      [LA],
    );
  });
});
