// Direct server return (--ebpf-lb-mode=dsr) with real packets: a two-node
// namespace cluster where node1 and node2 both run the tc programs with
// CFG_DSR and the same Services, written by hand as each node's proxy would
// (a port's local set holds that node's own endpoints); node1 also runs
// kpt_xdp on its uplink. The external client ext connects to node1's
// NodePorts; its veth sends full checksums, so XDP can take packets.
//
// Covers: an endpoint on node2 over TCP and UDP, IPv4 and IPv6 (the
// cluster is dual-stack): the endpoint sees ext's
// own address, ext gets its answers from node1IP:NodePort, node1 writes
// the option on each connection's first packet and node2 the reply entry
// from it, and not one packet from the endpoint enters node1 (a netfilter
// counter on node1's uplink, by source address); the SYN goes through tc,
// the rest of the connection through XDP. An endpoint on node1: DNAT only,
// no option. snat mode (CFG_DSR off): the endpoint on node2 sees node1's
// address and its replies come back through node1, as before.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as L from '../../src/dataplane/ebpf/layout.js';
import { NetnsCluster } from '../netns/cluster.js';
import { nsRun } from '../netns/spawn.js';
import { podsOf } from '../netns/e2e.js';
import type { ClientResult } from '../netns/agentclient.js';
import { type BpfNode, TEST_PIN_ROOT } from '../ebpf/bpfnode.js';
import { type DsrPort, setDsr, startDsrNodes } from '../ebpf/dsrnodes.js';

const NP_REMOTE = 30090; // TCP and UDP: the one endpoint is node2-a
const NP_LOCAL = 30091; // TCP: the one endpoint is node1-a
const SVC_REMOTE = 1;
const SVC_REMOTE_UDP = 2;
const SVC_LOCAL = 3;

interface Stats {
  new: number;
  dsrOpt: number;
  dsrReply: number;
  xdpNew: number;
  xdpHit: number;
}

describe('DSR for external traffic with real packets between two nodes', { timeout: 180_000 }, () => {
  let c: NetnsCluster;
  let n1: BpfNode;
  let n2: BpfNode;
  const ext = () => c.external.ip;
  const node1IP = () => c.node('node1').ip;

  const PORTS: DsrPort[] = [
    { svcId: SVC_REMOTE, nodePort: NP_REMOTE, proto: 'TCP', pod: 'node2-a', port: 8080 },
    { svcId: SVC_REMOTE_UDP, nodePort: NP_REMOTE, proto: 'UDP', pod: 'node2-a', port: 5353 },
    { svcId: SVC_LOCAL, nodePort: NP_LOCAL, proto: 'TCP', pod: 'node1-a', port: 8080 },
  ];

  const stats = async (node: BpfNode): Promise<Stats> => {
    const s = (await node.helper<{ stats: string[] }>({ cmd: 'stats', pinRoot: TEST_PIN_ROOT })).stats.map(Number);
    return {
      new: s[L.STAT.new]!,
      dsrOpt: s[L.STAT.dsrOpt]!,
      dsrReply: s[L.STAT.dsrReply]!,
      xdpNew: s[L.STAT.xdpNew]!,
      xdpHit: s[L.STAT.xdpHit]!,
    };
  };
  /** Packets from node2-a that entered node1 by its uplink (a netdev ingress counter, see before()). */
  const fromEndpoint = async (): Promise<number> => {
    const out = (await n1.exec(['nft', 'list', 'chain', 'netdev', 'kpt_dsr_test', 'in'])).stdout;
    return [...out.matchAll(/counter packets (\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  };
  /** What fn changed: both nodes' counters and the packets from the endpoint seen on node1. */
  const delta = async <T>(fn: () => Promise<T>) => {
    const [b1, b2, bf] = [await stats(n1), await stats(n2), await fromEndpoint()];
    const r = await fn();
    const [a1, a2, af] = [await stats(n1), await stats(n2), await fromEndpoint()];
    const sub = (a: Stats, b: Stats) =>
      Object.fromEntries(Object.keys(a).map((k) => [k, a[k as keyof Stats] - b[k as keyof Stats]])) as unknown as Stats;
    return { r, node1: sub(a1, b1), node2: sub(a2, b2), fromEndpoint: af - bf };
  };
  const tcp = async (port: number, n = 8, dst = node1IP()) => {
    const a = await c.agent('ext');
    const rs: ClientResult[] = [];
    for (let i = 0; i < n; i++) rs.push(await a.tcp(dst, port, { timeoutMs: 1500 }));
    return rs;
  };
  const udp = async (port: number, n = 6, dst = node1IP()) => {
    const a = await c.agent('ext');
    const rs: ClientResult[] = [];
    for (let i = 0; i < n; i++) rs.push(await a.udp(dst, port, { timeoutMs: 1500 }));
    return rs;
  };
  /** The address of "address:port" (IPv6 unbracketed, as the agents write it). */
  const hostOf = (s: string) => s.slice(0, s.lastIndexOf(':'));
  const allOk = (rs: readonly ClientResult[]) =>
    assert.ok(
      rs.every((x) => x.ok),
      JSON.stringify(rs),
    );
  const seenSources = (rs: readonly ClientResult[]) => [...new Set(rs.map((x) => (x.ok ? hostOf(x.reply.src) : '')))];

  before(async () => {
    c = await NetnsCluster.create({ ipv6: true });
    await nsRun(c.external.ns, ['ethtool', '-K', 'eth0', 'tx', 'off']);
    const started = await startDsrNodes(c, PORTS, true);
    [n1, n2] = [started.n1, started.n2];
    assert.deepEqual(started.xdp, ['eth0 (native)']);
    const script = [
      'add table netdev kpt_dsr_test',
      'add chain netdev kpt_dsr_test in { type filter hook ingress device eth0 priority 0; }',
      `add rule netdev kpt_dsr_test in ip saddr ${c.pod('node2-a').ip} counter`,
      `add rule netdev kpt_dsr_test in ip6 saddr ${c.pod('node2-a').ip6!} counter`,
    ].join('\n');
    await n1.exec(['nft', '-f', '-'], { input: script });
  });

  after(async () => {
    await n1?.stop();
    await n2?.stop();
    await c?.destroy();
  });

  test('TCP to an endpoint on node2: DNAT only, the option on the SYN, node2 answers ext directly', async () => {
    const { r: rs, node1, node2, fromEndpoint } = await delta(() => tcp(NP_REMOTE));
    allOk(rs);
    assert.deepEqual(podsOf(rs), ['node2-a']);
    assert.deepEqual(seenSources(rs), [ext()], 'the endpoint sees the client itself');
    for (const x of rs) if (x.ok) assert.equal(x.peer, `${node1IP()}:${NP_REMOTE}`);
    assert.equal(fromEndpoint, 0, 'no packet from the endpoint entered node1');
    assert.equal(node1.dsrOpt, rs.length, 'node1 wrote the option once per connection');
    assert.equal(node2.dsrReply, rs.length, 'node2 wrote a reply entry per connection');
    assert.equal(node1.xdpNew, 0, 'XDP leaves the SYN to tc, which adds the option');
    assert.ok(node1.new >= rs.length, `tc balanced them (${node1.new})`);
    assert.ok(node1.xdpHit >= 2 * rs.length, `XDP translated their later packets (${node1.xdpHit})`);
    assert.equal(node2.new, 0, 'node2 balanced nothing');
  });

  test('UDP to an endpoint on node2: the reply comes from node1IP:NodePort, not through node1', async () => {
    const { r: rs, node1, node2, fromEndpoint } = await delta(() => udp(NP_REMOTE));
    allOk(rs);
    assert.deepEqual(podsOf(rs), ['node2-a']);
    assert.deepEqual(seenSources(rs), [ext()]);
    for (const x of rs) if (x.ok) assert.equal(x.peer, `${node1IP()}:${NP_REMOTE}`, 'recvmsg: the reply source');
    assert.equal(fromEndpoint, 0);
    assert.equal(node1.dsrOpt, rs.length);
    assert.equal(node2.dsrReply, rs.length);
  });

  test('IPv6, TCP and UDP to an endpoint on node2: the option in a destination-options header', async () => {
    const dst = c.node('node1').ip6!;
    const {
      r: rs,
      node1,
      node2,
      fromEndpoint,
    } = await delta(async () => [...(await tcp(NP_REMOTE, 6, dst)), ...(await udp(NP_REMOTE, 4, dst))]);
    allOk(rs);
    assert.deepEqual(podsOf(rs), ['node2-a']);
    assert.deepEqual(seenSources(rs), [c.external.ip6!], 'the endpoint sees the client itself');
    for (const x of rs) if (x.ok) assert.equal(x.peer, `${dst}:${NP_REMOTE}`);
    assert.equal(fromEndpoint, 0, 'no packet from the endpoint entered node1');
    assert.equal(node1.dsrOpt, rs.length);
    assert.equal(node2.dsrReply, rs.length);
  });

  test('node2 keeps the entry the option asked for: endpoint -> client, source back to node1IP:NodePort', async () => {
    const a = await c.agent('ext');
    const r = await a.udp(node1IP(), NP_REMOTE, { localPort: 41414, timeoutMs: 1500 });
    assert.ok(r.ok, JSON.stringify(r));
    const { entries } = await n2.helper<{ entries: [string, string][] }>({
      cmd: 'dump',
      pinRoot: TEST_PIN_ROOT,
      map: 'ct',
    });
    const want = L.hex(
      L.encodeCtKey({ saddr: c.pod('node2-a').ip, daddr: ext(), sport: 5353, dport: 41414, proto: 'UDP' }),
    );
    const e = entries.find(([k]) => k === want);
    assert.ok(e, 'the reply entry on node2');
    const v = L.decodeCtValue(L.unhex(e[1]));
    assert.deepEqual([v.addr, v.port, v.flags], [node1IP(), NP_REMOTE, L.CT_REPLY | L.CT_AT_EGRESS]);
  });

  test('an endpoint on node1: DNAT only, no option, the endpoint sees the client', async () => {
    const { r: rs, node1, node2 } = await delta(() => tcp(NP_LOCAL));
    allOk(rs);
    assert.deepEqual(podsOf(rs), ['node1-a']);
    assert.deepEqual(seenSources(rs), [ext()]);
    assert.equal(node1.dsrOpt, 0);
    assert.equal(node2.dsrReply, 0);
  });

  test('snat mode (the default): the endpoint on node2 sees node1, its replies come back through node1', async () => {
    await setDsr([n1, n2], false, true);
    const { r: rs, node1, node2, fromEndpoint } = await delta(() => tcp(NP_REMOTE));
    allOk(rs);
    assert.deepEqual(seenSources(rs), [node1IP()]);
    assert.ok(fromEndpoint >= 2 * rs.length, `the replies entered node1 (${fromEndpoint})`);
    assert.deepEqual([node1.dsrOpt, node2.dsrReply], [0, 0]);
  });
});
