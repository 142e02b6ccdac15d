// Hostile input, fuzzed (fast-check; seeded and bounded so the unit stage
// stays fast: KPT_FUZZ_SEED / KPT_FUZZ_RUNS change them). Generated bad
// Services, EndpointSlices and Nodes (test/fuzz/hostile.ts) go through the
// path the API objects take in the proxy: the informer transform
// (src/platform/k8s/transform.ts), the Proxier's handlers (intake, change
// trackers) and its syncs, rendered by every mode's renderer (iptables,
// nftables in each layout, ipvs, ebpf, userspace) at every sync. Required:
//   - no exception escapes: not from a handler, not from a sync, not from a
//     renderer; and none is even caught inside the intake ("intake error");
//   - every valid Service is served exactly as without the bad objects: the
//     same ServicePorts and endpoints in the SyncState, and the same answer
//     for each of its flows traced through every mode's Fake;
//   - every skip is logged once (no repeat of a kind/key/reason within one
//     handler call) and counted (kubeproxy_ts_input_skipped_total == lines);
//     an object with a certainly-invalid field is reported.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import type { EndpointSlice, Node, Service } from '../../src/core/api.js';
import type { Dataplane, IPFamily, SyncOutcome, SyncState } from '../../src/core/types.js';
import { Proxier } from '../../src/engine/proxier.js';
import type { ProxierObserver } from '../../src/engine/observer.js';
import { nullObserver } from '../../src/engine/observer.js';
import { createLogger, loggingObserver, teeObservers } from '../../src/platform/logger.js';
import { ProxyMetrics } from '../../src/platform/metrics.js';
import { transformEndpointSlice, transformNode, transformService } from '../../src/platform/k8s/transform.js';
import { FakeClock } from '../support/fakeclock.js';
import { TEST_NODE_NAME } from '../cases/fixtures.js';
import {
  describeHostile,
  hostileAny,
  hostileOwnNode,
  validNode,
  validServices,
  validSlices,
  VALID_FLOWS,
  type Hostile,
} from './hostile.js';
import { MODES, renderFlows, type ModeRender } from './modes.js';

const SEED = Number(process.env['KPT_FUZZ_SEED'] ?? 20261202);
const RUNS = Number(process.env['KPT_FUZZ_RUNS'] ?? 20);
const FAMILIES: IPFamily[] = ['IPv4', 'IPv6'];
const VALID_KEY = /^valid\/[a-f]:/;

type Skip = { call: number; kind: string; key: string; reason: string };

/** Renders every state in every mode as it is synced (the exceptions are the test's business). */
class RenderingDataplane implements Dataplane {
  readonly mode = 'iptables' as const;
  last: SyncState | null = null;
  private readonly modes: ModeRender[];
  constructor(readonly family: IPFamily) {
    this.modes = MODES.map((m) => m.start(family));
  }
  async sync(state: SyncState): Promise<SyncOutcome> {
    for (const m of this.modes) m.sync(state);
    this.last = state;
    return { partial: !state.fullSync };
  }
  async cleanup(): Promise<void> {}
}

interface Run {
  readonly proxier: Proxier;
  readonly dataplanes: RenderingDataplane[];
  readonly skips: Skip[];
  readonly logLines: string[];
  readonly metrics: ProxyMetrics;
  readonly syncFailures: unknown[];
  /** The call number of each hostile object's add. */
  readonly addCalls: number[];
  call: number;
}

function startRun(): Run {
  const skips: Skip[] = [];
  const logLines: string[] = [];
  const syncFailures: unknown[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n')) if (l.includes('skipping invalid object')) logLines.push(l);
      cb();
    },
  });
  const metrics = new ProxyMetrics({ defaultMetrics: false });
  const run: Run = {
    proxier: null as never,
    dataplanes: [],
    skips,
    logLines,
    metrics,
    syncFailures,
    addCalls: [],
    call: 0,
  };
  const recording: ProxierObserver = {
    ...nullObserver,
    inputSkipped: (kind, key, reason) => skips.push({ call: run.call, kind, key, reason }),
    syncFailed: (_f, err) => syncFailures.push(err),
  };
  const log = createLogger({ destination: sink, verbosity: 0 });
  const dataplanes = FAMILIES.map((f) => new RenderingDataplane(f));
  const proxier = new Proxier({
    nodeName: TEST_NODE_NAME,
    dataplanes,
    clock: new FakeClock(Date.parse('2026-12-02T00:00:00Z')),
    observer: teeObservers(recording, loggingObserver(log), metrics),
    requestSync: () => {},
  });
  return Object.assign(run, { proxier, dataplanes });
}

/** One object through the transform and the matching handler, as one numbered call. */
function feed(run: Run, kind: Hostile['kind'], obj: unknown, op: 'add' | 'delete' = 'add'): void {
  run.call++;
  const p = run.proxier;
  if (kind === 'service') {
    const s = transformService(obj as Record<string, unknown>) as unknown as Service;
    if (op === 'add') p.onServiceAdd(s);
    else p.onServiceDelete(s);
  } else if (kind === 'endpointslice') {
    const s = transformEndpointSlice(obj as Record<string, unknown>) as unknown as EndpointSlice;
    if (op === 'add') p.onEndpointSliceAdd(s);
    else p.onEndpointSliceDelete(s);
  } else {
    const n = transformNode(obj as Record<string, unknown>) as unknown as Node;
    if (op === 'add') p.onNodeAdd(n);
    else p.onNodeDelete(n);
  }
}

/** The valid cluster, with `hostile` interleaved (and some of it deleted again), synced along the way. */
async function runCluster(
  hostile: readonly Hostile[],
  positions: readonly number[],
  deletes: readonly boolean[],
): Promise<Run> {
  const run = startRun();
  feed(run, 'node', validNode());
  const valid: Array<[Hostile['kind'], unknown]> = [
    ...validServices().map((s) => ['service', s] as [Hostile['kind'], unknown]),
    ...validSlices().map((s) => ['endpointslice', s] as [Hostile['kind'], unknown]),
  ];
  const slots: Array<Array<() => void>> = Array.from({ length: valid.length + 1 }, () => []);
  hostile.forEach((h, i) => {
    const at = positions[i]! % slots.length;
    slots[at]!.push(() => {
      feed(run, h.kind, h.obj);
      run.addCalls[i] = run.call;
    });
    if (deletes[i]) slots[Math.min(slots.length - 1, at + 1)]!.push(() => feed(run, h.kind, h.obj, 'delete'));
  });
  for (let i = 0; i < slots.length; i++) {
    for (const f of slots[i]!) f();
    if (i < valid.length) feed(run, valid[i]![0], valid[i]![1]);
    if (i === 2) {
      run.proxier.onServiceSynced();
      run.proxier.onEndpointSliceSynced();
    }
    if (i % 3 === 2) await run.proxier.syncProxyRules();
  }
  await run.proxier.syncProxyRules();
  return run;
}

/** What a valid Service is, per family: its ServicePorts, endpoints and categories in the last SyncState. */
function validView(run: Run): unknown {
  return run.dataplanes.map((dp) => {
    const st = dp.last;
    assert.ok(st, `no sync of ${dp.family}`);
    const pick = <V>(m: ReadonlyMap<string, V>) => [...m].filter(([k]) => VALID_KEY.test(k)).sort();
    return {
      services: pick(st.services),
      endpoints: pick(st.endpoints),
      categorized: pick(st.categorized),
      node: st.node,
    };
  });
}

let baseline: { view: unknown; flows: Map<string, string> } | null = null;
async function baselineOf(): Promise<{ view: unknown; flows: Map<string, string> }> {
  if (!baseline) {
    const run = await runCluster([], [], []);
    assert.deepEqual(run.skips, [], 'the valid cluster is valid');
    baseline = { view: validView(run), flows: renderFlows(run.dataplanes.map((d) => d.last!)) };
    // The flows must mean something: every valid flow with endpoints reaches one in every mode.
    for (const [k, out] of baseline.flows) if (!k.includes('no endpoints')) assert.notEqual(out, '', k);
  }
  return baseline;
}

/**
 * fc.assert, but the failure names the counterexample briefly (its objects
 * carry 1 MiB strings) together with the seed and path that replay it.
 */
async function check<T extends unknown[]>(
  prop: fc.IAsyncPropertyWithHooks<T>,
  numRuns: number,
  describe: (first: T[0]) => string,
): Promise<void> {
  const out = await fc.check(prop, { seed: SEED, numRuns });
  if (!out.failed) return;
  const err = out.errorInstance instanceof Error ? out.errorInstance.message : String(out.errorInstance);
  const example = out.counterexample ? describe(out.counterexample[0]) : '(none)';
  throw new Error(
    `${err.slice(0, 3000)}\ncounterexample after ${out.numShrinks} shrinks ` +
      `(replay: KPT_FUZZ_SEED=${SEED}, path ${out.counterexamplePath}):\n${example.slice(0, 3000)}`,
  );
}

function assertLoggedOnceAndCounted(run: Run, hostile: readonly Hostile[]): void {
  const seen = new Set<string>();
  for (const s of run.skips) {
    const id = `${s.call}\0${s.kind}\0${s.key}\0${s.reason}`;
    assert.ok(!seen.has(id), `skip reported twice in one call: ${JSON.stringify(s).slice(0, 300)}`);
    seen.add(id);
    assert.ok(!s.reason.startsWith('intake error'), `an exception inside the intake: ${s.reason.slice(0, 500)}`);
  }
  assert.equal(run.logLines.length, run.skips.length, 'each skip is one log line');
  const counted = run.metrics.inputSkippedTotal as unknown as { hashMap: Record<string, { value: number }> };
  const total = Object.values(counted.hashMap).reduce((n, v) => n + v.value, 0);
  assert.equal(total, run.skips.length, 'each skip is counted');
  // A log line stays readable: a 1 MiB field is not copied into it.
  for (const l of run.logLines) assert.ok(l.length < 4096, `log line of ${l.length} bytes: ${l.slice(0, 300)}`);
  // Objects with a certainly-invalid field were reported when they were added (call numbers follow feed order).
  const reportedCalls = new Set(run.skips.map((s) => s.call));
  hostile.forEach((h, i) => {
    if (h.mustReport)
      assert.ok(
        reportedCalls.has(run.addCalls[i]!),
        `not reported: ${describeHostile(h)}: ${JSON.stringify(h.obj).slice(0, 800)}`,
      );
  });
}

test('fuzz: hostile Services, EndpointSlices and Nodes never change how valid Services are served, in any mode', async () => {
  const base = await baselineOf();
  let objects = 0;
  let skips = 0;
  const t0 = performance.now();
  await check(
    fc.asyncProperty(
      fc.array(hostileAny, { minLength: 1, maxLength: 12 }),
      fc.array(fc.nat(40), { minLength: 12, maxLength: 12 }),
      fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
      async (hostile, positions, deletes) => {
        const run = await runCluster(hostile, positions, deletes);
        objects += hostile.length;
        skips += run.skips.length;
        assert.deepEqual(run.syncFailures, [], 'no sync failed');
        assertLoggedOnceAndCounted(run, hostile);
        assert.deepEqual(validView(run), base.view, 'valid Services in the SyncState');
        const flows = renderFlows(run.dataplanes.map((d) => d.last!));
        assert.deepEqual(Object.fromEntries(flows), Object.fromEntries(base.flows), 'valid flows in every mode');
      },
    ),
    RUNS,
    (hostile) => hostile.map(describeHostile).join('\n'),
  );
  console.log(
    `fuzz: ${RUNS} runs, ${objects} hostile objects, ${skips} skips logged and counted, ` +
      `${VALID_FLOWS.length} valid flows x ${MODES.length} modes compared per run, ${Math.round(performance.now() - t0)} ms (seed ${SEED})`,
  );
});

test("fuzz: a hostile update of the proxy's own Node never throws, and what is invalid in it is logged and counted", async () => {
  await check(
    fc.asyncProperty(hostileOwnNode, async (h) => {
      const run = await runCluster([], [], []);
      feed(run, 'node', h.obj);
      const call = run.call;
      await run.proxier.syncProxyRules();
      assert.deepEqual(run.syncFailures, [], 'no sync failed');
      assertLoggedOnceAndCounted(run, []);
      if (h.mustReport)
        assert.ok(
          run.skips.some((s) => s.call === call && s.kind === 'node'),
          describeHostile(h),
        );
    }),
    Math.max(10, Math.round(RUNS / 2)),
    describeHostile,
  );
});
