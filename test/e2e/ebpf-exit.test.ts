// The tc programs' first check (src/bpf/filter.h), on the real kernel with
// BPF_PROG_TEST_RUN: programs and maps loaded privately (nothing pinned,
// nothing attached, no namespace touched), crafted frames, and the programs'
// own counters (kpt_stats) to tell which way a packet went:
//   - a packet neither to a Service address or ServiceCIDR nor of a
//     connection the programs balanced leaves at the first check (STAT_PASS)
//     untouched, IPv4 and IPv6: pod to pod, and a flow balanced at the
//     socket (which carries the endpoint's address from its first packet);
//   - everything that was the programs' before still is: a new connection to
//     a ClusterIP, its packets and replies, an unallocated address of a
//     ServiceCIDR (dropped), a port the ClusterIP lacks (rejected), and a
//     ServiceCIDR too wide for the bitmap (every packet looked up);
//   - a connection outlives its Service and ServiceCIDR (as in a handover,
//     which empties both): its packets are still translated both ways;
//   - after an upgrade over a pinned connection map (entries the first check
//     has no mark of), every packet is looked up until each entry has been
//     marked by a packet of its own, and only then does the check let
//     packets go.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig, IPFamily } from '../../src/core/types.js';
import * as L from '../../src/dataplane/ebpf/layout.js';
import { EbpfPlanner } from '../../src/platform/ebpf/planner.js';
import { EbpfRuntime } from '../../src/platform/ebpf/runtime.js';
import { TC_ACT, testRun } from '../../src/platform/ebpf/testrun.js';
import { buildFrame, type Frame, parseFrame, TCP_ACK } from '../ebpf/frames.js';
import { endpoint, makeService, makeSlice, slicePort, svcPort, withClusterIP } from '../support/fixtures.js';

interface Net {
  readonly family: IPFamily;
  readonly vip: string;
  readonly cidr: string;
  readonly unallocated: string;
  readonly client: string;
  readonly backend: string;
  readonly otherPod: string;
  readonly podCidr: string;
  readonly nodeIP: string;
}

const V4: Net = {
  family: 'IPv4',
  vip: '10.96.0.10',
  cidr: '10.96.0.0/12',
  unallocated: '10.100.7.7',
  client: '10.0.1.2',
  backend: '10.0.2.2',
  otherPod: '10.0.2.3',
  podCidr: '10.0.0.0/16',
  nodeIP: '10.0.1.1',
};
const V6: Net = {
  family: 'IPv6',
  vip: 'fd00:96::10',
  cidr: 'fd00:96::/108',
  unallocated: 'fd00:96::7:7',
  client: 'fd00:1::2',
  backend: 'fd00:2::2',
  otherPod: 'fd00:2::3',
  podCidr: 'fd00::/56',
  nodeIP: 'fd00:1::1',
};

const config = (n: Net): DataplaneConfig => ({
  family: n.family,
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: [n.podCidr] },
  nodePortAddresses: null,
  localhostNodePorts: false,
  localIPs: [n.nodeIP],
});

/** One ClusterIP Service, port 80 -> backend:8080, or none; the family's ServiceCIDR unless `cidrs` says otherwise. */
function ops(rt: EbpfRuntime, planner: EbpfPlanner, n: Net, withService: boolean, cidrs = [n.cidr]): void {
  const state = syncStateFromObjects({
    services: withService
      ? [
          withClusterIP(
            makeService('t', 'web', (s) => {
              s.spec.ports = [svcPort('http', 80, 'TCP', { targetPort: 8080 })];
              s.spec.ipFamilies = [n.family];
            }),
            n.vip,
          ),
        ]
      : [],
    slices: withService
      ? [
          makeSlice('t', 'web', 1, (s) => {
            s.addressType = n.family;
            s.endpoints = [endpoint(n.backend, { nodeName: 'node', ready: true })];
            s.ports = [slicePort('http', 8080)];
          }),
        ]
      : [],
    family: n.family,
    nodeName: 'node',
    serviceCIDRs: cidrs,
  });
  rt.apply(planner.plan({ state: { ...state, fullSync: true } }).ops);
}

const stat = (rt: EbpfRuntime) => {
  const s = rt.stats();
  return {
    pass: Number(s[L.STAT.pass]),
    new: Number(s[L.STAT.new]),
    ctHit: Number(s[L.STAT.ctHit]),
    drop: Number(s[L.STAT.drop]),
    reject: Number(s[L.STAT.reject]),
  };
};

/** Run a frame and return the verdict, the frame after, and how each counter moved. */
function run(rt: EbpfRuntime, hook: 'ingress' | 'egress', f: Frame) {
  const before = stat(rt);
  const frame = buildFrame(f);
  const r = testRun(rt.obj.program(hook === 'ingress' ? 'kpt_ingress' : 'kpt_egress'), { frame });
  const now = stat(rt);
  const moved = Object.fromEntries(Object.entries(now).map(([k, v]) => [k, v - before[k as keyof typeof now]]));
  return { retval: r.retval, out: parseFrame(r.frame), same: Buffer.from(r.frame).equals(Buffer.from(frame)), moved };
}

const ONLY_PASS = { pass: 1, new: 0, ctHit: 0, drop: 0, reject: 0 };

for (const n of [V4, V6]) {
  describe(`the first check of the tc programs, ${n.family}`, { timeout: 60_000 }, () => {
    let rt: EbpfRuntime;
    let planner: EbpfPlanner;
    before(async () => {
      rt = await EbpfRuntime.open({ pinRoot: null });
      planner = new EbpfPlanner(config(n));
      ops(rt, planner, n, true);
    });
    after(() => rt?.close());

    test('a packet that is not ours leaves at the first check, untouched', () => {
      const ack = { proto: 'TCP' as const, flags: TCP_ACK, payload: new Uint8Array(16) };
      for (const [hook, f] of [
        ['ingress', { ...ack, src: n.client, dst: n.otherPod, sport: 40000, dport: 8080 }],
        ['egress', { ...ack, src: n.otherPod, dst: n.client, sport: 8080, dport: 40000 }],
        // A connection balanced at the socket: the endpoint's address from its first packet on.
        ['ingress', { src: n.client, dst: n.backend, sport: 40001, dport: 8080, proto: 'TCP' as const }],
        ['ingress', { src: n.client, dst: n.otherPod, sport: 40002, dport: 53, proto: 'UDP' as const }],
      ] as const) {
        const r = run(rt, hook, f);
        assert.equal(r.retval, TC_ACT.unspec, `${f.src} -> ${f.dst}`);
        assert.ok(r.same, 'the frame is not changed');
        assert.deepEqual(r.moved, ONLY_PASS, `${f.src} -> ${f.dst}: only STAT_PASS`);
      }
    });

    test('a new connection to the ClusterIP is balanced, and its packets and replies translated', () => {
      const syn = { src: n.client, dst: n.vip, sport: 41000, dport: 80, proto: 'TCP' as const };
      const first = run(rt, 'ingress', syn);
      assert.equal(first.out.dst, n.backend);
      assert.equal(first.out.dport, 8080);
      assert.deepEqual(first.moved, { pass: 0, new: 1, ctHit: 0, drop: 0, reject: 0 });
      const ack = run(rt, 'ingress', { ...syn, flags: TCP_ACK });
      assert.equal(ack.out.dst, n.backend);
      assert.equal(ack.moved.ctHit, 1);
      const reply = { src: n.backend, dst: n.client, sport: 8080, dport: 41000, proto: 'TCP' as const, flags: 0x12 };
      const back = run(rt, 'egress', reply);
      assert.equal(`${back.out.src}|${back.out.sport}`, `${n.vip}|80`, 'the reply comes from the ClusterIP');
      assert.equal(back.moved.ctHit, 1);
      assert.equal(back.moved.pass, 0);
      // A reply from that endpoint of a flow the programs did not balance: looked up, no entry, untouched.
      const other = run(rt, 'egress', { ...reply, dport: 41999 });
      assert.ok(other.same);
      assert.deepEqual(other.moved, { pass: 0, new: 0, ctHit: 0, drop: 0, reject: 0 });
    });

    test('an unallocated ServiceCIDR address is dropped, a port the ClusterIP lacks rejected', () => {
      const drop = run(rt, 'ingress', { src: n.client, dst: n.unallocated, sport: 42000, dport: 80, proto: 'TCP' });
      assert.equal(drop.retval, TC_ACT.shot);
      assert.equal(drop.moved.drop, 1);
      const rej = run(rt, 'ingress', { src: n.client, dst: n.vip, sport: 42001, dport: 81, proto: 'TCP' });
      assert.equal(rej.retval, TC_ACT.redirect, 'the ICMP error goes back');
      assert.equal(rej.moved.reject, 1);
      assert.ok(rej.out.icmp, 'port unreachable');
    });

    test('a ServiceCIDR too wide for the bitmap: every packet is looked up', () => {
      ops(rt, planner, n, true, [n.cidr, n.family === 'IPv4' ? '0.0.0.0/4' : 'fd00::/16']);
      const r = run(rt, 'ingress', { src: n.client, dst: n.otherPod, sport: 43000, dport: 8080, proto: 'TCP' });
      assert.ok(r.same);
      assert.equal(r.moved.pass, 0, 'looked up in full');
      ops(rt, planner, n, true);
      const again = run(rt, 'ingress', { src: n.client, dst: n.otherPod, sport: 43000, dport: 8080, proto: 'TCP' });
      assert.deepEqual(again.moved, ONLY_PASS, 'the wide ServiceCIDR gone, the check lets it go again');
    });

    test('a connection outlives its Service and ServiceCIDR, as in a handover', () => {
      const syn = { src: n.client, dst: n.vip, sport: 44000, dport: 80, proto: 'TCP' as const };
      assert.equal(run(rt, 'ingress', syn).out.dst, n.backend);
      ops(rt, planner, n, false, []);
      const ack = run(rt, 'ingress', { ...syn, flags: TCP_ACK });
      assert.equal(ack.out.dst, n.backend, 'still sent to its endpoint');
      assert.equal(ack.moved.ctHit, 1);
      const back = run(rt, 'egress', { src: n.backend, dst: n.client, sport: 8080, dport: 44000, proto: 'TCP' });
      assert.equal(back.out.src, n.vip, 'its reply still comes from the ClusterIP');
      const fresh = run(rt, 'ingress', { ...syn, sport: 44001 });
      assert.ok(fresh.same, 'a new connection to the old address is no longer balanced');
      assert.equal(fresh.moved.new, 0);
      ops(rt, planner, n, true);
    });
  });
}

describe('the first check after an upgrade over a pinned connection map', { timeout: 60_000 }, () => {
  let rt: EbpfRuntime;
  before(async () => {
    rt = await EbpfRuntime.open({ pinRoot: null });
    ops(rt, new EbpfPlanner(config(V4)), V4, true);
  });
  after(() => rt?.close());

  test('every packet is looked up until each old entry is marked by a packet of its own', () => {
    // What an older proxy's programs left: a connection to a Service address and an endpoint this
    // object's programs never saw, and kpt_seen as a map created beside the adopted kpt_ct finds it.
    const vip = '10.96.0.20';
    const ep = '10.0.2.9';
    const orig = { saddr: V4.client, daddr: vip, sport: 45000, dport: 80, proto: 'TCP' as const };
    const reply = { saddr: ep, daddr: V4.client, sport: 8080, dport: 45000, proto: 'TCP' as const };
    const value = (addr: string, port: number, flags: number) =>
      L.encodeCtValue({ addr, nat: null, port, flags, svcId: 1, createdNs: 0n });
    rt.apply([
      { map: 'ct', op: 'update', key: L.encodeCtKey(orig), value: value(ep, 8080, 0) },
      { map: 'ct', op: 'update', key: L.encodeCtKey(reply), value: value(vip, 80, L.CT_REPLY | L.CT_AT_EGRESS) },
      { map: 'seen', op: 'update', key: L.encodeU32(0), value: new Uint8Array(8) },
    ]);
    assert.equal(rt.trustSeen(), false, 'two entries without their marks');
    const unrelated = { src: V4.client, dst: V4.otherPod, sport: 45001, dport: 8080, proto: 'TCP' as const };
    assert.equal(run(rt, 'ingress', unrelated).moved.pass, 0, 'not trusted yet: looked up in full');
    const back = run(rt, 'egress', { src: ep, dst: V4.client, sport: 8080, dport: 45000, proto: 'TCP' });
    assert.equal(back.out.src, vip, 'the old reply is translated');
    assert.equal(rt.trustSeen(), false, 'the original entry is not marked yet');
    const fwd = run(rt, 'ingress', { src: V4.client, dst: vip, sport: 45000, dport: 80, proto: 'TCP', flags: TCP_ACK });
    assert.equal(fwd.out.dst, ep, 'the old connection is translated');
    assert.equal(rt.trustSeen(), true, 'every entry marked');
    assert.deepEqual(run(rt, 'ingress', unrelated).moved, ONLY_PASS, 'now the check lets it go');
    const again = run(rt, 'egress', { src: ep, dst: V4.client, sport: 8080, dport: 45000, proto: 'TCP' });
    assert.equal(again.out.src, vip, 'and the old connection still works');
    assert.equal(again.moved.pass, 0);
  });
});
