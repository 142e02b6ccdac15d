// A cold start written in batches (EbpfPlanner with `packed`, the runtime's
// writePuts: one BPF_MAP_UPDATE_BATCH per map, one update per entry for the
// LPM tries) against the real kernel: after it, every map the proxy renders
// holds exactly the entries that the per-entry path (the same plan as MapOps,
// applied to the Fake) leaves there, read back from the kernel; and the
// reconciler remembers them, so the partial syncs that follow (strict
// deletes included) apply cleanly and still match. Maps are loaded privately
// (nothing pinned, nothing attached, no namespace touched).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../src/core/types.js';
import { Fake } from '../../src/dataplane/ebpf/index.js';
import * as L from '../../src/dataplane/ebpf/layout.js';
import { EbpfPlanner } from '../../src/platform/ebpf/planner.js';
import { EbpfRuntime } from '../../src/platform/ebpf/runtime.js';
import {
  endpoint,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
  withLoadBalancerIngress,
  type TestService,
  type TestSlice,
} from '../support/fixtures.js';

const M = 251;
const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.1.0/24'] },
  nodePortAddresses: null,
  localhostNodePorts: false,
  localIPs: ['127.0.0.1', '10.0.1.1'],
};

/**
 * n Services with a mix of what the maps hold: NodePorts, two endpoints
 * with ClientIP affinity (membership entries), LoadBalancers with source
 * ranges (LPM entries), Maglev tables, local-policy ones, a UDP port, and
 * Services without endpoints. `more` endpoints for the first few (a change).
 */
function mixedState(n: number, more = 0, gone = 0): SyncState {
  const services: TestService[] = [];
  const slices: TestSlice[] = [];
  for (let i = gone; i < n; i++) {
    const name = `svc${i}`;
    const svc = withClusterIP(
      makeService('mix', name, (s) => {
        s.spec.ports = [svcPort('p80', 80, 'TCP', { targetPort: 8080 })];
        if (i % 9 === 0) s.spec.ports.push(svcPort('dns', 53, 'UDP'));
        if (i % 3 === 0) {
          s.spec.type = 'NodePort';
          s.spec.ports[0]!.nodePort = 30000 + i;
        }
        if (i % 5 === 0) s.spec.sessionAffinity = 'ClientIP';
        if (i % 7 === 0) {
          s.spec.type = 'LoadBalancer';
          s.spec.ports[0]!.nodePort = 31000 + i;
          s.spec.loadBalancerSourceRanges = ['203.0.113.0/25', `198.51.${i & 255}.0/24`];
          s.spec.externalTrafficPolicy = 'Local';
        }
        if (i % 11 === 0) s.metadata.annotations = { 'kube-proxy-ts/lb-algorithm': 'maglev' };
      }),
      `172.30.${i >> 8}.${i & 255}`,
    );
    if (i % 7 === 0) withLoadBalancerIngress(svc, `192.0.2.${i & 255}`);
    services.push(svc);
    if (i % 13 === 12) continue; // no endpoints
    const eps = [endpoint(`10.128.${i >> 8}.${i & 255}`, { nodeName: i % 2 ? 'n1' : 'n0', ready: true })];
    if (i % 5 === 0 || i % 11 === 0) eps.push(endpoint(`10.129.${i >> 8}.${i & 255}`, { nodeName: 'n0', ready: true }));
    if (i < more) eps.push(endpoint(`10.130.${i >> 8}.${i & 255}`, { nodeName: 'n2', ready: true }));
    slices.push(
      makeSlice('mix', name, 1, (s) => {
        s.endpoints = eps;
        s.ports = [slicePort('p80', 8080), ...(i % 9 === 0 ? [slicePort('dns', 53, 'UDP')] : [])];
      }),
    );
  }
  return syncStateFromObjects({
    services,
    slices,
    family: 'IPv4',
    nodeName: 'n0',
    serviceCIDRs: ['172.30.0.0/16'],
    // Every Service of the mix is changed, the removed ones included.
    changedServices: Array.from({ length: n }, (_, i) => `mix/svc${i}`),
  });
}

/** This family's entries of every rendered map, as a sorted list of hex key = hex value. */
function contents(read: (m: L.MapName) => Array<[Uint8Array, Uint8Array]>): Map<L.MapName, string[]> {
  const out = new Map<L.MapName, string[]>();
  for (const m of L.MAP_NAMES) {
    if (!L.MAPS[m].rendered) continue;
    const rows = read(m)
      .filter(([k, v]) => L.familyOfEntry(m, k) === 'IPv4' && !(m === 'cfg' && v.every((b) => b === 0)))
      .map(([k, v]) => `${L.hex(k)}=${L.hex(v)}`);
    out.set(m, rows.sort());
  }
  return out;
}

describe(
  'ebpf cold start written in batches (BPF_MAP_UPDATE_BATCH), read back from the kernel',
  { timeout: 120_000 },
  () => {
    let rt: EbpfRuntime;
    before(async () => {
      rt = await EbpfRuntime.open({ pinRoot: null, maglevM: M });
    });
    after(() => rt?.close());

    test('the maps hold exactly the entries of the per-entry path, and partial syncs follow', () => {
      const N = 300;
      const packed = new EbpfPlanner(CONFIG, { maglevM: M });
      const perEntry = new EbpfPlanner(CONFIG, { maglevM: M });
      const fake = new Fake({ maglevM: M });
      const state = mixedState(N);

      const live = new Map([...contents((m) => rt.dump(m)).keys()].map((m) => [m, new Map<string, string>()]));
      const cold = packed.plan({ state, live, packed: true });
      assert.ok(cold.puts, 'a cold start over empty maps is handed over as puts');
      assert.deepEqual(cold.ops, []);
      const ref = perEntry.plan({ state });
      assert.equal(cold.counters.writes, ref.ops.length);
      assert.equal(cold.puts!.length, ref.ops.length);
      rt.writePuts(cold.puts!);
      fake.apply(ref.ops);

      const got = contents((m) => rt.dump(m));
      const want = contents((m) => fake.dump(m));
      for (const m of ['svc', 'eps', 'sets', 'members', 'maglev', 'lbSrc', 'addrs', 'names'] as const)
        assert.ok(want.get(m)!.length > 0, `the state puts entries in ${m}`);
      assert.deepEqual(got, want);
      assert.ok(got.get('svc')!.length > N, 'every frontend is there');

      // Partial syncs after the cold start: endpoints added, Services removed (deletes are strict).
      for (const [more, gone] of [
        [20, 0],
        [20, 15],
        [0, 15],
      ] as const) {
        const next = { ...mixedState(N, more, gone), fullSync: false };
        const a = packed.plan({ state: next });
        const b = perEntry.plan({ state: next });
        assert.equal(a.puts, undefined, 'without `packed` the plan is MapOps');
        assert.deepEqual(a.ops, b.ops);
        rt.apply(a.ops);
        fake.apply(b.ops);
        assert.deepEqual(
          contents((m) => rt.dump(m)),
          contents((m) => fake.dump(m)),
        );
      }
    });

    test('a plan with a delete is not handed over as puts', () => {
      const p = new EbpfPlanner(CONFIG, { maglevM: M });
      p.plan({ state: mixedState(30), packed: true });
      const r = p.plan({ state: { ...mixedState(30, 0, 10), fullSync: true }, packed: true });
      assert.equal(r.puts, undefined);
      assert.ok(r.ops.some((o) => o.op === 'delete'));
    });
  },
);
