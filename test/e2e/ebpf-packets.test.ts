// The BPF programs with real packets, driven by hand-written map contents
// (no proxy, no renderer): a two-node namespace cluster where node1 runs the
// programs on every interface, loaded and attached by the platform layer
// from a helper process that exits afterwards, so everything here also runs
// with no proxy process alive (what the pins are for).
//
// Covers: ClusterIP TCP/UDP from a pod (client IP kept) over local and
// remote endpoints, from the node itself (egress DNAT + reroute), NodePort
// from outside (masqueraded by the programs),
// REJECT of ports a ClusterIP does not define, DROP of unallocated
// ServiceCIDR addresses, a datagram that is a reply to the node itself on a
// NodePort number left alone, adoption of pinned maps by a second load with
// a held connection surviving it, and cleanup removing our programs while a
// foreign tc filter stays.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as L from '../../src/dataplane/ebpf/layout.js';
import { NetnsCluster } from '../netns/cluster.js';
import { nsRun } from '../netns/spawn.js';
import { podsOf } from '../netns/e2e.js';
import { BpfNode, TEST_PIN_ROOT } from '../ebpf/bpfnode.js';
import { attachForeign } from '../ebpf/foreign.js';
import * as E from '../ebpf/entries.js';
import { assertMasqueradedByNode1 } from '../ebpf/verdict.js';

const VIP = '10.96.0.10';
const NODEPORT = 30080;
const CLUSTER_SET = 2;
/** A NodePort whose one endpoint is node2-a: its masquerade's node ports are filled by a test. */
const NODEPORT_FULL = 30090;
const FULL_SET = 8;
/** The masquerade's own node ports (src/bpf/snat.h). */
const NAT_PORTS = { min: 1024, max: 32767 };

describe('BPF programs with hand-written maps, real packets', { timeout: 120_000 }, () => {
  let c: NetnsCluster;
  let bpf: BpfNode;
  const load = (extra: Record<string, unknown> = {}) =>
    bpf.helper<{ adoption: Array<{ map: string; outcome: string }>; mode: string; attached: string[] }>({
      cmd: 'load',
      pinRoot: TEST_PIN_ROOT,
      ...extra,
    });

  before(async () => {
    c = await NetnsCluster.create({});
    const n1 = c.node('node1');
    bpf = await BpfNode.start(n1.ns);
    const eps = [
      { addr: c.pod('node1-a').ip, port: 8080 },
      { addr: c.pod('node2-a').ip, port: 8080 },
    ];
    const udpEps = eps.map((e) => ({ ...e, port: 5353 }));
    const ops: E.HexOp[] = [
      E.cfg('IPv4', L.CFG_DETECT_CIDR),
      E.podCidr('10.244.0.0', 16),
      E.svcCidr('10.96.0.0', 16),
      ...E.set(CLUSTER_SET, eps),
      ...E.set(CLUSTER_SET + 2, udpEps),
      E.addr(VIP, L.ADDR_SERVICE | L.ADDR_CLUSTER_IP),
      E.addr(n1.ip, L.ADDR_LOCAL | L.ADDR_NODEPORT),
      E.addr(n1.podGateway, L.ADDR_LOCAL),
      E.svc(VIP, 80, 'TCP', { svcId: 1, kind: 'clusterIP', clusterSet: CLUSTER_SET }),
      E.svc(VIP, 53, 'UDP', { svcId: 2, kind: 'clusterIP', clusterSet: CLUSTER_SET + 2 }),
      E.svc('0.0.0.0', NODEPORT, 'TCP', { svcId: 1, kind: 'nodePort', clusterSet: CLUSTER_SET }),
      E.svc('0.0.0.0', NODEPORT, 'UDP', { svcId: 2, kind: 'nodePort', clusterSet: CLUSTER_SET + 2 }),
      ...E.set(FULL_SET, [eps[1]!]),
      E.svc('0.0.0.0', NODEPORT_FULL, 'TCP', { svcId: 9, kind: 'nodePort', clusterSet: FULL_SET }),
    ];
    const r = await load({ ops });
    assert.equal(r.mode, 'tcx');
    assert.ok(r.attached.includes('eth0/ingress') && r.attached.includes('veth0/egress'), JSON.stringify(r.attached));
  });

  after(async () => {
    await bpf?.stop();
    await c?.destroy();
  });

  test('pod -> ClusterIP TCP reaches both endpoints and the endpoints see the pod', async () => {
    const rs = await Promise.all(Array.from({ length: 16 }, () => c.agent('node1-b').then((a) => a.tcp(VIP, 80))));
    assert.ok(
      rs.every((r) => r.ok),
      JSON.stringify(rs),
    );
    assert.deepEqual(podsOf(rs), ['node1-a', 'node2-a']);
    for (const r of rs) if (r.ok) assert.equal(r.reply.src.split(':')[0], c.pod('node1-b').ip);
  });

  test('pod -> ClusterIP UDP is balanced and answered from the service address', async () => {
    const a = await c.agent('node1-b');
    const rs = [];
    for (let i = 0; i < 12; i++) rs.push(await a.udp(VIP, 53));
    assert.ok(
      rs.every((r) => r.ok),
      JSON.stringify(rs),
    );
    assert.deepEqual(podsOf(rs), ['node1-a', 'node2-a']);
  });

  test('the node itself reaches the ClusterIP (DNAT at egress, rerouted)', async () => {
    const a = await c.agent('node1');
    const rs = [];
    for (let i = 0; i < 12; i++) rs.push(await a.tcp(VIP, 80));
    assert.ok(
      rs.every((r) => r.ok),
      JSON.stringify(rs),
    );
    assert.deepEqual(podsOf(rs), ['node1-a', 'node2-a']);
    const u = await a.udp(VIP, 53);
    assert.ok(u.ok, JSON.stringify(u));
  });

  test('external -> NodePort is masqueraded by the programs, with no netfilter NAT', async () => {
    const a = await c.agent('ext');
    const n1 = c.node('node1');
    const rs = [];
    for (let i = 0; i < 12; i++) rs.push(await a.tcp(n1.ip, NODEPORT));
    assertMasqueradedByNode1(rs, n1);
    // Nothing in netfilter did it: node1 has no NAT rule at all.
    const ruleset = await nsRun(n1.ns, ['nft', 'list', 'ruleset']);
    assert.doesNotMatch(ruleset.stdout, /masquerade|snat|type nat/);
  });

  test('a masquerade entry left from a finished connection yields to a connection conntrack knows', async () => {
    // The entry that takes a masqueraded connection's replies back to its client (CT_UNMASQ) lives until the
    // LRU drops it. When netfilter later puts another connection on the same node port towards the same
    // endpoint (here node1's own socket on that port; after a handover, another mode's masquerade), its
    // replies are conntrack's: the stale entry must let them through, not send them to the old client.
    const n1 = c.node('node1');
    const ep = c.pod('node2-a').ip;
    const port = 20000;
    const key = { saddr: ep, daddr: n1.ip, sport: 8080, dport: port, proto: 'TCP' as const };
    const ops = [E.ct(key, { addr: '203.0.113.9', port: 4444, flags: L.CT_UNMASQ })];
    await bpf.helper({ cmd: 'apply', pinRoot: TEST_PIN_ROOT, ops });
    // The mode loads no conntrack; a rule with a ct expression does.
    const ctTable =
      'table ip kpt_ct_on {\n chain out { type filter hook output priority 0; ct state new accept; }\n}\n';
    await nsRun(n1.ns, ['nft', '-f', '-'], { input: ctTable });
    try {
      const a = await c.agent('node1');
      const r = (await a.request('tcp', { host: ep, port: 8080, bind: n1.ip, localPort: port })) as {
        ok: boolean;
        reply?: { pod: string };
        error?: string;
      };
      assert.ok(r.ok, JSON.stringify(r));
      assert.equal(r.reply?.pod, 'node2-a');
      const left = await bpf.helper<{ entries: Array<[string, string]> }>({
        cmd: 'dump',
        pinRoot: TEST_PIN_ROOT,
        map: 'ct',
      });
      assert.ok(!left.entries.some(([k]) => k === L.hex(L.encodeCtKey(key))), 'the stale entry is gone');
    } finally {
      await nsRun(n1.ns, ['nft', 'delete', 'table', 'ip', 'kpt_ct_on']);
    }
  });

  // A masqueraded connection to node2-a holds a node port (its reply entry: node2-a:8080 -> node1:port).
  const natKey = (port: number) => ({
    saddr: c.pod('node2-a').ip,
    daddr: c.node('node1').ip,
    sport: 8080,
    dport: port,
    proto: 'TCP' as const,
  });
  const ctEntries = async () =>
    (
      await bpf.helper<{ entries: Array<[string, string]> }>({ cmd: 'dump', pinRoot: TEST_PIN_ROOT, map: 'ct' })
    ).entries.map(([k, v]) => ({ key: L.decodeCtKey(L.unhex(k)), value: L.decodeCtValue(L.unhex(v)) }));
  const drops = async () =>
    Number((await bpf.helper<{ stats: string[] }>({ cmd: 'stats', pinRoot: TEST_PIN_ROOT })).stats[L.STAT.drop]);

  test("a masqueraded connection's FINs are noted in its reply entry", async () => {
    const a = await c.agent('ext');
    const r = await a.tcp(c.node('node1').ip, NODEPORT_FULL);
    assert.ok(r.ok, JSON.stringify(r));
    const ext = c.external.ip;
    let e;
    for (let i = 0; i < 20; i++) {
      e = (await ctEntries()).find((x) => x.value.flags & L.CT_UNMASQ && x.value.addr === ext);
      if (e && (e.value.closing ?? 0) & L.CLOSE_FIN_CLIENT && (e.value.closing ?? 0) & L.CLOSE_FIN_ENDPOINT) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    assert.ok(e, 'the reply entry of the connection');
    assert.equal(
      (e.value.closing ?? 0) & (L.CLOSE_FIN_CLIENT | L.CLOSE_FIN_ENDPOINT),
      L.CLOSE_FIN_CLIENT | L.CLOSE_FIN_ENDPOINT,
    );
  });

  test('with every node port towards the endpoint taken, a connection takes over one whose connection is over', async () => {
    const n1 = c.node('node1');
    const ep = c.pod('node2-a').ip;
    // Another client's connection on every port (203.0.113.0/24 never sends anything here).
    const client = (port: number) => `203.0.113.${port % 250}`;
    const fill = (closing: number) => {
      const ops: E.HexOp[] = [];
      for (let port = NAT_PORTS.min; port <= NAT_PORTS.max; port++) {
        ops.push(E.ct(natKey(port), { addr: client(port), port, flags: L.CT_UNMASQ, closing }));
        const out = { saddr: client(port), daddr: ep, sport: port, dport: 8080, proto: 'TCP' as const };
        ops.push(E.ct(out, { addr: n1.ip, port, flags: L.CT_REPLY | L.CT_AT_EGRESS }));
      }
      return bpf.helper({ cmd: 'apply', pinRoot: TEST_PIN_ROOT, ops });
    };
    const a = await c.agent('ext');
    // All of them open: no port to take, the SYN (and its retransmit) is dropped.
    await fill(0);
    const before = await drops();
    const none = await a.tcp(n1.ip, NODEPORT_FULL, { timeoutMs: 1500 });
    assert.equal(none.ok, false, JSON.stringify(none));
    assert.ok((await drops()) > before, 'dropped for want of a port');
    // All of them over (FINs both ways): the connection takes one.
    await fill(L.CLOSE_FIN_CLIENT | L.CLOSE_FIN_ENDPOINT);
    const r = await a.tcp(n1.ip, NODEPORT_FULL);
    assert.ok(r.ok, JSON.stringify(r));
    const [seen, seenPort] = r.reply.src.split(':');
    assert.deepEqual([r.reply.pod, seen], ['node2-a', n1.ip], 'masqueraded by node1');
    const all = await ctEntries();
    const mine = all.filter((x) => x.key.saddr === ep && x.value.flags & L.CT_UNMASQ && x.value.addr === c.external.ip);
    assert.equal(mine.length, 1, `reply entries for ext: ${mine.map((x) => x.key.dport).join(',')}`);
    const port = mine[0]!.key.dport;
    assert.equal(port, Number(seenPort), 'the port the endpoint saw');
    // The old connection's entry that rewrote its source went with its port; the others' stay.
    const outs = all.filter((x) => x.key.daddr === ep && x.key.saddr.startsWith('203.0.113.'));
    assert.equal(outs.length, NAT_PORTS.max - NAT_PORTS.min, 'one old client entry gone');
    assert.ok(!outs.some((x) => x.key.sport === port), 'the one of the port taken over');
  });

  test('a port the ClusterIP does not define is rejected; an unallocated ServiceCIDR address is dropped', async () => {
    const a = await c.agent('node1-b');
    const t = await a.tcp(VIP, 81, { timeoutMs: 1500 });
    assert.deepEqual([t.ok, t.ok ? '' : t.error], [false, 'ECONNREFUSED']);
    const u = await a.udp(VIP, 54, { timeoutMs: 1500 });
    assert.deepEqual([u.ok, u.ok ? '' : u.error], [false, 'ECONNREFUSED']);
    const d = await a.tcp('10.96.0.99', 80, { timeoutMs: 800 });
    assert.deepEqual([d.ok, d.ok ? '' : d.error], [false, 'ETIMEDOUT']);
  });

  test('a UDP reply to the node on a NodePort number is not taken for a new NodePort flow', async () => {
    // node1 sends from local port NODEPORT to the ext echo server; the answer
    // arrives at node1:NODEPORT/UDP, where a NodePort is defined.
    const ext = await c.agent('ext');
    await ext.serve([], [7777]);
    const r = await (await c.agent('node1')).udp(c.external.ip, 7777, { localPort: NODEPORT });
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.reply.pod, 'ext');
  });

  test('a second load adopts the pinned maps; a held connection survives it', async () => {
    const a = await c.agent('node1-b');
    const o = await a.open('held', VIP, 80);
    assert.ok(o.ok, JSON.stringify(o));
    const before = await a.send('held');
    assert.ok(before.ok);
    const r = await load();
    assert.ok(
      r.adoption.every((x) => x.outcome === 'adopted'),
      JSON.stringify(r.adoption),
    );
    const again = await a.send('held');
    assert.ok(again.ok, JSON.stringify(again));
    assert.equal(again.ok && again.reply.pod, before.ok && before.reply.pod);
    await a.closeConn('held');
  });

  test('cleanup removes our programs and pins, and leaves foreign tc programs alone', async () => {
    // A foreign cls_bpf filter and a foreign tcx program on eth0, next to ours.
    await attachForeign(bpf, 'ingress', 7);
    const before = await bpf.helper<{ ingress: string[] }>({ cmd: 'programs', ifname: 'eth0' });
    assert.deepEqual(before.ingress, ['kpt_ingress', 'foreign_tc'], 'ours first, then the foreign one');

    const res = await bpf.helper<{ removed: string[]; attachedRightAfter: string[]; held: number }>({
      cmd: 'cleanup',
      pinRoot: TEST_PIN_ROOT,
    });
    assert.ok(
      res.removed.some((x) => x.startsWith('tcx-')),
      JSON.stringify(res.removed),
    );
    // Detached when cleanup returns, even with the links held open elsewhere (the helper holds them),
    // not whenever the kernel gets round to freeing unpinned links.
    assert.ok(res.held >= 2, `links held: ${res.held}`);
    assert.deepEqual(
      res.attachedRightAfter.filter((p) => p.includes(':kpt_')),
      [],
    );
    const after = await bpf.helper<{ ingress: string[]; egress: string[] }>({ cmd: 'programs', ifname: 'eth0' });
    assert.deepEqual(after, { ingress: ['foreign_tc'], egress: [] });
    const f = await bpf.exec(['tc', 'filter', 'show', 'dev', 'eth0', 'ingress']);
    assert.match(f.stdout, /pref 7 bpf .*foreign\.o:\[tc\] direct-action/);
    const ls = await bpf.exec(['ls', '/sys/fs/bpf'], { allowFailure: true });
    const left = ls.stdout.trim().split('\n');
    assert.ok(left.includes('foreign-tcx') && !left.includes('kube-proxy-ts'), `pins left: ${left.join(' ')}`);
    // Without our programs the ClusterIP goes nowhere.
    const t = await (await c.agent('node1-b')).tcp(VIP, 80, { timeoutMs: 800 });
    assert.equal(t.ok, false);
  });
});
