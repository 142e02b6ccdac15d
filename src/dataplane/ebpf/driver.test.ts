// The ebpf driver under the one reconciler (EbpfPlanner puts them together):
// what a sync writes (only changes, in a safe order), what it keeps stable
// (ids, slots), and how it recovers (failed(), restart from live).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../core/types.js';
import { endpoint, makeService, makeSlice, slicePort, svcPort, withClusterIP } from '../../../test/support/fixtures.js';
import { Fake } from './fake.js';
import { maglevTable } from './hash.js';
import * as L from './layout.js';
import { EbpfPlanner } from '../../platform/ebpf/planner.js';
import { liveEntries, type LiveEntries } from './driver.js';
import { assignSlots } from './entries.js';
import type { MapOp } from './store.js';
import { trace } from './trace.js';

const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.244.0.0/16'] },
  nodePortAddresses: ['192.168.0.10/32'],
  localhostNodePorts: false,
  localIPs: ['127.0.0.1', '192.168.0.10'],
};

/** n ClusterIP services web-i (10.96.x.y:80) with `eps(i)` endpoints each. */
function state(n: number, eps: (i: number) => string[], changed?: string[], extra = {}): SyncState {
  const services = [];
  const slices = [];
  for (let i = 0; i < n; i++) {
    const name = `web-${i}`;
    services.push(
      withClusterIP(
        makeService('default', name, (s) => {
          s.spec.ports = [svcPort('http', 80, 'TCP', { targetPort: 8080 })];
          Object.assign(s.spec, extra);
        }),
        `10.96.${Math.floor(i / 250)}.${(i % 250) + 1}`,
      ),
    );
    slices.push(
      makeSlice('default', name, 1, (s) => {
        s.endpoints = eps(i).map((ip) => endpoint(ip, { nodeName: 'node-a', ready: true }));
        s.ports = [slicePort('http', 8080)];
      }),
    );
  }
  return syncStateFromObjects({
    services,
    slices,
    family: 'IPv4',
    nodeName: 'node-a',
    serviceCIDRs: ['10.96.0.0/12'],
    ...(changed ? { changedServices: changed, fullSync: false } : {}),
  });
}

const count = (ops: readonly MapOp[], map: L.MapName, op: 'update' | 'delete') =>
  ops.filter((o) => o.map === map && o.op === op).length;

test('a cold sync writes every entry once; the same state again writes nothing', () => {
  const r = new EbpfPlanner(CONFIG);
  const fake = new Fake();
  const first = r.plan({ state: state(3, (i) => [`10.244.1.${i + 10}`]) });
  fake.apply(first.ops);
  assert.equal(first.full, true);
  assert.equal(count(first.ops, 'svc', 'update'), 3);
  assert.equal(count(first.ops, 'eps', 'update'), 3);
  assert.equal(first.ops.filter((o) => o.op === 'delete').length, 0);
  const again = r.plan({ state: state(3, (i) => [`10.244.1.${i + 10}`]) });
  assert.deepEqual(again.ops, []);
});

test('adding one endpoint is two writes (its slot, the count); three with ClientIP affinity (its membership)', () => {
  for (const affinity of [false, true]) {
    const extra = affinity ? { sessionAffinity: 'ClientIP' } : {};
    const r = new EbpfPlanner(CONFIG);
    const eps = (k: number) => (i: number) => Array.from({ length: k }, (_, j) => `10.244.${i}.${j + 10}`);
    r.plan({ state: state(50, eps(3), undefined, extra) });
    const grown = state(50, (i) => (i === 7 ? eps(4)(i) : eps(3)(i)), ['default/web-7'], extra);
    const ops = r.plan({ state: grown }).ops;
    assert.deepEqual(
      ops.map((o) => `${o.op} ${o.map}`),
      affinity ? ['update eps', 'update members', 'update sets'] : ['update eps', 'update sets'],
    );
    const set = ops.at(-1)!;
    assert.deepEqual(L.decodeEpKey(ops[0]!.key), { setId: L.decodeU32(set.key), slot: 3 });
    assert.equal(L.decodeSetValue(set.value!).count, 4);
  }
});

test('removing one endpoint moves the last slot into its place before the count shrinks, then frees the tail', () => {
  const r = new EbpfPlanner(CONFIG);
  const fake = new Fake();
  const four = ['10.244.1.10', '10.244.1.11', '10.244.1.12', '10.244.1.13'];
  const aff = { sessionAffinity: 'ClientIP' };
  fake.apply(r.plan({ state: state(1, () => four, undefined, aff) }).ops);
  const ops = r.plan({
    state: state(1, () => four.filter((ip) => ip !== '10.244.1.11'), ['default/web-0'], aff),
  }).ops;
  assert.deepEqual(
    ops.map((o) => `${o.op} ${o.map}`),
    ['update eps', 'update members', 'update sets', 'delete members', 'delete eps'],
  );
  // Apply one op at a time: the programs never find a count beyond the slots, nor a removed endpoint.
  for (const op of ops) {
    fake.apply([op]);
    const n = L.decodeSetValue(fake.lookup('sets', L.encodeU32(2))!).count;
    for (let slot = 0; slot < n; slot++) {
      const v = fake.lookup('eps', L.encodeEpKey({ setId: 2, slot }));
      assert.ok(v, `slot ${slot} of ${n} exists after ${op.op} ${op.map}`);
      assert.notEqual(L.decodeEpValue(v).addr, '10.244.1.11');
    }
  }
  assert.deepEqual(L.decodeEpValue(fake.lookup('eps', L.encodeEpKey({ setId: 2, slot: 1 }))!).addr, '10.244.1.13');
});

test('assignSlots keeps staying endpoints in place and fills holes with new ones first', () => {
  const ep = (ip: string) => ({ ip, port: 80 }) as never;
  assert.deepEqual(assignSlots(['a:80', 'b:80', 'c:80'], [ep('a'), ep('c'), ep('d')]), ['a:80', 'd:80', 'c:80']);
  assert.deepEqual(assignSlots(['a:80', 'b:80', 'c:80', 'e:80'], [ep('a'), ep('e')]), ['a:80', 'e:80']);
  assert.deepEqual(assignSlots([], [ep('x'), ep('y')]), ['x:80', 'y:80']);
});

test('a deleted service goes: its names, services, address and sets, services before sets', () => {
  const r = new EbpfPlanner(CONFIG);
  const fake = new Fake();
  fake.apply(r.plan({ state: state(2, (i) => [`10.244.1.${i + 10}`]) }).ops);
  const ops = r.plan({ state: state(1, () => ['10.244.1.10'], ['default/web-1']) }).ops;
  fake.apply(ops);
  const order = ops.map((o) => o.map);
  assert.ok(order.indexOf('svc') < order.indexOf('sets'), order.join(' '));
  assert.equal(fake.size('svc'), 1);
  assert.equal(fake.size('names'), 1);
  assert.equal(fake.lookup('addrs', L.encodeAddrKey('10.96.0.2')), null);
});

test('after failed() the next plan diffs against the live entries: a failed half-apply is repaired', () => {
  const r = new EbpfPlanner(CONFIG);
  const fake = new Fake();
  fake.apply(r.plan({ state: state(3, (i) => [`10.244.1.${i + 10}`]) }).ops);
  const next = state(3, (i) => [`10.244.2.${i + 10}`, `10.244.3.${i + 10}`], [
    'default/web-0',
    'default/web-1',
    'default/web-2',
  ]);
  const ops = r.plan({ state: next }).ops;
  fake.apply(ops.slice(0, 3)); // the apply failed part-way
  r.failed();
  assert.equal(r.needsLive(), true);
  const repair = r.plan({ state: { ...next, fullSync: true }, live: liveOf(fake) });
  fake.apply(repair.ops);
  const fresh = new Fake();
  fresh.apply(new EbpfPlanner(CONFIG).plan({ state: next }).ops);
  assert.equal(fake.print(), fresh.print());
});

test('a restarted proxy adopting the live maps writes nothing when nothing changed, and keeps ids', () => {
  const fake = new Fake();
  const st = state(20, (i) => [`10.244.1.${i + 10}`, `10.244.2.${i + 10}`]);
  fake.apply(new EbpfPlanner(CONFIG).plan({ state: st }).ops);
  const restarted = new EbpfPlanner(CONFIG);
  assert.deepEqual(restarted.plan({ state: st, live: liveOf(fake) }).ops, []);
  // A service added while it was down gets a new id; nobody else's entries move.
  const more = state(21, (i) => [`10.244.1.${i + 10}`, `10.244.2.${i + 10}`]);
  const ops = new EbpfPlanner(CONFIG).plan({ state: more, live: liveOf(fake) }).ops;
  assert.ok(ops.every((o) => o.op === 'update'));
  assert.equal(count(ops, 'svc', 'update'), 1);
});

test('Maglev services carry the table of their endpoints; the tracer names the flow hash choice', () => {
  const r = new EbpfPlanner(CONFIG, { algorithm: 'maglev', maglevM: 251 });
  const fake = new Fake({ maglevM: 251 });
  const ips = ['10.244.1.10', '10.244.1.11', '10.244.1.12'];
  fake.apply(r.plan({ state: state(1, () => ips) }).ops);
  const lut = L.decodeMaglev(fake.lookup('maglev', L.encodeU32(2))!);
  assert.deepEqual(
    lut,
    maglevTable(
      ips.map((ip) => `${ip}:8080`),
      251,
    ),
  );
  const shares = [0, 1, 2].map((s) => lut.filter((x) => x === s).length);
  assert.ok(
    shares.every((n) => n >= 80 && n <= 88),
    `even spread: ${shares.join(' ')}`,
  );
  const pkt = { src: '10.244.9.9', dst: '10.96.0.1', port: 80 };
  const all = trace(fake, pkt, CONFIG.localIPs);
  assert.equal(all.candidates.length, 3);
  const one = trace(fake, pkt, CONFIG.localIPs, { sport: 40000 });
  assert.equal(one.candidates.length, 1);
  assert.equal(one.candidates[0]!.probability, 1);
});

test('Maglev: removing one of 10 endpoints moves few of the flows of the other nine', () => {
  const eps = Array.from({ length: 10 }, (_, i) => `10.0.0.${i}:80`);
  const kept = eps.filter((_, i) => i !== 4);
  const before = maglevTable(eps, 16381).map((i) => eps[i]);
  const after = maglevTable(kept, 16381).map((i) => kept[i]);
  let moved = 0;
  let survivors = 0;
  for (let i = 0; i < before.length; i++) {
    if (before[i] === eps[4]) continue;
    survivors++;
    if (before[i] !== after[i]) moved++;
  }
  assert.ok(moved / survivors < 0.05, `${moved} of ${survivors} entries of surviving endpoints moved`);
});

test('the per-Service annotation overrides the default algorithm', () => {
  const r = new EbpfPlanner(CONFIG);
  const fake = new Fake();
  const annotated = syncStateFromObjects({
    services: [
      withClusterIP(
        makeService('default', 'mg', (s) => {
          s.metadata.annotations = { 'kube-proxy-ts/lb-algorithm': 'maglev' };
          s.spec.ports = [svcPort('http', 80)];
        }),
        '10.96.7.7',
      ),
    ],
    slices: [
      makeSlice('default', 'mg', 1, (s) => {
        s.endpoints = [endpoint('10.244.1.10', { ready: true })];
        s.ports = [slicePort('http', 80)];
      }),
    ],
    family: 'IPv4',
  });
  fake.apply(r.plan({ state: annotated }).ops);
  const v = L.decodeSvcValue(fake.lookup('svc', L.encodeSvcKey({ addr: '10.96.7.7', port: 80, proto: 'TCP' }))!);
  assert.equal(v.algo, 'maglev');
  assert.ok(fake.lookup('maglev', L.encodeU32(v.clusterSet)));
});

/** A Service with port http on 10.96.9.9:80 and one endpoint: two of them clash. */
function onSharedClusterIP(name: string, ep: string) {
  return {
    svc: withClusterIP(
      makeService('default', name, (s) => {
        s.spec.ports = [svcPort('http', 80)];
      }),
      '10.96.9.9',
    ),
    slice: makeSlice('default', name, 1, (s) => {
      s.endpoints = [endpoint(ep, { ready: true })];
      s.ports = [slicePort('http', 80)];
    }),
  };
}

test('two services on one ClusterIP:port: the one changed last takes it, and the other is reported', () => {
  const r = new EbpfPlanner(CONFIG);
  const a = onSharedClusterIP('a', '10.244.1.1');
  const b = onSharedClusterIP('b', '10.244.1.2');
  const fake = new Fake();
  fake.apply(r.plan({ state: syncStateFromObjects({ services: [a.svc], slices: [a.slice], family: 'IPv4' }) }).ops);
  const res = r.plan({
    state: syncStateFromObjects({
      services: [a.svc, b.svc],
      slices: [a.slice, b.slice],
      family: 'IPv4',
      changedServices: ['default/b'],
      fullSync: false,
    }),
  });
  fake.apply(res.ops);
  assert.deepEqual(
    res.skipped.map((s) => s.servicePort),
    ['default/a:http'],
  );
  assert.equal(trace(fake, { src: '10.244.5.5', dst: '10.96.9.9', port: 80 }, []).output, '10.244.1.2:80');
});

test('when the port that took an address:port lets go, the other one serves it again', () => {
  const r = new EbpfPlanner(CONFIG);
  const a = onSharedClusterIP('a', '10.244.1.1');
  const b = onSharedClusterIP('b', '10.244.1.2');
  const fake = new Fake();
  const dst = { src: '10.244.5.5', dst: '10.96.9.9', port: 80 };
  fake.apply(r.plan({ state: syncStateFromObjects({ services: [a.svc], slices: [a.slice], family: 'IPv4' }) }).ops);
  const both = { services: [a.svc, b.svc], slices: [a.slice, b.slice], family: 'IPv4' as const };
  fake.apply(r.plan({ state: syncStateFromObjects({ ...both, changedServices: ['default/b'], fullSync: false }) }).ops);
  assert.equal(trace(fake, dst, []).output, '10.244.1.2:80');
  const gone = r.plan({
    state: syncStateFromObjects({
      services: [a.svc],
      slices: [a.slice],
      family: 'IPv4',
      changedServices: ['default/b'],
      fullSync: false,
    }),
  });
  fake.apply(gone.ops);
  assert.ok(
    gone.ops.some((o) => o.map === 'svc' && o.op === 'update'),
    'the entry is rewritten, not deleted',
  );
  assert.equal(trace(fake, dst, []).output, '10.244.1.1:80');
});

test("an address both a Service and the node use holds both owners' flags, and keeps the node's when the Service goes", () => {
  const r = new EbpfPlanner(CONFIG);
  const fake = new Fake();
  const flags = () => L.decodeU32(fake.lookup('addrs', L.encodeAddrKey('192.168.0.10'))!);
  fake.apply(r.plan({ state: state(1, () => ['10.244.1.10'], undefined, { externalIPs: ['192.168.0.10'] }) }).ops);
  assert.equal(flags(), L.ADDR_LOCAL | L.ADDR_NODEPORT | L.ADDR_SERVICE);
  const ops = r.plan({ state: state(0, () => [], ['default/web-0']) }).ops;
  fake.apply(ops);
  assert.ok(!ops.some((o) => o.map === 'addrs' && o.op === 'delete' && L.decodeAddrKey(o.key) === '192.168.0.10'));
  assert.equal(flags(), L.ADDR_LOCAL | L.ADDR_NODEPORT);
});

test('SCTP ports are reported and left out', () => {
  const r = new EbpfPlanner(CONFIG);
  const st = syncStateFromObjects({
    services: [
      withClusterIP(
        makeService('default', 's', (s) => {
          s.spec.ports = [svcPort('sctp', 9, 'SCTP')];
        }),
        '10.96.3.3',
      ),
    ],
    slices: [],
    family: 'IPv4',
  });
  const res = r.plan({ state: st });
  assert.equal(res.skipped.length, 1);
  assert.equal(count(res.ops, 'svc', 'update'), 0);
});

function liveOf(f: Fake): LiveEntries {
  return liveEntries((m) => f.dump(m));
}

test('round-robin and source-hash: the set starts its turn at slot 0; source-hash reads a Maglev table', () => {
  const annotatedState = (algorithm: string) =>
    syncStateFromObjects({
      services: [
        withClusterIP(
          makeService('default', 'lb', (s) => {
            s.metadata.annotations = { 'kube-proxy-ts/lb-algorithm': algorithm };
            s.spec.ports = [svcPort('http', 80)];
          }),
          '10.96.7.8',
        ),
      ],
      slices: [
        makeSlice('default', 'lb', 1, (s) => {
          s.endpoints = ['10.244.1.10', '10.244.1.11', '10.244.2.10'].map((ip) => endpoint(ip, { ready: true }));
          s.ports = [slicePort('http', 80)];
        }),
      ],
      family: 'IPv4',
    });
  const pkt = { src: '10.244.5.5', dst: '10.96.7.8', port: 80 };
  for (const algorithm of ['round-robin', 'source-hash'] as const) {
    const fake = new Fake();
    fake.apply(new EbpfPlanner(CONFIG).plan({ state: annotatedState(algorithm) }).ops);
    const v = L.decodeSvcValue(fake.lookup('svc', L.encodeSvcKey({ addr: '10.96.7.8', port: 80, proto: 'TCP' }))!);
    assert.equal(v.algo, algorithm);
    const set = fake.lookup('sets', L.encodeU32(v.clusterSet))!;
    assert.deepEqual(L.decodeSetValue(set), { count: 3, rrNext: 0 });
    assert.equal(fake.lookup('maglev', L.encodeU32(v.clusterSet)) !== null, algorithm === 'source-hash');
    const picks = [0, 1, 2, 3, 4].map((turn) => {
      // The programs advance rr_next; the tracer reads the turn it holds.
      fake.apply([{ map: 'sets', op: 'update', key: L.encodeU32(v.clusterSet), value: setWithTurn(set, turn) }]);
      const r = trace(fake, pkt, CONFIG.localIPs, { sport: 40000 + turn });
      assert.equal(r.candidates.length, 1, `${algorithm}: one endpoint`);
      return r.output;
    });
    if (algorithm === 'round-robin') {
      assert.equal(new Set(picks.slice(0, 3)).size, 3, picks.join(' '));
      assert.deepEqual(picks.slice(3), picks.slice(0, 2), 'cycling');
    } else assert.equal(new Set(picks).size, 1, `one client address, one endpoint: ${picks.join(' ')}`);
  }
});

function setWithTurn(set: Uint8Array, turn: number): Uint8Array {
  const b = Uint8Array.from(set);
  new DataView(b.buffer).setUint32(4, turn, true);
  return b;
}
