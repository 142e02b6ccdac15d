// The Service annotation kube-proxy-ts/lb-algorithm with real packets, in the
// two-node namespace cluster, for each mode that honours it (nftables, ebpf):
//   - round-robin: sequential connections from one client cycle through the
//     endpoints exactly (40 connections over 4 endpoints: 10 each, in turn);
//   - maglev: a flow (client address and port) gets the same endpoint through
//     either node, the very endpoint the Maglev table predicts; when an
//     endpoint leaves, its flows move and the others keep their endpoint
//     (except the few buckets the table itself reassigns, counted);
//   - source-hash: every port of a client gets one endpoint, the same through
//     either node, and a client whose endpoint stays keeps it;
//   - ClientIP affinity still wins: later flows of a client keep the endpoint
//     its first flow was hashed to;
//   - --ipvs-scheduler rr: the proxy says at start which annotation keeps it.
// The predictions use the same pure code the proxy fills its tables with
// (src/dataplane/maglev.ts) and the hash each datapath computes, so a
// mismatch means the kernel does not pick as the proxy planned.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseIP } from '../../src/core/ip.js';
import type { LbAlgorithm } from '../../src/core/lbalgorithm.js';
import { clientHash } from '../../src/dataplane/ebpf/hash.js';
import { DEFAULT_EBPF_OPTIONS } from '../../src/dataplane/ebpf/options.js';
import { CLIENT_HASH_SEED, jhashBytes, maglevTable, reciprocalScale } from '../../src/dataplane/maglev.js';
import { NFT_MAGLEV_M } from '../../src/dataplane/nftables/serviceport.js';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts, type EndpointSpec } from '../netns/fixtures.js';
import type { KubeObject } from '../netns/kube.js';
import { E2E_MODES } from '../netns/proxy.js';

const MODES = (['nftables', 'ebpf'] as const).filter((m) => E2E_MODES.includes(m));

function annotated(o: KubeObject, algorithm: LbAlgorithm): KubeObject {
  return { ...o, metadata: { ...o.metadata, annotations: { 'kube-proxy-ts/lb-algorithm': algorithm } } };
}

/** The pod each client gets from these endpoints (pod name -> ip, all on `port`), as the mode computes it. */
function predictor(
  mode: 'nftables' | 'ebpf',
  algorithm: 'maglev' | 'source-hash',
  pods: ReadonlyArray<{ name: string; ip: string }>,
  port: number,
): (src: string, sport: number) => string {
  const byKey = new Map(pods.map((p) => [`${p.ip}:${port}`, p.name]));
  const canonical = [...byKey.keys()].sort();
  const addrOnly = algorithm === 'source-hash';
  if (mode === 'ebpf') {
    const m = DEFAULT_EBPF_OPTIONS.maglevM;
    const table = maglevTable(canonical, m);
    return (src, sport) => byKey.get(canonical[table[clientHash({ src, sport }, addrOnly) % m]!]!)!;
  }
  const table = maglevTable(canonical, NFT_MAGLEV_M);
  return (src, sport) => {
    const a = [...parseIP(src)!.bytes];
    const data = Uint8Array.from(addrOnly ? a : [...a, sport >> 8, sport & 0xff, 0, 0]);
    return byKey.get(canonical[table[reciprocalScale(jhashBytes(data, CLIENT_HASH_SEED), NFT_MAGLEV_M)]!]!)!;
  };
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

for (const mode of MODES)
  describe(`${mode} mode: kube-proxy-ts/lb-algorithm with real packets`, { concurrency: false }, () => {
    let env: E2EEnv;
    before(async () => {
      env = await E2EEnv.start(mode);
    });
    after(async () => {
      await env?.dispose();
    });
    const ALL = ['node1-a', 'node1-b', 'node2-a', 'node2-b'];
    const eps = (names: readonly string[]): EndpointSpec[] => names.map((n) => ({ pod: env.cluster.pod(n) }));
    const podsOf = (names: readonly string[]) => names.map((n) => ({ name: n, ip: env.cluster.pod(n).ip }));

    /** The pods answering UDP exchanges from ext (source bind, ports) through `via`. */
    const udpPicks = async (extIP: string, via: string, ports: readonly number[], bind?: string) => {
      await env.cluster.routeVia('ext', `${extIP}/32`, via);
      const out: string[] = [];
      for (const p of ports) {
        const r = await env.send('ext', 'udp', extIP, 53, { localPort: p, ...(bind ? { bind } : {}) });
        assert.ok(r.ok, `${via} port ${p}: ${JSON.stringify(r)}`);
        out.push(r.reply.pod);
      }
      return out;
    };

    it('round-robin: 40 connections one after another over 4 endpoints take 10 each, in turn', async () => {
      const extIP = '192.168.122.10';
      await env.apply(
        annotated(
          service({ name: 'lb-rr', clusterIP: '10.96.22.10', ports: webPorts(), externalIPs: [extIP] }),
          'round-robin',
        ),
        endpointSlice('lb-rr', eps(ALL), webPorts()),
      );
      await env.cluster.routeVia('ext', `${extIP}/32`, 'node1');
      await env.waitServedBy('ext', 'tcp', extIP, 80, ALL, {}, 4);
      const rs = await env.sendMany('ext', 'tcp', extIP, 80, 40);
      assert.ok(
        rs.every((r) => r.ok),
        JSON.stringify(rs.filter((r) => !r.ok)),
      );
      const picks = rs.map((r) => (r.ok ? r.reply.pod : ''));
      const count = new Map<string, number>();
      for (const p of picks) count.set(p, (count.get(p) ?? 0) + 1);
      assert.deepEqual([...count.values()], [10, 10, 10, 10], `per endpoint: ${JSON.stringify([...count])}`);
      picks.forEach((p, i) => assert.equal(p, picks[i % 4], `connection ${i} breaks the cycle: ${picks.join(' ')}`));
    });

    it('maglev: a flow gets the predicted endpoint through either node; a leaving endpoint moves only its flows', async (t) => {
      const extIP = '192.168.122.11';
      const client = env.cluster.external.ip;
      await env.apply(
        annotated(
          service({ name: 'lb-mh', clusterIP: '10.96.22.11', ports: webPorts(), externalIPs: [extIP] }),
          'maglev',
        ),
        endpointSlice('lb-mh', eps(ALL), webPorts()),
      );
      const before = predictor(mode, 'maglev', podsOf(ALL), 5353);
      // Both nodes programmed (each answers a fresh port as predicted), then one set of ports through each.
      for (const via of ['node1', 'node2']) {
        let next = via === 'node1' ? 41000 : 41500;
        await env.waitFor(`${via} serves lb-mh`, async () => {
          const p = next++;
          await env.cluster.routeVia('ext', `${extIP}/32`, via);
          const r = await env.send('ext', 'udp', extIP, 53, { localPort: p, timeoutMs: 500 });
          return r.ok && r.reply.pod === before(client, p) ? true : undefined;
        });
      }
      const cross = range(42100, 20);
      const viaNode1 = await udpPicks(extIP, 'node1', cross);
      const viaNode2 = await udpPicks(extIP, 'node2', cross);
      assert.deepEqual(viaNode2, viaNode1, 'the same endpoint for the same flow on both nodes');
      assert.deepEqual(
        viaNode1,
        cross.map((p) => before(client, p)),
        'the endpoint the Maglev table gives',
      );
      assert.ok(new Set(viaNode1).size >= 3, `flows spread: ${viaNode1.join(' ')}`);

      // Conntrack keeps a flow's endpoint on the node that saw it: these ports go through node1 before
      // and through node2 (which has not seen them) after, both nodes having the same table.
      const flows = range(42200, 30);
      const was = await udpPicks(extIP, 'node1', flows);
      assert.deepEqual(
        was,
        flows.map((p) => before(client, p)),
      );
      const count = new Map<string, number>();
      for (const p of was) count.set(p, (count.get(p) ?? 0) + 1);
      const leaving = [...count].sort((a, b) => b[1] - a[1])[0]![0];
      const rest = ALL.filter((n) => n !== leaving);
      await env.apply(endpointSlice('lb-mh', eps(rest), webPorts()));
      const afterwards = predictor(mode, 'maglev', podsOf(rest), 5353);
      let probe = 43000;
      await env.waitFor(`node2 drops ${leaving}`, async () => {
        const ports = range(probe, 8);
        probe += 8;
        const got = await udpPicks(extIP, 'node2', ports);
        return got.every((g, i) => g === afterwards(client, ports[i]!)) ? true : undefined;
      });
      const now = await udpPicks(extIP, 'node2', flows);
      assert.deepEqual(
        now,
        flows.map((p) => afterwards(client, p)),
        'the endpoint the new Maglev table gives',
      );
      const moved = flows.filter((_, i) => now[i] !== was[i]);
      const stray = flows.filter((_, i) => was[i] !== leaving && now[i] !== was[i]);
      assert.ok(!now.includes(leaving));
      assert.equal(moved.length - stray.length, count.get(leaving), `every flow of ${leaving} moved`);
      // Maglev reassigns well under 1% of the other buckets when one of four endpoints leaves.
      assert.ok(stray.length <= 1, `flows of staying endpoints that moved: ${stray.join(' ')}`);
      t.diagnostic(`${mode}: ${moved.length} of ${flows.length} flows moved, ${stray.length} not of ${leaving}`);
    });

    it('source-hash: the client address alone decides, the same through either node', async () => {
      const extIP = '192.168.122.12';
      const { ip: c1, ip2: c2 } = env.cluster.external;
      await env.apply(
        annotated(
          service({ name: 'lb-sh', clusterIP: '10.96.22.12', ports: webPorts(), externalIPs: [extIP] }),
          'source-hash',
        ),
        endpointSlice('lb-sh', eps(ALL), webPorts()),
      );
      const before = predictor(mode, 'source-hash', podsOf(ALL), 5353);
      for (const via of ['node1', 'node2'])
        await env.waitFor(`${via} serves lb-sh`, async () => {
          await env.cluster.routeVia('ext', `${extIP}/32`, via);
          const r = await env.send('ext', 'udp', extIP, 53, { timeoutMs: 500 });
          return r.ok && r.reply.pod === before(c1, 0) ? true : undefined;
        });
      for (const [c, from] of [
        [c1, 44000],
        [c2, 44100],
      ] as const) {
        for (const via of ['node1', 'node2']) {
          const got = await udpPicks(extIP, via, range(via === 'node1' ? from : from + 50, 6), c);
          assert.deepEqual(got, Array(6).fill(before(c, 0)), `${c} through ${via}: one endpoint for every port`);
        }
      }
      // The endpoint of the first client leaves: it moves; the second keeps its endpoint unless it shared it.
      const leaving = before(c1, 0);
      const rest = ALL.filter((n) => n !== leaving);
      await env.apply(endpointSlice('lb-sh', eps(rest), webPorts()));
      const afterwards = predictor(mode, 'source-hash', podsOf(rest), 5353);
      let probe = 45000;
      for (const via of ['node1', 'node2'])
        await env.waitFor(`${via} drops ${leaving}`, async () => {
          const [got] = await udpPicks(extIP, via, [probe++], c1);
          return got === afterwards(c1, 0) ? true : undefined;
        });
      for (const via of ['node1', 'node2']) {
        const one = await udpPicks(extIP, via, range(probe, 4), c1);
        const two = await udpPicks(extIP, via, range(probe, 4), c2);
        probe += 4;
        assert.deepEqual(one, Array(4).fill(afterwards(c1, 0)), `${c1} through ${via}`);
        assert.notEqual(one[0], leaving);
        assert.deepEqual(two, Array(4).fill(afterwards(c2, 0)), `${c2} through ${via}`);
        if (before(c2, 0) !== leaving) assert.equal(two[0], before(c2, 0), `${c2} keeps its endpoint`);
      }
    });

    it('ClientIP affinity still wins: the Maglev endpoint of the first flow keeps the client', async () => {
      const extIP = '192.168.122.13';
      const client = env.cluster.external.ip;
      await env.apply(
        annotated(
          service({
            name: 'lb-aff',
            clusterIP: '10.96.22.13',
            ports: webPorts(),
            externalIPs: [extIP],
            sessionAffinity: 'ClientIP',
            affinityTimeoutSeconds: 300,
          }),
          'maglev',
        ),
        endpointSlice('lb-aff', eps(ALL), webPorts()),
      );
      const predict = predictor(mode, 'maglev', podsOf(ALL), 5353);
      await env.cluster.routeVia('ext', `${extIP}/32`, 'node1');
      // The first flow the rules see is balanced by the hash, and remembered.
      const first = await env.waitFor('node1 serves lb-aff', async () => {
        const r = await env.send('ext', 'udp', extIP, 53, { localPort: 46000, timeoutMs: 500 });
        return r.ok ? r.reply.pod : undefined;
      });
      assert.equal(first.value, predict(client, 46000));
      const ports = range(46001, 12);
      const later = await udpPicks(extIP, 'node1', ports);
      assert.deepEqual(later, Array(12).fill(first.value), 'every later flow of the client');
      assert.ok(
        ports.some((p) => predict(client, p) !== first.value),
        'without affinity some of these ports would go elsewhere',
      );
    });

    it('a proxy started with --ipvs-scheduler says which annotation value keeps that scheduler', async () => {
      const proxy = await env.replaceProxy('node2', ['--ipvs-scheduler', 'rr']);
      const note = /applies to ipvs mode only; annotate Services with kube-proxy-ts\/lb-algorithm: round-robin/;
      await env.waitFor('the start-up note', async () => (note.test(proxy.log()) ? true : undefined));
      await env.replaceProxy('node2', []);
    });
  });
