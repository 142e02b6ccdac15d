import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EarlyStart } from './earlystart.js';
import { Proxier } from './proxier.js';
import type { ProxierObserver, SyncReport } from './observer.js';
import type { Dataplane, IPFamily, SyncOutcome, SyncState } from '../core/types.js';
import { FakeClock } from '../../test/support/fakeclock.js';
import {
  TEST_NODE,
  endpoint,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
} from '../../test/support/fixtures.js';

const svc = (name: string, ip: string) =>
  makeService('ns1', name, (s) => {
    withClusterIP(s, ip);
    s.spec.ports = [svcPort('p80', 80)];
  });
const slice = (name: string, ips: string[]) =>
  makeSlice('ns1', name, 1, (s) => {
    s.ports = [slicePort('p80', 80)];
    s.endpoints = ips.map((ip) => endpoint(ip, { nodeName: TEST_NODE }));
  });

test('EarlyStart parks a Service until its first slice, passes later changes through, and gives back the rest', () => {
  const e = new EarlyStart({ startedAt: 0, afterMs: 1000 });
  const a = svc('a', '172.30.0.1');
  const b = svc('b', '172.30.0.2');
  assert.equal(e.service(null, a), null, 'no slice of a yet: parked');
  assert.equal(e.parkedCount(), 1);
  assert.equal(e.slice(slice('a', ['10.0.0.1'])), a, 'its first slice releases it');
  const a2 = svc('a', '172.30.0.1');
  assert.deepEqual(e.service(a, a2), { prev: a, cur: a2 }, 'released: changes pass as they are');
  assert.equal(e.slice(slice('b', ['10.0.0.2'])), null, 'a slice before its Service: nothing parked');
  assert.deepEqual(e.service(null, b), { prev: null, cur: b }, 'its slice was seen: passes at once');
  const c = svc('c', '172.30.0.3');
  const c2 = svc('c', '172.30.0.4');
  assert.equal(e.service(null, c), null);
  assert.equal(e.service(c, c2), null, 'an update of a parked Service replaces it');
  const d = svc('d', '172.30.0.5');
  assert.equal(e.service(null, d), null);
  assert.equal(e.service(d, null), null, 'a parked Service deleted: the trackers never hear of it');
  assert.equal(e.ready(5000), false, 'not before the datapaths said they are empty');
  assert.deepEqual(e.datapathsEmpty(true), []);
  assert.equal(e.ready(999), false);
  assert.equal(e.ready(1000), true);
  assert.deepEqual(e.finish(), [c2], 'what is parked at the end joins then');
  assert.equal(e.active(), false);
  assert.equal(e.ready(5000), false);
});

test('EarlyStart: datapaths that are not empty end it at once, giving back what is parked', () => {
  const e = new EarlyStart({ startedAt: 0, afterMs: 0 });
  const a = svc('a', '172.30.0.1');
  e.service(null, a);
  assert.deepEqual(e.datapathsEmpty(false), [a]);
  assert.equal(e.active(), false);
  assert.equal(e.ready(10), false);
});

/** Records what it is given; says whether it started empty. */
class Recording implements Dataplane {
  readonly mode = 'nftables' as const;
  states: SyncState[] = [];
  constructor(
    readonly family: IPFamily,
    private readonly empty: boolean | undefined,
  ) {
    if (empty === undefined) (this as { startsEmpty?: unknown }).startsEmpty = undefined;
  }
  async startsEmpty(): Promise<boolean> {
    return this.empty!;
  }
  async sync(state: SyncState): Promise<SyncOutcome> {
    // What the state holds now: its maps are the live snapshot's and change with later syncs.
    this.states.push({
      ...state,
      services: new Map(state.services),
      endpoints: new Map(state.endpoints),
      changedServicePorts: new Set(state.changedServicePorts ?? []),
    });
    return { partial: !state.fullSync };
  }
  async cleanup(): Promise<void> {}
}

function observer(): ProxierObserver & { succeeded: SyncReport[]; events: string[] } {
  const succeeded: SyncReport[] = [];
  const events: string[] = [];
  return {
    succeeded,
    events,
    queuedUpdate() {},
    syncSucceeded: (r) => void succeeded.push(r),
    syncFailed() {},
    pendingChanges() {},
    changeRecorded() {},
    networkProgrammingLatency() {},
    inputSkipped() {},
    event: (_l, _f, msg) => void events.push(msg),
    driftDetected() {},
    datapathRepaired() {},
  };
}

async function setup(empties: Array<boolean | undefined>, earlySyncAfterMs: number | undefined) {
  const clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
  const obs = observer();
  const families: IPFamily[] = ['IPv4', 'IPv6'];
  const dps = empties.map((e, i) => new Recording(families[i]!, e));
  let requests = 0;
  const proxier = new Proxier({
    nodeName: TEST_NODE,
    dataplanes: dps,
    clock,
    observer: obs,
    requestSync: () => void requests++,
    ...(earlySyncAfterMs !== undefined ? { earlySyncAfterMs } : {}),
  });
  await new Promise((r) => setImmediate(r)); // the datapaths' answer to startsEmpty
  return { clock, obs, dps, dp: dps[0]!, proxier, requests: () => requests };
}

/** Six more Services with an endpoint each, so that the first early sync programs eight. */
const MORE = [0, 1, 2, 3, 4, 5].map((i) => [`f${i}`, `172.30.1.${i + 1}`, `10.0.1.${i + 1}`] as const);

test('an empty datapath gets the Services seen so far once the lists have come in for a while', async () => {
  const t = await setup([true], 1000);
  t.proxier.onServiceAdd(svc('a', '172.30.0.1'));
  t.proxier.onEndpointSliceAdd(slice('a', ['10.0.0.1']));
  assert.equal(t.requests(), 0, 'too early: a small cluster never sees an early sync');
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.states.length, 0);

  t.clock.advance(1000);
  t.proxier.onServiceAdd(svc('b', '172.30.0.2')); // no slice yet: parked
  assert.equal(t.requests(), 0, 'a parked Service changes nothing the trackers see');
  t.proxier.onServiceAdd(svc('c', '172.30.0.3'));
  t.proxier.onEndpointSliceAdd(slice('c', ['10.0.0.3']));
  assert.ok(t.requests() > 0, 'early syncs are requested now');
  for (const [name, ip, ep] of MORE) {
    t.proxier.onServiceAdd(svc(name, ip));
    t.proxier.onEndpointSliceAdd(slice(name, [ep]));
  }
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.states.length, 1);
  const first = t.dp.states[0]!;
  assert.equal(first.fullSync, true, 'the first early sync is the full one');
  assert.deepEqual(
    [...first.services.keys()].sort(),
    ['ns1/a:p80', 'ns1/c:p80', ...MORE.map(([n]) => `ns1/${n}:p80`)],
    'b waits for its endpoints',
  );
  assert.equal(t.obs.succeeded.length, 0, 'health and sync metrics wait for the lists');
  assert.ok(t.obs.events.some((m) => m.startsWith('Programmed the Services seen so far')));

  const asked = t.requests();
  t.proxier.onEndpointSliceAdd(slice('b', ['10.0.0.2']));
  assert.equal(t.requests(), asked, 'one new Service beside eight programmed: not worth a sync yet');
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.states.length, 1);
  t.proxier.onServiceAdd(svc('e', '172.30.0.5'));
  t.proxier.onEndpointSliceAdd(slice('e', ['10.0.0.5']));
  assert.ok(t.requests() > asked, 'a quarter of what is programmed came in: the next early sync');
  await t.proxier.syncProxyRules();
  const second = t.dp.states[1]!;
  assert.equal(second.fullSync, false);
  assert.deepEqual([...second.changedServicePorts!].sort(), ['ns1/b:p80', 'ns1/e:p80'], 'b joined with its slice');
  assert.equal(second.endpoints.get('ns1/b:p80')!.length, 1);

  t.proxier.onServiceAdd(svc('d', '172.30.0.4')); // no endpoints at all: joins when the lists are in
  t.proxier.onServiceSynced();
  t.proxier.onEndpointSliceSynced();
  await t.proxier.syncProxyRules();
  const regular = t.dp.states[2]!;
  assert.equal(regular.fullSync, false, 'the first sync after the lists writes only what came since');
  assert.deepEqual([...regular.changedServicePorts!], ['ns1/d:p80']);
  assert.equal(regular.services.size, 11);
  assert.equal(t.obs.succeeded.length, 1, 'that sync is the first the observer (health) hears of');
  assert.equal(t.obs.succeeded[0]!.partial, true);

  // The same objects without early syncs: the same state in the end.
  const plain = await setup([true], undefined);
  for (const [name, ip] of [
    ['a', '172.30.0.1'],
    ['b', '172.30.0.2'],
    ['c', '172.30.0.3'],
    ['d', '172.30.0.4'],
    ['e', '172.30.0.5'],
    ...MORE,
  ] as const)
    plain.proxier.onServiceAdd(svc(name, ip));
  for (const [name, ip] of [
    ['a', '10.0.0.1'],
    ['c', '10.0.0.3'],
    ['b', '10.0.0.2'],
    ['e', '10.0.0.5'],
    ...MORE.map(([n, , ep]) => [n, ep] as const),
  ] as const)
    plain.proxier.onEndpointSliceAdd(slice(name, [ip]));
  plain.proxier.onServiceSynced();
  plain.proxier.onEndpointSliceSynced();
  await plain.proxier.syncProxyRules();
  const want = plain.dp.states[0]!;
  assert.deepEqual(
    [...regular.services.entries()].sort(),
    [...want.services.entries()].sort(),
    'same service ports as without early syncs',
  );
  assert.deepEqual([...regular.endpoints.entries()].sort(), [...want.endpoints.entries()].sort());
});

test('no early sync where a datapath holds an earlier run, or cannot say', async () => {
  for (const empties of [[false], [undefined], [true, false]] as Array<Array<boolean | undefined>>) {
    const t = await setup(empties, 0);
    t.proxier.onServiceAdd(svc('a', '172.30.0.1'));
    t.proxier.onEndpointSliceAdd(slice('a', ['10.0.0.1']));
    t.proxier.onServiceAdd(svc('b', '172.30.0.2'));
    t.clock.advance(5000);
    await t.proxier.syncProxyRules();
    assert.equal(t.dp.states.length, 0, `${JSON.stringify(empties)}: nothing before the lists`);
    t.proxier.onServiceSynced();
    t.proxier.onEndpointSliceSynced();
    await t.proxier.syncProxyRules();
    assert.equal(t.dp.states[0]!.fullSync, true);
    assert.equal(t.dp.states[0]!.services.size, 2, 'nothing stays parked');
  }
});
