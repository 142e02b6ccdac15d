// The XDP program (src/bpf/xdp.h) in front of tc ingress, with
// BPF_PROG_TEST_RUN: programs and maps loaded privately (nothing pinned,
// nothing attached), crafted frames run through kpt_xdp and then, as the
// kernel would, through kpt_ingress. What is checked:
//   - over the shared packet-flow table, every flow from outside the node
//     gets the verdict the tracer expects (the same table the tc path alone
//     is held to in ebpf-programs.test.ts): XDP never changes a verdict;
//   - XDP balances what it may (eTP Local; eTP Cluster too, with its
//     masquerade, where the kernel has BPF_FIB_LOOKUP_SRC, 6.7 or a
//     backport: without it, such a first packet is left to tc, which
//     masquerades by the mark),
//     drops clients loadBalancerSourceRanges keep out (STAT_XDP_DROP), with
//     the counters saying which path took each packet; a packet XDP
//     translated is not touched again by tc; no packet carries the
//     masquerade mark (the programs masquerade themselves);
//   - the masquerade's two entries, where XDP made them, are whole: a port of
//     the programs' range and the entry that takes the replies back. Whether
//     they are made depends on the route to the endpoint in this process's
//     network namespace (no route, or no forwarding: nothing to masquerade,
//     as at tc), so the entries themselves are proven with real packets in
//     ebpf-xdp.test.ts;
//   - the later packets of a masqueraded connection are translated in XDP,
//     a retransmitted SYN too;
//     an eTP Local client reusing a finished connection's ports is balanced
//     in XDP again;
//     checksums are right after XDP's rewrite, IPv4 and IPv6, TCP and UDP
//     (a UDP datagram without a checksum keeps none);
//   - an endpoint tc would look at again after the rewrite (on a node
//     address) is left to tc;
//   - a packet whose checksum field holds only the pseudo-header sum
//     (CHECKSUM_PARTIAL, which XDP cannot see) is left to tc untouched.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as L from '../../src/dataplane/ebpf/layout.js';
import { Fake, trace } from '../../src/dataplane/ebpf/index.js';
import { EbpfPlanner } from '../../src/platform/ebpf/planner.js';
import { EbpfRuntime } from '../../src/platform/ebpf/runtime.js';
import { testRun, testRunXdp, XDP_ACT } from '../../src/platform/ebpf/testrun.js';
import { LOCAL, service, slice } from '../cases/fixtures.js';
import { PACKET_FLOW_SCENARIOS, type Scenario } from '../cases/packetflow.js';
import { scenarioConfig, scenarioLocalIPs, scenarioSyncState } from '../cases/resolve.js';
import { buildFrame, type Frame, parseFrame, TCP_ACK } from '../ebpf/frames.js';
import { assertTcVerdict, clearMaps as clear } from '../ebpf/verdict.js';
import { hasFibLookupSrc } from '../../src/platform/ebpf/kernel.js';

const MASQ = 0x4000;
/** XDP balances masqueraded connections only where the FIB can say a route's source (xdp.h). */
const XDP_MASQ = hasFibLookupSrc();

type Counters = Record<'xdpNew' | 'xdpHit' | 'xdpPass' | 'xdpDrop' | 'new' | 'ctHit', number>;
const counters = (rt: EbpfRuntime): Counters => {
  const s = rt.stats();
  const n = (k: keyof typeof L.STAT) => Number(s[L.STAT[k]]);
  return {
    xdpNew: n('xdpNew'),
    xdpHit: n('xdpHit'),
    xdpPass: n('xdpPass'),
    xdpDrop: n('xdpDrop'),
    new: n('new'),
    ctHit: n('ctHit'),
  };
};

/** One frame through XDP and, unless XDP dropped it, tc ingress; how each counter moved. */
function pipeline(rt: EbpfRuntime, frame: Uint8Array) {
  const before = counters(rt);
  const x = testRunXdp(rt.obj.program('kpt_xdp'), frame);
  const tc = x.retval === XDP_ACT.pass ? testRun(rt.obj.program('kpt_ingress'), { frame: x.frame }) : null;
  const now = counters(rt);
  const moved = Object.fromEntries(Object.entries(now).map(([k, v]) => [k, v - before[k as keyof Counters]]));
  return { xdp: x, xdpTouched: !Buffer.from(x.frame).equals(Buffer.from(frame)), tc, moved: moved as Counters };
}

function load(rt: EbpfRuntime, s: Scenario): Fake {
  clear(rt);
  const ops = new EbpfPlanner(scenarioConfig(s, 'ebpf'), { maglevM: 251 }).plan({ state: scenarioSyncState(s) }).ops;
  const fake = new Fake({ maglevM: 251 });
  fake.apply(ops);
  rt.apply(ops);
  return fake;
}

const scenario = (name: string) => PACKET_FLOW_SCENARIOS.find((x) => x.name === name)!;

/**
 * Where a connection's first packet was masqueraded (an entry client -> endpoint that rewrites the source at
 * egress), both of the masquerade's entries are there and agree: a port of the programs' own range, and the
 * entry endpoint -> nat:port that takes the replies back to the client. Returns whether it was masqueraded.
 */
function masqueradeEntries(rt: EbpfRuntime, c: Frame, ep: { dst: string; dport: number }, what: string): boolean {
  const get = (k: L.CtKey) => {
    const v = rt.lookup('ct', L.encodeCtKey(k));
    return v && L.decodeCtValue(v);
  };
  const out = get({ saddr: c.src, daddr: ep.dst, sport: c.sport, dport: ep.dport, proto: c.proto });
  if (!out || (out.flags & (L.CT_REPLY | L.CT_AT_EGRESS)) !== (L.CT_REPLY | L.CT_AT_EGRESS)) return false;
  assert.ok(out.port >= 1024 && out.port < 32768, `${what}: masquerade port ${out.port}`);
  const back = get({ saddr: ep.dst, daddr: out.addr, sport: ep.dport, dport: out.port, proto: c.proto });
  assert.deepEqual(back && [back.flags, back.addr, back.port], [L.CT_UNMASQ, c.src, c.sport], `${what}: way back`);
  return true;
}

describe('XDP in front of tc ingress (BPF_PROG_TEST_RUN)', { timeout: 120_000 }, () => {
  let rt: EbpfRuntime;
  before(async () => {
    rt = await EbpfRuntime.open({ pinRoot: null, maglevM: 251 });
  });
  after(() => rt?.close());

  test('the packet-flow table from outside: the verdicts tc gives alone, XDP taking what it may', () => {
    let sport = 22000;
    const total = { xdpNew: 0, xdpDrop: 0, tcNew: 0, xdpMasq: 0 };
    for (const s of PACKET_FLOW_SCENARIOS) {
      const locals = scenarioLocalIPs(s);
      const flows = s.flows.filter(
        (f) => f.protocol !== 'SCTP' && !s.name.startsWith('HealthCheckNodePort') && !locals.includes(f.src),
      );
      if (flows.length === 0) continue;
      const fake = load(rt, s);
      for (const f of flows) {
        const want = trace(fake, { src: f.src, dst: f.dst, port: f.port, protocol: f.protocol }, locals);
        const fr = { src: f.src, dst: f.dst, sport: sport++, dport: f.port, proto: f.protocol as 'TCP' | 'UDP' };
        const r = pipeline(rt, buildFrame(fr));
        const what = `${s.name} / ${f.name}: ${f.protocol} ${f.src} -> ${f.dst}:${f.port} (tracer: ${want.output || '""'})`;
        total.xdpNew += r.moved.xdpNew;
        total.xdpDrop += r.moved.xdpDrop;
        total.tcNew += r.moved.new;
        if (r.xdp.retval === XDP_ACT.drop) {
          assert.equal(want.output, 'DROP', `${what}: XDP dropped it`);
          assert.equal(r.moved.xdpDrop, 1, what);
          continue;
        }
        assert.equal(r.xdp.retval, XDP_ACT.pass, what);
        const tc = r.tc!;
        const out = parseFrame(tc.frame);
        if (r.xdpTouched) {
          // Translated in XDP: a new flow of its own, and tc leaves the result alone.
          assert.equal(r.moved.xdpNew, 1, what);
          if (!XDP_MASQ)
            assert.equal(want.masq, false, `${what}: without BPF_FIB_LOOKUP_SRC, XDP leaves masquerade to tc`);
          assert.ok(Buffer.from(tc.frame).equals(Buffer.from(r.xdp.frame)), `${what}: tc does not touch it again`);
          assert.deepEqual([r.moved.new, r.moved.ctHit], [0, 0], what);
          if (want.masq) total.xdpMasq++;
          const masqueraded = masqueradeEntries(rt, fr, out, what);
          if (!want.masq) assert.equal(masqueraded, false, `${what}: not masqueraded`);
        } else {
          assert.equal(r.moved.xdpPass, 1, `${what}: left to tc`);
        }
        assertTcVerdict(want, tc.retval, out, { dst: f.dst, port: f.port, what });
        assert.equal(tc.mark & MASQ, 0, `${what}: no masquerade mark`);
      }
    }
    assert.ok(total.xdpNew >= 3, `XDP balanced eTP Local flows (${total.xdpNew})`);
    assert.ok(total.xdpDrop >= 2, `XDP dropped what source ranges deny (${total.xdpDrop})`);
    if (XDP_MASQ) assert.ok(total.xdpMasq >= 5, `XDP balanced the masqueraded ones (${total.xdpMasq})`);
    else assert.ok(total.tcNew >= 5, `tc balanced the masqueraded ones (${total.tcNew})`);
  });

  test('a masqueraded connection: its SYN through XDP (without BPF_FIB_LOOKUP_SRC: tc), the rest through XDP, a retransmitted SYN too', () => {
    load(rt, scenario('ExternalTrafficPolicyCluster'));
    const syn: Frame = { src: '203.0.113.2', dst: '192.168.0.2', sport: 43000, dport: 3001, proto: 'TCP' };
    const first = pipeline(rt, buildFrame(syn));
    assert.equal(first.xdpTouched, XDP_MASQ);
    if (XDP_MASQ) assert.deepEqual([first.moved.xdpNew, first.moved.new], [1, 0], 'the SYN: balanced in XDP');
    else assert.deepEqual([first.moved.xdpPass, first.moved.new], [1, 1], 'the SYN: balanced by tc');
    assert.equal(first.tc!.mark & MASQ, 0, 'no mark: the programs masquerade themselves');
    const ep = parseFrame(first.tc!.frame);
    masqueradeEntries(rt, syn, ep, 'the SYN');
    const retransmit = pipeline(rt, buildFrame(syn));
    assert.deepEqual(
      [retransmit.moved.xdpHit, retransmit.moved.ctHit],
      [1, 0],
      'a retransmitted SYN: translated in XDP (nothing of it needs tc now)',
    );
    assert.equal(parseFrame(retransmit.tc!.frame).dst, ep.dst);
    for (const payload of [new Uint8Array(0), new Uint8Array(333), new Uint8Array(1400)]) {
      const r = pipeline(rt, buildFrame({ ...syn, flags: TCP_ACK, payload }));
      assert.deepEqual([r.moved.xdpHit, r.moved.ctHit], [1, 0], 'an ACK: translated in XDP');
      const out = parseFrame(r.tc!.frame);
      assert.deepEqual([out.dst, out.dport, out.l3ok, out.l4ok], [ep.dst, ep.dport, true, true], `${payload.length} B`);
    }
    const reuse = pipeline(rt, buildFrame(syn));
    // A SYN on the ports after the handshake: the old connection forgotten, a new one balanced anew.
    if (XDP_MASQ) assert.deepEqual([reuse.moved.xdpNew, reuse.moved.new], [1, 0], 'the new SYN: XDP');
    else assert.deepEqual([reuse.moved.xdpPass, reuse.moved.new], [1, 1], 'the new SYN: tc');
  });

  test('eTP Local: a client reusing the ports of a finished connection is balanced in XDP again', () => {
    load(rt, scenario('ExternalTrafficPolicyLocal'));
    const syn: Frame = { src: '203.0.113.2', dst: '192.168.0.2', sport: 47000, dport: 3001, proto: 'TCP' };
    assert.equal(pipeline(rt, buildFrame(syn)).moved.xdpNew, 1);
    assert.equal(pipeline(rt, buildFrame({ ...syn, flags: TCP_ACK })).moved.xdpHit, 1);
    const reuse = pipeline(rt, buildFrame(syn));
    assert.deepEqual([reuse.moved.xdpNew, reuse.moved.new, reuse.moved.ctHit], [1, 0, 0]);
    assert.equal(parseFrame(reuse.xdp.frame).dst, '10.180.2.1');
  });

  test('XDP rewrites with correct checksums: IPv4 and IPv6 TCP, UDP with and without a checksum', () => {
    load(rt, scenario('ExternalTrafficPolicyLocal'));
    const base = { src: '203.0.113.2', dst: '192.168.0.2', dport: 3001 } as const;
    const tcp = pipeline(rt, buildFrame({ ...base, sport: 44000, proto: 'TCP', payload: new Uint8Array(77) }));
    const t = parseFrame(tcp.xdp.frame);
    assert.deepEqual([tcp.moved.xdpNew, t.dst, t.dport, t.l3ok, t.l4ok], [1, '10.180.2.1', 80, true, true]);

    // IPv6, eTP Cluster: the SYN (through XDP, or without BPF_FIB_LOOKUP_SRC tc), then an ACK with data through XDP.
    load(rt, scenario('NodePorts (IPv6)'));
    const syn6: Frame = { src: '2001:db8:ffff::2', dst: '2001:db8::1', sport: 44001, dport: 3001, proto: 'TCP' };
    const first6 = pipeline(rt, buildFrame(syn6));
    const ep6 = parseFrame(first6.tc!.frame);
    assert.deepEqual([first6.moved.xdpNew, ep6.l4ok], [XDP_MASQ ? 1 : 0, true], 'IPv6 TCP SYN');
    const ack6 = pipeline(rt, buildFrame({ ...syn6, flags: TCP_ACK, payload: new Uint8Array(501) }));
    const o6 = parseFrame(ack6.xdp.frame);
    assert.equal(ack6.moved.xdpHit, 1);
    assert.deepEqual([o6.dst, o6.dport, o6.l4ok], [ep6.dst, ep6.dport, true], 'IPv6 TCP');

    // UDP, eTP Local: balanced in XDP; a datagram without a checksum (IPv4 allows it) keeps none.
    const udpLocal: Scenario = {
      ...scenario('ExternalTrafficPolicyLocal'),
      setup: {
        services: [
          service('dns', { type: 'NodePort', clusterIP: '172.30.0.53', externalTrafficPolicy: 'Local' }, [
            { name: 'dns', port: 53, protocol: 'UDP', nodePort: 3053 },
          ]),
        ],
        slices: [slice('dns', [{ name: 'dns', port: 5353, protocol: 'UDP' }], [{ ip: '10.180.2.7', node: LOCAL }])],
      },
    };
    load(rt, udpLocal);
    const dgram = { ...base, dport: 3053, proto: 'UDP' as const, payload: new Uint8Array(29) };
    const u = pipeline(rt, buildFrame({ ...dgram, sport: 44002 }));
    const uo = parseFrame(u.xdp.frame);
    assert.deepEqual([u.moved.xdpNew, uo.dst, uo.dport, uo.l3ok, uo.l4ok], [1, '10.180.2.7', 5353, true, true]);
    const bare = buildFrame({ ...dgram, sport: 44003 });
    new DataView(bare.buffer, bare.byteOffset).setUint16(14 + 20 + 6, 0);
    const n = pipeline(rt, bare);
    assert.equal(n.moved.xdpNew, 1);
    assert.equal(new DataView(n.xdp.frame.buffer, n.xdp.frame.byteOffset).getUint16(14 + 20 + 6), 0, 'still none');
    assert.ok(parseFrame(n.xdp.frame).l3ok);
  });

  test('an endpoint that tc would look at again (a host-network endpoint on a node address): left to tc', () => {
    const hostNet: Scenario = {
      ...scenario('ExternalTrafficPolicyLocal'),
      setup: {
        services: [
          service('hn', { type: 'NodePort', clusterIP: '172.30.0.60', externalTrafficPolicy: 'Local' }, [
            { name: 'p', port: 80, nodePort: 3060 },
          ]),
        ],
        slices: [slice('hn', [{ name: 'p', port: 3061 }], [{ ip: '192.168.0.2', node: LOCAL }])],
      },
    };
    load(rt, hostNet);
    const r = pipeline(
      rt,
      buildFrame({ src: '203.0.113.2', dst: '192.168.0.2', sport: 46000, dport: 3060, proto: 'TCP' }),
    );
    assert.equal(r.xdpTouched, false);
    assert.deepEqual([r.moved.xdpPass, r.moved.xdpNew, r.moved.new], [1, 0, 1], 'XDP leaves it, tc balances it');
    const out = parseFrame(r.tc!.frame);
    assert.deepEqual([out.dst, out.dport], ['192.168.0.2', 3061]);
  });

  test('a checksum that is only the pseudo-header sum (CHECKSUM_PARTIAL) is left to tc untouched', () => {
    load(rt, scenario('ExternalTrafficPolicyLocal'));
    const f = buildFrame({ src: '203.0.113.2', dst: '192.168.0.2', sport: 45000, dport: 3001, proto: 'TCP' });
    // What a local sender's stack leaves for the device to finish: the folded pseudo-header sum, not complemented.
    const partial = new Uint8Array(f);
    const dv = new DataView(partial.buffer);
    let s = 0;
    for (let i = 26; i < 34; i += 2) s += dv.getUint16(i);
    s += 6 + (dv.getUint16(16) - 20);
    while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
    dv.setUint16(14 + 20 + 16, s);
    const r = pipeline(rt, partial);
    assert.equal(r.xdpTouched, false);
    assert.equal(r.moved.xdpPass, 1);
    assert.equal(r.moved.new, 1, 'tc balanced it');
  });
});
