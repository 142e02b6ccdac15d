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
