// EbpfPlanner's packed cold start, without a kernel: a plan asked for
// `packed` hands over the reconciler's puts exactly when every write is a
// put, and those are the writes the per-entry plan gives (the kernel side,
// BPF_MAP_UPDATE_BATCH read back, is test/e2e/ebpf-coldsync.test.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Fake } from '../../dataplane/ebpf/fake.js';
import { liveEntries, toMapOps } from '../../dataplane/ebpf/driver.js';
import * as L from '../../dataplane/ebpf/layout.js';
import { PACKET_FLOW_SCENARIOS } from '../../../test/cases/packetflow.js';
import { scenarioConfig, scenarioSyncState } from '../../../test/cases/resolve.js';
import { EbpfPlanner } from './planner.js';

const emptyLive = () =>
  new Map(L.MAP_NAMES.filter((m) => L.MAPS[m].rendered).map((m) => [m, new Map<string, string>()]));

test('a packed cold start puts what the per-entry plan writes, for every packet-flow scenario', () => {
  let n = 0;
  for (const s of PACKET_FLOW_SCENARIOS) {
    const state = scenarioSyncState(s);
    const config = scenarioConfig(s, 'ebpf');
    const packed = new EbpfPlanner(config, { maglevM: 251 }).plan({ state, live: emptyLive(), packed: true });
    const perEntry = new EbpfPlanner(config, { maglevM: 251 }).plan({ state });
    assert.ok(packed.puts, s.name);
    assert.deepEqual(packed.ops, [], s.name);
    assert.deepEqual(toMapOps(packed.puts), perEntry.ops, s.name);
    assert.deepEqual(packed.counters, perEntry.counters, s.name);
    n += packed.puts.length;
  }
  assert.ok(n > 0);
});

test('an array slot in the live maps (always there) still makes a cold start', () => {
  const s = PACKET_FLOW_SCENARIOS[0]!;
  const live = emptyLive();
  live.get('cfg')!.set(L.keyOf(L.encodeU32(0)), L.valueText(L.encodeCfgValue({ mark: 0, flags: 0, netnsCookie: 0n })));
  const r = new EbpfPlanner(scenarioConfig(s, 'ebpf'), { maglevM: 251 }).plan({
    state: scenarioSyncState(s),
    live,
    packed: true,
  });
  assert.ok(r.puts && r.puts.some((p) => p.kind === 'cfg'));
});

test('a restart over filled maps, or a plan that deletes, stays MapOps; so does one not asking for packed', () => {
  const s = PACKET_FLOW_SCENARIOS.find((x) => x.name === 'ClusterIPGeneral')!;
  const config = scenarioConfig(s, 'ebpf');
  const state = scenarioSyncState(s);
  const first = new EbpfPlanner(config, { maglevM: 251 });
  const fake = new Fake({ maglevM: 251 });
  fake.apply(first.plan({ state }).ops);
  const live = liveEntries((m) => fake.dump(m));
  // A restarted proxy over what it wrote: nothing to write, nothing handed over as puts.
  const restarted = new EbpfPlanner(config, { maglevM: 251 }).plan({ state, live, packed: true });
  assert.equal(restarted.puts, undefined);
  assert.deepEqual(restarted.ops, []);
  // The same maps with every Service gone: deletes, so MapOps.
  const empty = { ...state, services: new Map(), endpoints: new Map(), categorized: new Map() };
  const gone = new EbpfPlanner(config, { maglevM: 251 }).plan({ state: empty, live, packed: true });
  assert.equal(gone.puts, undefined);
  assert.ok(gone.ops.some((o) => o.op === 'delete'));
  // Without `packed`, a cold start is MapOps as before.
  assert.equal(new EbpfPlanner(config, { maglevM: 251 }).plan({ state }).puts, undefined);
});
