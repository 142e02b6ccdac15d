// The XDP program with real packets from outside the node: a two-node
// namespace cluster where node1 runs the tc programs on every interface and
// kpt_xdp on its uplink (eth0, which holds the node's IP), loaded and
// attached by the platform layer from a helper process, with hand-written
// map contents. The external client (ext) sends full checksums, as packets
// from a real network arrive (its veth's checksum offload is off); one test
// turns the offload back on to show that what XDP cannot handle reaches tc.
//
// The cluster is dual-stack, for the masquerade's IPv6 case.
//
// Covers: XDP attached natively to the uplink only; NodePort with eTP
// Cluster, IPv4 and IPv6 (balanced in XDP, which sets up the masquerade
// too: the endpoints, on node1 and node2, see the node's address and a port
// of the programs' own range, and kpt_ct holds the masquerade's two entries
// for each connection) and eTP Local
// (the endpoint sees the client; balanced in XDP); a load-balancer IP with
// source ranges (an allowed client connects through XDP, a denied one gets
// nothing and the XDP drop counter rises); CHECKSUM_PARTIAL packets left
// to tc; with --ebpf-xdp=off the program is taken off and its counters
// stay still; cleanup removes it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as L from '../../src/dataplane/ebpf/layout.js';
import { NetnsCluster } from '../netns/cluster.js';
import { ip, nsRun } from '../netns/spawn.js';
import { podsOf } from '../netns/e2e.js';
import { assertMasqueradedByNode1 } from '../ebpf/verdict.js';
import { BpfNode, TEST_PIN_ROOT } from '../ebpf/bpfnode.js';
import * as E from '../ebpf/entries.js';

const NP_CLUSTER = 30080;
const NP_LOCAL = 30081;
const LB_IP = '198.51.100.10';
const CLUSTER_SET = 2;
const CLUSTER_SET6 = 8;
const EP_PORT = 8080;
const LOCAL_SET = 6;
const LB_SVC = 4;

interface LoadResult {
  xdp: { attached: string[]; updated: string[]; removed: string[]; foreign: string[] } | null;
}

describe('XDP on the uplink with real packets from outside', { timeout: 180_000 }, () => {
  let c: NetnsCluster;
  let bpf: BpfNode;
  const load = (xdp: 'auto' | 'off', ops: E.HexOp[] = []) =>
    bpf.helper<LoadResult>({ cmd: 'load', pinRoot: TEST_PIN_ROOT, xdp, nodeIPs: [c.node('node1').ip], ops });
  const stats = async () => {
    const s = (await bpf.helper<{ stats: string[] }>({ cmd: 'stats', pinRoot: TEST_PIN_ROOT })).stats.map(Number);
    return {
      xdpNew: s[L.STAT.xdpNew]!,
      xdpHit: s[L.STAT.xdpHit]!,
      xdpPass: s[L.STAT.xdpPass]!,
      xdpDrop: s[L.STAT.xdpDrop]!,
      tcNew: s[L.STAT.new]!,
    };
  };
  const delta = async <T>(fn: () => Promise<T>) => {
    const before = await stats();
    const r = await fn();
    const now = await stats();
    const d = Object.fromEntries(Object.entries(now).map(([k, v]) => [k, v - before[k as keyof typeof now]]));
    return { r, d: d as typeof now };
  };
  const txChecksum = (on: boolean) => nsRun(c.external.ns, ['ethtool', '-K', 'eth0', 'tx', on ? 'on' : 'off']);
  const linkShow = async (ifname: string) => (await bpf.exec(['ip', '-d', 'link', 'show', 'dev', ifname])).stdout;
  const connect = async (port: number, dst = c.node('node1').ip, n = 12, bind?: string) => {
    const a = await c.agent('ext');
    const rs = [];
    for (let i = 0; i < n; i++) rs.push(await a.tcp(dst, port, { ...(bind ? { bind } : {}), timeoutMs: 1500 }));
    return rs;
  };

  before(async () => {
    c = await NetnsCluster.create({ ipv6: true });
    const n1 = c.node('node1');
    bpf = await BpfNode.start(n1.ns);
    const eps = [
      { addr: c.pod('node1-a').ip, port: EP_PORT },
      { addr: c.pod('node2-a').ip, port: EP_PORT },
    ];
    const eps6 = [
      { addr: c.pod('node1-a').ip6!, port: EP_PORT },
      { addr: c.pod('node2-a').ip6!, port: EP_PORT },
    ];
    const local = { clusterSet: CLUSTER_SET, localSet: LOCAL_SET, flags: L.SVC_LOCAL_POLICY };
    const ops: E.HexOp[] = [
      E.cfg('IPv4', L.CFG_DETECT_CIDR),
      E.podCidr('10.244.0.0', 16),
      E.svcCidr('10.96.0.0', 16),
      ...E.set(CLUSTER_SET, eps),
      ...E.set(LOCAL_SET, [eps[0]!]),
      E.addr(n1.ip, L.ADDR_LOCAL | L.ADDR_NODEPORT),
      E.addr(n1.podGateway, L.ADDR_LOCAL),
      E.addr(LB_IP, L.ADDR_SERVICE),
      E.svc('0.0.0.0', NP_CLUSTER, 'TCP', { svcId: 1, kind: 'nodePort', clusterSet: CLUSTER_SET }),
      E.svc('0.0.0.0', NP_LOCAL, 'TCP', { svcId: 3, kind: 'nodePort', ...local }),
      E.svc(LB_IP, 80, 'TCP', {
        svcId: LB_SVC,
        kind: 'loadBalancer',
        ...local,
        flags: local.flags | L.SVC_SOURCE_RANGES,
      }),
      E.lbSrc(LB_SVC, c.external.ip, 32),
      E.cfg('IPv6', L.CFG_DETECT_CIDR),
      E.podCidr('fd00:10:244::', 48),
      E.svcCidr('fd00:10:96::', 112),
      ...E.set(CLUSTER_SET6, eps6),
      E.addr(n1.ip6!, L.ADDR_LOCAL | L.ADDR_NODEPORT),
      E.addr(n1.podGateway6!, L.ADDR_LOCAL),
      E.svc('::', NP_CLUSTER, 'TCP', { svcId: 5, kind: 'nodePort', clusterSet: CLUSTER_SET6 }),
    ];
    await ip(['-n', c.external.ns, 'route', 'add', `${LB_IP}/32`, 'via', n1.ip]);
    await txChecksum(false);
    const r = await load('auto', ops);
    assert.deepEqual(r.xdp, { attached: ['eth0 (native)'], updated: [], removed: [], foreign: [] });
  });

  after(async () => {
    await bpf?.stop();
    await c?.destroy();
  });

  test('the program runs natively on the uplink only, not on pod veths or loopback', async () => {
    assert.match(await linkShow('eth0'), /prog\/xdp id \d+/);
    assert.doesNotMatch(await linkShow('eth0'), /xdpgeneric/);
    const all = (await bpf.exec(['ip', '-o', 'link', 'show'])).stdout.trim().split('\n');
    const withXdp = all.filter((l) => / xdp/.test(l)).map((l) => l.split(':')[1]!.trim().split('@')[0]);
    assert.deepEqual(withXdp, ['eth0']);
  });

  /**
   * For each connection, the masquerade's two entries in kpt_ct (snat.h): endpoint -> node:port, which
   * takes the replies back to the client (CT_UNMASQ), and client -> endpoint, which rewrites the source at
   * egress (CT_REPLY | CT_AT_EGRESS). node:port is what the endpoint saw; the client's port only the
   * first entry knows, and the second must agree with it.
   */
  const assertMasqueradeEntries = async (rs: Awaited<ReturnType<typeof connect>>, v6: boolean) => {
    const { entries } = await bpf.helper<{ entries: [string, string][] }>({
      cmd: 'dump',
      pinRoot: TEST_PIN_ROOT,
      map: 'ct',
    });
    const ct = new Map(entries.map(([k, v]) => [k, L.decodeCtValue(L.unhex(v))]));
    const client = v6 ? c.external.ip6! : c.external.ip;
    for (const r of rs) {
      if (!r.ok) continue;
      const ep = v6 ? c.pod(r.reply.pod).ip6! : c.pod(r.reply.pod).ip;
      const i = r.reply.src.lastIndexOf(':');
      const nat = { addr: r.reply.src.slice(0, i), port: Number(r.reply.src.slice(i + 1)) };
      const key = (saddr: string, sport: number, daddr: string, dport: number) =>
        L.hex(L.encodeCtKey({ saddr, sport, daddr, dport, proto: 'TCP' }));
      const back = ct.get(key(ep, EP_PORT, nat.addr, nat.port));
      assert.ok(back, `an entry ${ep}:${EP_PORT} -> ${r.reply.src}`);
      assert.deepEqual([back.flags & ~L.CT_SEEN_ACK, back.addr], [L.CT_UNMASQ, client], r.reply.src);
      const out = ct.get(key(client, back.port, ep, EP_PORT));
      assert.ok(out, `an entry ${client}:${back.port} -> ${ep}:${EP_PORT}`);
      assert.deepEqual([out.flags, out.addr, out.port], [L.CT_REPLY | L.CT_AT_EGRESS, nat.addr, nat.port]);
    }
  };

  for (const v6 of [false, true]) {
    test(`NodePort, eTP Cluster (${v6 ? 'IPv6' : 'IPv4'}): balanced and masqueraded in XDP`, async () => {
      const n1 = c.node('node1');
      const { r: rs, d } = await delta(() => connect(NP_CLUSTER, v6 ? n1.ip6! : n1.ip));
      assertMasqueradedByNode1(rs, v6 ? { ip: n1.ip6!, podGateway: n1.podGateway6! } : n1);
      assert.equal(d.xdpNew, rs.length, 'every connection balanced in XDP, its masquerade set up there');
      assert.equal(d.tcNew, 0, 'none by tc');
      assert.ok(d.xdpHit >= 2 * rs.length, `XDP translated their later packets (${d.xdpHit})`);
      await assertMasqueradeEntries(rs, v6);
    });
  }

  test('NodePort, eTP Local: the endpoint sees the client; balanced in XDP', async () => {
    const { r: rs, d } = await delta(() => connect(NP_LOCAL));
    assert.ok(
      rs.every((x) => x.ok),
      JSON.stringify(rs),
    );
    assert.deepEqual(podsOf(rs), ['node1-a']);
    for (const x of rs) if (x.ok) assert.equal(x.reply.src.split(':')[0], c.external.ip);
    assert.equal(d.xdpNew, rs.length, 'every connection balanced in XDP');
    assert.equal(d.tcNew, 0, 'none by tc');
  });

  test('a load-balancer IP with source ranges: the allowed client connects, a denied one is dropped in XDP', async () => {
    const ok = await delta(() => connect(80, LB_IP, 4));
    assert.ok(
      ok.r.every((x) => x.ok && x.reply.src.split(':')[0] === c.external.ip),
      JSON.stringify(ok.r),
    );
    assert.equal(ok.d.xdpNew, 4);
    const denied = await delta(() => connect(80, LB_IP, 2, c.external.ip2));
    assert.deepEqual(
      denied.r.map((x) => (x.ok ? 'ok' : x.error)),
      ['ETIMEDOUT', 'ETIMEDOUT'],
    );
    // Each connect's SYN and its retransmits: all dropped in XDP, none balanced anywhere.
    assert.ok(denied.d.xdpDrop >= 2, `XDP drops (${denied.d.xdpDrop})`);
    assert.deepEqual([denied.d.xdpNew, denied.d.tcNew], [0, 0]);
  });

  test('packets whose checksum the sender left to the device (CHECKSUM_PARTIAL) go to tc, and work', async () => {
    await txChecksum(true);
    try {
      const { r: rs, d } = await delta(() => connect(NP_LOCAL, undefined, 6));
      assert.ok(
        rs.every((x) => x.ok && x.reply.src.split(':')[0] === c.external.ip),
        JSON.stringify(rs),
      );
      assert.deepEqual([d.xdpNew, d.xdpHit], [0, 0], 'XDP left every packet alone');
      assert.ok(d.tcNew >= rs.length, `tc balanced them (${d.tcNew})`);
      assert.ok(d.xdpPass > 0);
    } finally {
      await txChecksum(false);
    }
  });

  test('--ebpf-xdp=off: the program comes off the uplink, tc serves everything, XDP counters stay still', async () => {
    const r = await load('off');
    assert.deepEqual(r.xdp?.removed, [`xdp-${await ifindex('eth0')}`]);
    assert.doesNotMatch(await linkShow('eth0'), /prog\/xdp/);
    const { r: rs, d } = await delta(() => connect(NP_LOCAL, undefined, 6));
    assert.ok(
      rs.every((x) => x.ok),
      JSON.stringify(rs),
    );
    assert.deepEqual([d.xdpNew, d.xdpHit, d.xdpPass, d.xdpDrop], [0, 0, 0, 0]);
    assert.ok(d.tcNew >= rs.length);
  });

  test('a restart swaps the program into the pinned link; cleanup takes it off', async () => {
    await load('auto');
    const again = await load('auto');
    assert.deepEqual(again.xdp?.updated, ['eth0'], 'the second load updates the pinned link');
    const res = await bpf.helper<{ removed: string[] }>({ cmd: 'cleanup', pinRoot: TEST_PIN_ROOT });
    assert.ok(
      res.removed.some((x) => x.startsWith('xdp-')),
      JSON.stringify(res.removed),
    );
    assert.doesNotMatch(await linkShow('eth0'), /prog\/xdp/);
  });

  const ifindex = async (name: string) => Number(/^(\d+):/.exec(await linkShow(name))![1]);
});
