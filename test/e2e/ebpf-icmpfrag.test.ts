// The tc programs with real packets that are not plain TCP or UDP segments:
// ICMP errors about translated connections (path MTU discovery through a
// ClusterIP) and fragments of translated datagrams, both directions, IPv4 and
// IPv6.
// Hand-written maps as in ebpf-packets.test.ts; node1 runs the programs, the
// one endpoint is a pod on node2, so every packet of a connection crosses
// node1's eth0, where the tests narrow the path.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as L from '../../src/dataplane/ebpf/layout.js';
import { NetnsCluster } from '../netns/cluster.js';
import { nsRun } from '../netns/spawn.js';
import { BpfNode, TEST_PIN_ROOT } from '../ebpf/bpfnode.js';
import * as E from '../ebpf/entries.js';

const CLUSTER_SET = 2;
const NODEPORT = 30080;

/** The addresses of one family: IPv4, or IPv6 in a dual-stack cluster. */
interface Family {
  readonly name: 'IPv4' | 'IPv6';
  readonly vip: string;
  readonly podCidr: readonly [string, number];
  readonly svcCidr: readonly [string, number];
  readonly ipv6: boolean;
}
const V4: Family = {
  name: 'IPv4',
  vip: '10.96.0.10',
  podCidr: ['10.244.0.0', 16],
  svcCidr: ['10.96.0.0', 16],
  ipv6: false,
};
const V6: Family = {
  name: 'IPv6',
  vip: 'fd00:10:96::a',
  podCidr: ['fd00:10:244::', 48],
  svcCidr: ['fd00:10:96::', 112],
  ipv6: true,
};

/** A cluster whose node1 runs the programs, with a TCP and a UDP ClusterIP on node2-a; the stats reader. */
function setUp(f: Family) {
  const ctx = {} as { c: NetnsCluster; bpf: BpfNode };
  before(async () => {
    const c = (ctx.c = await NetnsCluster.create({ ipv6: f.ipv6 }));
    const n1 = c.node('node1');
    const bpf = (ctx.bpf = await BpfNode.start(n1.ns));
    const v6 = f.name === 'IPv6';
    const ep = v6 ? c.pod('node2-a').ip6! : c.pod('node2-a').ip;
    const ops: E.HexOp[] = [
      E.cfg(f.name, L.CFG_DETECT_CIDR),
      E.podCidr(...f.podCidr),
      E.svcCidr(...f.svcCidr),
      ...E.set(CLUSTER_SET, [{ addr: ep, port: 8080 }]),
      ...E.set(CLUSTER_SET + 2, [{ addr: ep, port: 5353 }]),
      E.addr(f.vip, L.ADDR_SERVICE | L.ADDR_CLUSTER_IP),
      E.addr(v6 ? n1.ip6! : n1.ip, L.ADDR_LOCAL | L.ADDR_NODEPORT),
      E.addr(v6 ? n1.podGateway6! : n1.podGateway, L.ADDR_LOCAL),
      E.svc(f.vip, 80, 'TCP', { svcId: 1, kind: 'clusterIP', clusterSet: CLUSTER_SET }),
      E.svc(f.vip, 53, 'UDP', { svcId: 2, kind: 'clusterIP', clusterSet: CLUSTER_SET + 2 }),
      E.svc(v6 ? '::' : '0.0.0.0', NODEPORT, 'TCP', { svcId: 1, kind: 'nodePort', clusterSet: CLUSTER_SET }),
    ];
    await bpf.helper({ cmd: 'load', pinRoot: TEST_PIN_ROOT, ops });
  });
  after(async () => {
    await ctx.bpf?.stop();
    await ctx.c?.destroy();
  });
  const stats = async () =>
    (await ctx.bpf.helper<{ stats: string[] }>({ cmd: 'stats', pinRoot: TEST_PIN_ROOT })).stats.map(Number);
  return { ctx, stats };
}

/**
 * node1 reaches node2's pods through a 1280-byte path; the two pods' own links are 1500, so both ends agree
 * on full-size segments and only node1's error can tell the client to send less. The error quotes the
 * segment as node1 forwarded it (to the endpoint): untranslated, the client's stack finds no socket for it
 * and the upload stalls.
 */
async function pmtuUpload(
  f: Family,
  ctx: { c: NetnsCluster },
  stats: () => Promise<number[]>,
  via: 'clusterIP' | 'nodePort' = 'clusterIP',
): Promise<void> {
  const { c } = ctx;
  const n1 = c.node('node1');
  const n2 = c.node('node2');
  const fam = f.ipv6 ? ['-6'] : [];
  const route = [...fam, 'route', 'replace', f.ipv6 ? n2.podCIDR6! : n2.podCIDR, 'via', f.ipv6 ? n2.ip6! : n2.ip];
  await nsRun(n1.ns, ['ip', ...route, 'mtu', 'lock', '1280']);
  try {
    const before = await stats();
    const data = 'x'.repeat(60_000);
    const r =
      via === 'clusterIP'
        ? await (await c.agent('node1-b')).tcp(f.vip, 80, { data, timeoutMs: 8000 })
        : await (await c.agent('ext')).tcp(n1.ip, NODEPORT, { data, timeoutMs: 8000 });
    assert.ok(r.ok, JSON.stringify(r).slice(0, 300));
    assert.equal(r.reply.pod, 'node2-a');
    assert.equal(r.reply.data.length, data.length);
    if (via === 'nodePort') assert.equal(r.reply.src.split(':')[0], n1.ip, 'masqueraded to the node address');
    const after = await stats();
    assert.ok(
      after[L.STAT.icmp]! > before[L.STAT.icmp]!,
      `ICMP errors translated: ${before[L.STAT.icmp]} -> ${after[L.STAT.icmp]}`,
    );
  } finally {
    await nsRun(n1.ns, ['ip', ...route]);
  }
}

/**
 * 3000 bytes leave the pod as three fragments; only the first has the ports. The echo comes back (3000 bytes
 * and the reply's own fields) fragmented by node2-a, reassembled by node1's conntrack and fragmented again
 * towards the pod, where the reply's source must read as the service address.
 */
async function fragmentedEcho(f: Family, ctx: { c: NetnsCluster }, stats: () => Promise<number[]>): Promise<void> {
  const { c } = ctx;
  const before = await stats();
  const data = 'y'.repeat(3000);
  const a = await c.agent('node1-b');
  const pod = f.ipv6 ? c.pod('node1-b').ip6! : c.pod('node1-b').ip;
  for (let i = 0; i < 3; i++) {
    const r = await a.udp(f.vip, 53, { data, timeoutMs: 3000 });
    assert.ok(r.ok, JSON.stringify(r).slice(0, 300));
    assert.equal(r.reply.pod, 'node2-a');
    assert.equal(r.reply.data, data);
    assert.equal(r.peer, `${f.vip}:53`);
    assert.ok(r.reply.src.startsWith(`${pod}:`), `the endpoint sees the pod: ${r.reply.src}`);
  }
  const after = await stats();
  // Per exchange at least two later fragments each way (3000 bytes at a 1500-byte MTU).
  assert.ok(
    after[L.STAT.frag]! - before[L.STAT.frag]! >= 12,
    `later fragments: ${before[L.STAT.frag]} -> ${after[L.STAT.frag]}`,
  );
}

describe('ICMP errors and IPv4 fragments of translated connections, real packets', { timeout: 120_000 }, () => {
  const { ctx, stats } = setUp(V4);

  test('path MTU discovery through a ClusterIP: "fragmentation needed" about the endpoint reaches the socket', () =>
    pmtuUpload(V4, ctx, stats));

  test('path MTU discovery through a masqueraded NodePort: the error reaches the external client', () =>
    pmtuUpload(V4, ctx, stats, 'nodePort'));

  test('a UDP datagram larger than the path is fragmented; every fragment is translated, both ways', () =>
    fragmentedEcho(V4, ctx, stats));
});

describe('ICMPv6 errors and IPv6 fragments of translated connections, real packets', { timeout: 120_000 }, () => {
  const { ctx, stats } = setUp(V6);

  test('an IPv6 datagram larger than the path is fragmented; every fragment is translated, both ways', () =>
    fragmentedEcho(V6, ctx, stats));

  test('path MTU discovery through an IPv6 ClusterIP: "packet too big" about the endpoint reaches the socket', () =>
    pmtuUpload(V6, ctx, stats));
});
