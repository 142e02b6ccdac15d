// The compiled BPF programs against their TypeScript mirrors, without any
// interface or namespace: programs and maps are loaded privately (nothing
// pinned, nothing attached) and run with BPF_PROG_TEST_RUN on crafted frames.
//   - every map, as loaded (the Maglev value resized by the loader), has the
//     key and value sizes the proxy writes (the structs themselves are checked
//     against the object's BTF without root: src/dataplane/ebpf/abi.test.ts);
//   - the kernel refuses what the Fake refuses (full hash, array bounds,
//     absent keys) and looks up LPM tries as the Fake does;
//   - the tracer agrees with the programs on the whole shared packet-flow
//     table: the same verdict, the endpoint the program picked among the
//     tracer's candidates, the masquerade mark at ingress;
//   - per-Service traffic: with CFG_TRAFFIC, a new connection and every
//     client packet of it add to the service port's kpt_traffic entry (L3
//     bytes), replies and uncounted ports add nothing; without it, nothing;
//   - Maglev: the program picks exactly the endpoint the tracer computes
//     from the client hash; a connection keeps its endpoint and its replies
//     are translated back;
//   - round-robin: each new connection takes the set's next slot (the
//     kernel's counter, read by the tracer), cycling; source-hash: every
//     port of one client gets the endpoint the tracer computes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as L from '../../src/dataplane/ebpf/layout.js';
import { Fake, trace } from '../../src/dataplane/ebpf/index.js';
import { EbpfPlanner } from '../../src/platform/ebpf/planner.js';
import { EbpfRuntime } from '../../src/platform/ebpf/runtime.js';
import { TC_ACT, testRun } from '../../src/platform/ebpf/testrun.js';
import { BpfError } from '../../src/platform/ebpf/libbpf.js';
import { PACKET_FLOW_SCENARIOS, type PacketFlow, type Scenario } from '../cases/packetflow.js';
import { scenarioConfig, scenarioLocalIPs, scenarioSyncState } from '../cases/resolve.js';
import { buildFrame, buildIcmpError, type Frame, parseFrame, TCP_ACK } from '../ebpf/frames.js';
import { assertTcVerdict, clearMaps as clear } from '../ebpf/verdict.js';
import * as E from '../ebpf/entries.js';

describe('BPF programs vs their TypeScript mirrors (BPF_PROG_TEST_RUN)', { timeout: 120_000 }, () => {
  let rt: EbpfRuntime;
  before(async () => {
    rt = await EbpfRuntime.open({ pinRoot: null, maglevM: 251 });
  });
  after(() => rt?.close());

  test('every map has the key and value sizes the proxy writes', () => {
    for (const name of L.MAP_NAMES) {
      const m = rt.obj.map(name);
      const spec = L.MAPS[name];
      assert.equal(m.keySize, spec.keySize, `${spec.name} key`);
      assert.equal(m.valueSize, name === 'maglev' ? L.maglevValueSize(251) : spec.valueSize, `${spec.name} value`);
    }
  });

  test('the kernel refuses what the Fake refuses, and its LPM tries answer as the Fake', () => {
    const fake = new Fake({ maglevM: 251 });
    const errnoOf = (fn: () => void) => {
      try {
        fn();
        return 0;
      } catch (e) {
        return e instanceof BpfError ? e.errno : (e as { errno: number }).errno;
      }
    };
    const both = (ops: Parameters<Fake['apply']>[0]) => [errnoOf(() => rt.apply(ops)), errnoOf(() => fake.apply(ops))];
    const cfg = L.encodeCfgValue({ mark: 1, flags: 0, netnsCookie: 0n });
    assert.deepEqual(both([{ map: 'cfg', op: 'update', key: L.encodeU32(2), value: cfg }]), [7, 7], 'array index');
    assert.deepEqual(both([{ map: 'cfg', op: 'delete', key: L.encodeU32(0) }]), [22, 22], 'array delete');
    assert.deepEqual(both([{ map: 'sets', op: 'delete', key: L.encodeU32(99) }]), [2, 2], 'absent key');
    const one = L.encodeU8(1);
    const ranges = [
      { svcId: 5, addr: '203.0.113.0', prefix: 25 },
      { svcId: 5, addr: '192.168.0.0', prefix: 24 },
      { svcId: 6, addr: '2001:db8::', prefix: 32 },
    ];
    const ops = ranges.map((k) => ({
      map: 'lbSrc' as const,
      op: 'update' as const,
      key: L.encodeLpmSvcKey(k),
      value: one,
    }));
    rt.apply(ops);
    fake.apply(ops);
    for (const [svcId, ip] of [
      [5, '203.0.113.2'],
      [5, '203.0.113.130'],
      [5, '192.168.0.77'],
      [6, '192.168.0.77'],
      [6, '2001:db8:1::1'],
      [5, '2001:db8:1::1'],
    ] as const) {
      const k = L.encodeLpmSvcKey({ svcId, addr: ip, prefix: ip.includes(':') ? 128 : 32 });
      assert.equal(rt.lookup('lbSrc', k) !== null, fake.lookup('lbSrc', k) !== null, `svc ${svcId} ${ip}`);
    }
    rt.apply(ops.map((o) => ({ map: o.map, op: 'delete' as const, key: o.key })));
  });

  describe('the tracer agrees with the programs on the shared packet-flow table', () => {
    let sport = 20000;
    for (const s of PACKET_FLOW_SCENARIOS) {
      const flows = s.flows.filter((f) => f.protocol !== 'SCTP' && !s.name.startsWith('HealthCheckNodePort'));
      if (flows.length === 0) continue;
      test(s.name, () => {
        clear(rt);
        const ops = new EbpfPlanner(scenarioConfig(s, 'ebpf'), { maglevM: 251 }).plan({
          state: scenarioSyncState(s),
        }).ops;
        const fake = new Fake({ maglevM: 251 });
        fake.apply(ops);
        rt.apply(ops);
        for (const f of flows) compareFlow(rt, fake, s, f, sport++);
      });
    }
  });

  test('Maglev: the program picks the endpoint the tracer computes from the client hash', () => {
    const s = PACKET_FLOW_SCENARIOS.find((x) => x.name === 'ClusterIPGeneral')!;
    clear(rt);
    const ops = new EbpfPlanner(scenarioConfig(s, 'ebpf'), { algorithm: 'maglev', maglevM: 251 }).plan({
      state: scenarioSyncState(s),
    }).ops;
    const fake = new Fake({ maglevM: 251 });
    fake.apply(ops);
    rt.apply(ops);
    const seen = new Set<string>();
    for (let port = 30000; port < 30040; port++) {
      const pkt = { src: '10.180.0.2', dst: '172.30.0.42', port: 80 };
      const want = trace(fake, pkt, scenarioLocalIPs(s), { sport: port });
      const out = parseFrame(
        testRun(rt.obj.program('kpt_ingress'), {
          frame: buildFrame({ src: pkt.src, dst: pkt.dst, sport: port, dport: 80, proto: 'TCP' }),
        }).frame,
      );
      assert.equal(`${out.dst}:${out.dport}`, want.output, `sport ${port}`);
      seen.add(want.output);
    }
    assert.equal(seen.size, 2, 'both endpoints get flows');
  });

  /** ClusterIPGeneral (two endpoints) planned with this default algorithm, in the kernel and a Fake. */
  const loadWith = (algorithm: L.LbAlgorithm) => {
    const s = PACKET_FLOW_SCENARIOS.find((x) => x.name === 'ClusterIPGeneral')!;
    clear(rt);
    const ops = new EbpfPlanner(scenarioConfig(s, 'ebpf'), { algorithm, maglevM: 251 }).plan({
      state: scenarioSyncState(s),
    }).ops;
    const fake = new Fake({ maglevM: 251 });
    fake.apply(ops);
    rt.apply(ops);
    return { fake, localIPs: scenarioLocalIPs(s) };
  };
  const runIngress = (src: string, sport: number) => {
    const out = parseFrame(
      testRun(rt.obj.program('kpt_ingress'), {
        frame: buildFrame({ src, dst: '172.30.0.42', sport, dport: 80, proto: 'TCP' }),
      }).frame,
    );
    return `${out.dst}:${out.dport}`;
  };

  test('round-robin: each new connection takes the next slot, as the tracer reads it from the set', () => {
    const { fake, localIPs } = loadWith('round-robin');
    const svc = L.decodeSvcValue(fake.lookup('svc', L.encodeSvcKey({ addr: '172.30.0.42', port: 80, proto: 'TCP' }))!);
    assert.equal(svc.algo, 'round-robin');
    const key = L.encodeU32(svc.clusterSet);
    const picks: string[] = [];
    for (let i = 0; i < 8; i++) {
      const live = rt.lookup('sets', key)!;
      assert.equal(L.decodeSetValue(live).rrNext, i, 'one turn per new connection');
      fake.apply([{ map: 'sets', op: 'update', key, value: live }]);
      const want = trace(fake, { src: '10.180.0.2', dst: '172.30.0.42', port: 80 }, localIPs, { sport: 31000 + i });
      assert.equal(want.candidates.length, 1);
      const got = runIngress('10.180.0.2', 31000 + i);
      assert.equal(got, want.output, `connection ${i}`);
      picks.push(got);
    }
    assert.notEqual(picks[0], picks[1]);
    picks.forEach((p, i) => assert.equal(p, picks[i % 2], `cycling order: ${picks.join(' ')}`));
  });

  test('source-hash: the client address alone picks the endpoint, as the tracer computes it', () => {
    const { fake, localIPs } = loadWith('source-hash');
    const seen = new Set<string>();
    for (let c = 2; c < 22; c++) {
      const src = `10.180.0.${c}`;
      const want = trace(fake, { src, dst: '172.30.0.42', port: 80 }, localIPs);
      assert.equal(want.candidates.length, 1, 'no source port needed');
      for (const sport of [32000, 40000 + c, 61000])
        assert.equal(runIngress(src, sport), want.output, `${src}:${sport}`);
      seen.add(want.output);
    }
    assert.equal(seen.size, 2, 'both endpoints get clients');
  });

  test('traffic counters: conns and L3 bytes of the client direction, only with CFG_TRAFFIC and an entry', () => {
    const cases = [
      { scenario: 'ClusterIPGeneral', client: '10.180.0.2', vip: '172.30.0.42', headers: 20n + 20n },
      { scenario: 'NodePorts (IPv6)', client: 'fd00:10:180::9', vip: 'fd00:172:30::41', headers: 40n + 20n },
    ];
    for (const c of cases) {
      const s = PACKET_FLOW_SCENARIOS.find((x) => x.name === c.scenario)!;
      const st = scenarioSyncState(s);
      const run = (counting: boolean) => {
        clear(rt);
        const renderer = new EbpfPlanner(scenarioConfig(s, 'ebpf'), { trafficCounters: counting });
        rt.apply(renderer.plan({ state: st }).ops);
        const sp = [...st.services.values()].find((x) => x.clusterIP === c.vip && x.port === 80)!;
        const key = L.encodeU32(renderer.idOf(sp.key)!);
        rt.apply([{ map: 'traffic', op: 'update', key, value: L.encodeTrafficValue({ conns: 0n, bytes: 0n }) }]);
        const ingress = rt.obj.program('kpt_ingress');
        const payload = new Uint8Array(100);
        const syn = { src: c.client, dst: c.vip, sport: 42000, dport: 80, proto: 'TCP' as const };
        const first = parseFrame(testRun(ingress, { frame: buildFrame(syn) }).frame);
        for (let i = 0; i < 3; i++) testRun(ingress, { frame: buildFrame({ ...syn, flags: TCP_ACK, payload }) });
        // The endpoint's reply (egress) is not the client direction.
        testRun(rt.obj.program('kpt_egress'), { frame: replyFrame(syn, first, { payload }) });
        return L.decodeTrafficValue(rt.lookup('traffic', key)!);
      };
      // IP and TCP headers, then the SYN and three ACKs with 100 bytes of payload each.
      assert.deepEqual(run(true), { conns: 1n, bytes: c.headers + 3n * (c.headers + 100n) }, c.scenario);
      assert.deepEqual(run(false), { conns: 0n, bytes: 0n }, `${c.scenario}: without CFG_TRAFFIC, untouched`);
    }
    clear(rt);
  });

  test('a connection keeps its endpoint; its replies come back from the service address', () => {
    const s = PACKET_FLOW_SCENARIOS.find((x) => x.name === 'ClusterIPGeneral')!;
    clear(rt);
    rt.apply(new EbpfPlanner(scenarioConfig(s, 'ebpf')).plan({ state: scenarioSyncState(s) }).ops);
    const ingress = rt.obj.program('kpt_ingress');
    const egress = rt.obj.program('kpt_egress');
    const syn = { src: '10.180.0.2', dst: '172.30.0.42', sport: 41000, dport: 80, proto: 'TCP' as const };
    const first = parseFrame(testRun(ingress, { frame: buildFrame(syn) }).frame);
    for (let i = 0; i < 5; i++) {
      const again = parseFrame(testRun(ingress, { frame: buildFrame({ ...syn, flags: TCP_ACK }) }).frame);
      assert.equal(`${again.dst}:${again.dport}`, `${first.dst}:${first.dport}`, 'same endpoint for the whole flow');
    }
    const reply = testRun(egress, { frame: replyFrame(syn, first, { flags: 0x12 }) });
    const r = parseFrame(reply.frame);
    assert.deepEqual([r.src, r.sport, r.l4ok, r.l3ok], ['172.30.0.42', 80, true, true]);
  });

  describe("DSR (--ebpf-lb-mode=dsr): the option on the entering node, the reply entry on the endpoint's", () => {
    const NODE = '192.0.2.11';
    const CLIENT = '203.0.113.7';
    const REMOTE = { addr: '10.244.2.10', port: 8080 };
    const LOCAL = { addr: '10.244.1.10', port: 8080 };
    const [NP, NP_LOCAL] = [30090, 30091];
    /** One node's maps: NP's endpoint is REMOTE, NP_LOCAL's LOCAL; `mine` is in this node's local sets. */
    const node = (flags: number, mine: ReadonlyArray<{ addr: string; port: number }>) => {
      const ops: E.HexOp[] = [E.cfg('IPv4', L.CFG_DETECT_CIDR | flags), E.podCidr('10.244.1.0', 24)];
      for (const [svcId, port, ep] of [
        [1, NP, REMOTE],
        [2, NP_LOCAL, LOCAL],
      ] as const) {
        const local = mine.includes(ep);
        ops.push(...E.set(L.clusterSetOf(svcId), [ep]), ...(local ? E.set(L.localSetOf(svcId), [ep]) : []));
        ops.push(
          E.svc('0.0.0.0', port, 'TCP', {
            svcId,
            kind: 'nodePort',
            clusterSet: L.clusterSetOf(svcId),
            localSet: local ? L.localSetOf(svcId) : 0,
          }),
        );
      }
      ops.push(E.addr(NODE, L.ADDR_LOCAL | L.ADDR_NODEPORT));
      clear(rt);
      rt.apply(ops.map((o) => ({ map: o.map, op: o.op, key: L.unhex(o.key), value: L.unhex(o.value!) })));
    };
    const ingress = () => rt.obj.program('kpt_ingress');
    const syn = { src: CLIENT, dst: NODE, sport: 40000, dport: NP, proto: 'TCP' as const };
    /** The option right after the 20-byte header: type 0x9e, length 8, the port, the address. */
    const optionOf = (f: Uint8Array) => ((f[14]! & 0xf) === 7 ? Array.from(f.subarray(34, 42)) : null);
    const OPTION = [0x9e, 8, NP >> 8, NP & 0xff, 192, 0, 2, 11];
    const ctOf = (k: L.CtKey) => {
      const v = rt.lookup('ct', L.encodeCtKey(k));
      return v && L.decodeCtValue(v);
    };

    test('a remote endpoint: DNAT only, the option on each SYN until the ACK and on the first datagram', () => {
      node(L.CFG_DSR, [LOCAL]);
      const first = testRun(ingress(), { frame: buildFrame(syn) });
      const out = parseFrame(first.frame);
      assert.equal(first.retval, TC_ACT.unspec);
      assert.deepEqual(optionOf(first.frame), OPTION);
      assert.equal(first.frame.length, buildFrame(syn).length + 8);
      assert.deepEqual(
        [out.src, out.sport, out.dst, out.dport, out.l3ok, out.l4ok],
        [CLIENT, 40000, REMOTE.addr, 8080, true, true],
      );
      const fwd = ctOf({ saddr: CLIENT, daddr: NODE, sport: 40000, dport: NP, proto: 'TCP' })!;
      assert.equal(fwd.flags, L.CT_DSR, 'translated at ingress, no masquerade');
      assert.equal(
        ctOf({ saddr: CLIENT, daddr: REMOTE.addr, sport: 40000, dport: 8080, proto: 'TCP' }),
        null,
        'no masquerade entry',
      );
      // The replies pass elsewhere; the reply entry is for the ICMP errors this node sends (icmp.h).
      assert.ok(ctOf({ saddr: REMOTE.addr, daddr: CLIENT, sport: 8080, dport: 40000, proto: 'TCP' }));
      assert.deepEqual(optionOf(testRun(ingress(), { frame: buildFrame(syn) }).frame), OPTION, 'a retransmitted SYN');
      const ack = testRun(ingress(), { frame: buildFrame({ ...syn, flags: TCP_ACK }) });
      assert.equal(optionOf(ack.frame), null, 'later packets: DNAT only');
      assert.equal(parseFrame(ack.frame).dst, REMOTE.addr);
      // This node cannot forward a later segment (too big for the link to node2): its error to the client,
      // quoting the DNATed segment, names the NodePort again when it leaves.
      const tooBig = buildIcmpError(NODE, CLIENT, ack.frame);
      const err = parseFrame(testRun(rt.obj.program('kpt_egress'), { frame: tooBig }).frame);
      assert.deepEqual(
        [err.icmp?.inner.dst, err.icmp?.inner.dport, err.l4ok, err.icmp?.inner.l3ok],
        [NODE, NP, true, true],
      );
      // UDP: the same Service port for UDP, its first datagram only.
      rt.apply([
        {
          map: 'svc',
          op: 'update',
          key: L.encodeSvcKey({ addr: '0.0.0.0', port: NP, proto: 'UDP' }),
          value: rt.lookup('svc', L.encodeSvcKey({ addr: '0.0.0.0', port: NP, proto: 'TCP' }))!,
        },
      ]);
      const dgram = { ...syn, proto: 'UDP' as const, payload: new Uint8Array(10) };
      const u1 = testRun(ingress(), { frame: buildFrame(dgram) });
      assert.deepEqual(optionOf(u1.frame), OPTION);
      assert.ok(parseFrame(u1.frame).l4ok && parseFrame(u1.frame).l3ok);
      assert.equal(optionOf(testRun(ingress(), { frame: buildFrame(dgram) }).frame), null);
    });

    test('masqueraded as before: snat mode, a client that is a local pod; a local endpoint: DNAT only, no option', () => {
      for (const [flags, src, what] of [
        [0, CLIENT, 'snat mode'],
        [L.CFG_DSR, '10.244.1.99', 'a local pod'],
      ] as const) {
        node(flags, [LOCAL]);
        const f = testRun(ingress(), { frame: buildFrame({ ...syn, src }) }).frame;
        assert.equal(optionOf(f), null, what);
        const fwd = ctOf({ saddr: src, daddr: NODE, sport: 40000, dport: NP, proto: 'TCP' })!;
        assert.equal(fwd.flags & L.CT_DSR, 0, what);
      }
      node(L.CFG_DSR, [LOCAL]);
      const f = testRun(ingress(), { frame: buildFrame({ ...syn, dport: NP_LOCAL }) }).frame;
      assert.equal(optionOf(f), null);
      assert.equal(parseFrame(f).src, CLIENT);
      const back = ctOf({ saddr: LOCAL.addr, daddr: CLIENT, sport: 8080, dport: 40000, proto: 'TCP' })!;
      assert.deepEqual([back.addr, back.port, back.flags], [NODE, NP_LOCAL, L.CT_REPLY | L.CT_AT_EGRESS]);
    });

    test("the endpoint's node: the option writes the reply entry, whose replies leave from the Service", () => {
      node(L.CFG_DSR, [LOCAL]);
      const withOption = testRun(ingress(), { frame: buildFrame(syn) }).frame;
      const back = { saddr: REMOTE.addr, daddr: CLIENT, sport: 8080, dport: 40000, proto: 'TCP' as const };
      // What the option is trusted for: a Service port this node knows, whose local set holds the destination.
      for (const [flags, mine, what] of [
        [0, [REMOTE], 'without CFG_DSR'],
        [L.CFG_DSR, [], 'an endpoint not on this node'],
      ] as const) {
        node(flags, mine);
        const r = testRun(ingress(), { frame: withOption });
        assert.deepEqual([r.retval, ctOf(back)], [TC_ACT.unspec, null], what);
      }
      node(L.CFG_DSR, [REMOTE]);
      const r = testRun(ingress(), { frame: withOption });
      assert.equal(r.retval, TC_ACT.unspec);
      assert.deepEqual(r.frame, withOption, 'the packet goes on as it came, option and all');
      const e = ctOf(back)!;
      assert.deepEqual([e.addr, e.port, e.flags], [NODE, NP, L.CT_REPLY | L.CT_AT_EGRESS]);
      const reply = parseFrame(
        testRun(rt.obj.program('kpt_egress'), {
          frame: replyFrame(syn, { dst: REMOTE.addr, dport: 8080 }, { flags: 0x12 }),
        }).frame,
      );
      assert.deepEqual(
        [reply.src, reply.sport, reply.dst, reply.dport, reply.l3ok, reply.l4ok],
        [NODE, NP, CLIENT, 40000, true, true],
      );
    });

    test("IPv6: the option in a destination-options header; the endpoint's node reads it", () => {
      const [node6, client6, ep6] = ['fd00:77::11', 'fd00:77::99', { addr: 'fd00:10:244:2::10', port: 8080 }];
      const load = (mine: boolean) => {
        const ops: E.HexOp[] = [
          E.cfg('IPv6', L.CFG_DSR),
          E.addr(node6, L.ADDR_LOCAL | L.ADDR_NODEPORT),
          ...E.set(L.clusterSetOf(7), [ep6]),
          ...(mine ? E.set(L.localSetOf(7), [ep6]) : []),
          E.svc('::', NP, 'TCP', {
            svcId: 7,
            kind: 'nodePort',
            clusterSet: L.clusterSetOf(7),
            localSet: mine ? L.localSetOf(7) : 0,
          }),
        ];
        clear(rt);
        rt.apply(ops.map((o) => ({ map: o.map, op: o.op, key: L.unhex(o.key), value: L.unhex(o.value!) })));
      };
      const syn6 = { ...syn, src: client6, dst: node6 };
      load(false);
      const sent = buildFrame(syn6);
      const r = testRun(ingress(), { frame: sent });
      const f = r.frame;
      const dv = new DataView(f.buffer, f.byteOffset, f.byteLength);
      assert.equal(r.retval, TC_ACT.unspec);
      assert.equal(f.length, sent.length + 24);
      assert.deepEqual([f[20], dv.getUint16(18)], [60, 20 + 24], 'next header: destination options; payload length');
      assert.deepEqual(Array.from(f.subarray(54, 60)), [6, 2, 0x1e, 18, NP >> 8, NP & 0xff], 'header and option');
      assert.equal(L.addrText(f.subarray(60, 76)), node6, "the option's address");
      assert.deepEqual(Array.from(f.subarray(76, 78)), [1, 0], 'PadN');
      assert.equal(L.addrText(f.subarray(38, 54)), ep6.addr, 'DNATed');
      assert.equal(dv.getUint16(78 + 2), 8080);
      // The TCP checksum, over the pseudo header (unchanged by the extension header) and the segment.
      const seg = f.subarray(78);
      const words = [...f.subarray(22, 54), 0, 6, 0, seg.length, ...seg];
      let sum = 0;
      for (let i = 0; i < words.length; i += 2) sum += (words[i]! << 8) | (words[i + 1] ?? 0);
      while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
      assert.equal(sum, 0xffff, 'TCP checksum');
      load(true);
      assert.equal(testRun(ingress(), { frame: f }).retval, TC_ACT.unspec);
      const e = ctOf({ saddr: ep6.addr, daddr: client6, sport: 8080, dport: 40000, proto: 'TCP' })!;
      assert.deepEqual([e.addr, e.port, e.flags], [node6, NP, L.CT_REPLY | L.CT_AT_EGRESS]);
    });
  });

  test('ICMP errors about a balanced connection are translated back at the hook of the packets they are about', () => {
    const s = PACKET_FLOW_SCENARIOS.find((x) => x.name === 'ClusterIPGeneral')!;
    clear(rt);
    rt.apply(new EbpfPlanner(scenarioConfig(s, 'ebpf')).plan({ state: scenarioSyncState(s) }).ops);
    const ingress = rt.obj.program('kpt_ingress');
    const egress = rt.obj.program('kpt_egress');
    const icmpStat = () => Number(rt.stats()[L.STAT.icmp]!);
    const syn = { src: '10.180.0.2', dst: '172.30.0.42', sport: 41000, dport: 80, proto: 'TCP' as const };
    const out = testRun(ingress, { frame: buildFrame(syn) }).frame;
    const ep = parseFrame(out);
    const router = '10.0.9.9';
    const n0 = icmpStat();

    // A router between the node and the endpoint: "fragmentation needed" to the client, quoting the
    // segment as it left the node. It leaves the node where the connection's replies do (egress).
    const tooBig = buildIcmpError(router, syn.src, out);
    const atIngress = testRun(ingress, { frame: tooBig });
    assert.equal(atIngress.retval, TC_ACT.unspec);
    assert.deepEqual(atIngress.frame, tooBig, 'not at the hook of the replies: untouched');
    const a = parseFrame(testRun(egress, { frame: tooBig }).frame);
    assert.deepEqual(
      [a.src, a.dst, a.icmp?.inner.src, a.icmp?.inner.sport, a.icmp?.inner.dst, a.icmp?.inner.dport],
      [router, syn.src, syn.src, syn.sport, syn.dst, syn.dport],
      'the quote names the service address again',
    );
    assert.deepEqual([a.l3ok, a.l4ok, a.icmp?.inner.l3ok], [true, true, true], 'checksums');

    // The endpoint answering itself (port unreachable): the error's source becomes the service address too.
    const fromEp = parseFrame(testRun(egress, { frame: buildIcmpError(ep.dst, syn.src, out, 3, 3) }).frame);
    assert.deepEqual([fromEp.src, fromEp.icmp?.inner.dst, fromEp.l4ok], [syn.dst, syn.dst, true]);

    // A router on the client's side, about a reply the client got from the service address: the error goes
    // to the service address and must reach the endpoint, at the hook where the client's packets are
    // translated (ingress), with the quote naming the endpoint.
    const reply = buildFrame({
      src: syn.dst,
      dst: syn.src,
      sport: syn.dport,
      dport: syn.sport,
      proto: 'TCP',
      flags: 0x12,
    });
    const d = parseFrame(testRun(ingress, { frame: buildIcmpError(router, syn.dst, reply) }).frame);
    assert.deepEqual(
      [d.src, d.dst, d.icmp?.inner.src, d.icmp?.inner.sport, d.icmp?.inner.dst, d.icmp?.inner.dport],
      [router, ep.dst, ep.dst, ep.dport, syn.src, syn.sport],
    );
    assert.deepEqual([d.l3ok, d.l4ok, d.icmp?.inner.l3ok], [true, true, true], 'checksums');
    assert.equal(icmpStat() - n0, 3, 'three errors translated (the one at the wrong hook not counted)');

    // About a connection nobody balanced: untouched.
    const stranger = buildFrame({ ...syn, sport: 41001, dst: '10.180.0.50' });
    const u = buildIcmpError(router, syn.src, stranger);
    assert.deepEqual(testRun(egress, { frame: u }).frame, u);
  });
});

/** The endpoint's answer to a client's TCP packet that the program sent to `translated`. */
function replyFrame(client: Frame, translated: { dst: string; dport: number }, extra: Partial<Frame>): Uint8Array {
  return buildFrame({
    src: translated.dst,
    dst: client.src,
    sport: translated.dport,
    dport: client.sport,
    proto: 'TCP',
    ...extra,
  });
}

function compareFlow(rt: EbpfRuntime, fake: Fake, s: Scenario, f: PacketFlow, sport: number): void {
  const locals = scenarioLocalIPs(s);
  const want = trace(fake, { src: f.src, dst: f.dst, port: f.port, protocol: f.protocol }, locals);
  const egress = locals.includes(f.src);
  const frame = buildFrame({ src: f.src, dst: f.dst, sport, dport: f.port, proto: f.protocol as 'TCP' | 'UDP' });
  const got = testRun(rt.obj.program(egress ? 'kpt_egress' : 'kpt_ingress'), { frame });
  const out = parseFrame(got.frame);
  const what = `${s.name} / ${f.name}: ${f.protocol} ${f.src} -> ${f.dst}:${f.port} (tracer: ${want.output || '""'})`;
  assertTcVerdict(want, got.retval, out, { dst: f.dst, port: f.port, what });
  if (want.output === '' || want.output === 'DROP' || want.output === 'REJECT' || egress) return;
  // Masquerade of a connection that entered the node is the programs' own (snat.h): no mark for netfilter,
  // and an entry that rewrites the source at egress, client -> endpoint. Its address is the route's
  // preferred source towards the endpoint, in this process's network namespace: where that has no route
  // (or no forwarding) the packet goes nowhere and nothing is masqueraded, so only "no masquerade where
  // the tracer says none" is certain on every machine.
  assert.equal(got.mark & 0x4000, 0, `${what}: no masquerade mark`);
  const out3 = rt.lookup(
    'ct',
    L.encodeCtKey({ saddr: f.src, daddr: out.dst, sport, dport: out.dport, proto: f.protocol as 'TCP' | 'UDP' }),
  );
  const snat = out3 && L.decodeCtValue(out3);
  const masqueraded = snat !== null && (snat.flags & (L.CT_REPLY | L.CT_AT_EGRESS)) === (L.CT_REPLY | L.CT_AT_EGRESS);
  if (!want.masq) assert.equal(masqueraded, false, `${what}: not masqueraded`);
  else if (masqueraded) assert.ok(snat.port >= 1024 && snat.port < 32768, `${what}: masquerade port ${snat.port}`);
}
