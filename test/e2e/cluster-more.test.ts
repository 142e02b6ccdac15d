// The behaviours cluster-services.test.ts leaves out, proven with real
// packets on the real kernel, per proxy mode: topology-aware routing (zone
// and node hints), every --detect-local-mode (and none), LoadBalancer
// source ranges for pods / the node / the LB IP itself (packet-flow cases
// 22-24 in docs/packet-flows.md), --masquerade-all, and a dual-stack Service over IPv6.
//
// Who masqueraded is read from the source address the endpoint saw. The
// endpoint is usually node1-b, local to node1, because then a masqueraded
// connection from node1 (or routed through it) leaves by node1-b's veth and
// gets that interface's address, the pod gateway 10.244.1.1, while an
// unmasqueraded one keeps its source (node1's 192.168.77.11, the external
// client's 192.168.77.100, the pod's own IP). With a remote endpoint the
// node's own connections would look the same either way.
//
// SCTP is not covered: this kernel has no SCTP sockets (socket(AF_INET,
// SOCK_STREAM, 132) fails with EPROTONOSUPPORT), so no real SCTP
// connection can be made here.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv, podsOf, srcIP, type E2EOptions } from '../netns/e2e.js';
import { endpointSlice, nodeObject, service, webPorts, type EndpointSpec } from '../netns/fixtures.js';
import { E2E_MODES } from '../netns/proxy.js';
import { nsRun } from '../netns/spawn.js';
import { CLUSTER_CIDR, CLUSTER_CIDR6 } from '../netns/topology.js';

const ZONE = 'topology.kubernetes.io/zone';

/** A describe block with its own cluster + proxies started with opts. */
function withEnv(
  title: string,
  mode: (typeof E2E_MODES)[number],
  opts: E2EOptions,
  body: (env: () => E2EEnv) => void,
): void {
  describe(title, { concurrency: false }, () => {
    let env: E2EEnv | undefined;
    before(async () => {
      env = await E2EEnv.start(mode, opts);
    });
    after(async () => {
      await env?.dispose();
    });
    body(() => {
      if (!env) throw new Error('environment did not start');
      return env;
    });
  });
}

const eps = (env: E2EEnv, ...names: string[]): EndpointSpec[] => names.map((n) => ({ pod: env.cluster.pod(n) }));

/** The source each client's connection to a Service served by node1-b arrived with. */
async function sourcesSeen(env: E2EEnv, ip: string): Promise<{ pod: string; node: string; ext: string }> {
  await env.apply(
    service({ name: 'dl', clusterIP: ip, ports: webPorts() }),
    endpointSlice('dl', eps(env, 'node1-b'), webPorts()),
  );
  const pod = await env.waitReachable('node1-a', 'tcp', ip, 80);
  const node = await env.waitReachable('node1', 'tcp', ip, 80);
  const ext = await env.waitReachable('ext', 'tcp', ip, 80);
  for (const r of [pod, node, ext]) assert.equal(r.value.pod, 'node1-b');
  return { pod: srcIP(pod.value), node: srcIP(node.value), ext: srcIP(ext.value) };
}

/** A working local-traffic detector: pods keep their source, the node and the outside are masqueraded. */
function detectorCases(env: () => E2EEnv): void {
  it('pod -> ClusterIP keeps the pod IP; node -> ClusterIP and external -> ClusterIP are masqueraded', async () => {
    const e = env();
    const seen = await sourcesSeen(e, '10.96.2.10');
    const node1 = e.cluster.node('node1');
    assert.deepEqual(seen, { pod: e.cluster.pod('node1-a').ip, node: node1.podGateway, ext: node1.podGateway });
    // UDP from a pod is not masqueraded either.
    const u = await e.waitReachable('node1-a', 'udp', '10.96.2.10', 53);
    assert.equal(srcIP(u.value), e.cluster.pod('node1-a').ip);
  });
}

for (const mode of E2E_MODES) {
  describe(`more Services on the real kernel (${mode})`, { concurrency: false }, () => {
    withEnv('default flags (--detect-local-mode ClusterCIDR with --cluster-cidr)', mode, {}, (env) => {
      detectorCases(env);

      it("topology: zone hints pick the endpoints hinted for the client node's zone; one endpoint without hints turns hints off", async () => {
        const e = env();
        const [node1, node2] = [e.cluster.node('node1'), e.cluster.node('node2')];
        await e.apply(nodeObject(node1, { [ZONE]: 'zone-a' }), nodeObject(node2, { [ZONE]: 'zone-b' }));
        const pod = (n: string) => e.cluster.pod(n);
        // Hints deliberately disagree with where the pods run: only the hints can explain the choice.
        const hinted: EndpointSpec[] = [
          { pod: pod('node1-b'), zone: 'zone-a', forZones: ['zone-b'] },
          { pod: pod('node2-a'), zone: 'zone-b', forZones: ['zone-a'] },
          { pod: pod('node2-b'), zone: 'zone-b', forZones: ['zone-b'] },
        ];
        const ip = '10.96.2.20';
        await e.apply(
          service({ name: 'zones', clusterIP: ip, ports: webPorts() }),
          endpointSlice('zones', hinted, webPorts()),
        );
        await e.waitServedBy('node1-a', 'tcp', ip, 80, ['node2-a'], {}, 8);
        const b = await e.waitFor('zone-b client uses both zone-b endpoints', async () => {
          const rs = await e.sendMany('node2-a', 'tcp', ip, 80, 12);
          const ps = podsOf(rs);
          return rs.every((r) => r.ok) && ps.length === 2 ? ps : undefined;
        });
        assert.deepEqual(b.value, ['node1-b', 'node2-b']);
        // node2-b loses its hints: the slice no longer qualifies, every endpoint is used from zone-a too.
        await e.apply(
          endpointSlice('zones', [hinted[0]!, hinted[1]!, { pod: pod('node2-b'), zone: 'zone-b' }], webPorts()),
        );
        const all = await e.waitFor('all endpoints used again', async () => {
          const rs = await e.sendMany('node1-a', 'tcp', ip, 80, 20);
          return rs.every((r) => r.ok) && podsOf(rs).length === 3 ? podsOf(rs) : undefined;
        });
        assert.deepEqual(all.value, ['node1-b', 'node2-a', 'node2-b']);
      });

      it("topology: trafficDistribution PreferSameNode with node hints keeps traffic on the client's node", async () => {
        const e = env();
        const pod = (n: string) => e.cluster.pod(n);
        const ip = '10.96.2.21';
        // Zone hints name both zones, so zone filtering alone would keep both endpoints: only node hints explain one.
        const both = ['zone-a', 'zone-b'];
        const hinted: EndpointSpec[] = [
          { pod: pod('node1-b'), zone: 'zone-a', forZones: both, forNodes: ['node1'] },
          { pod: pod('node2-a'), zone: 'zone-b', forZones: both, forNodes: ['node2'] },
        ];
        await e.apply(
          service({ name: 'samenode', clusterIP: ip, ports: webPorts(), trafficDistribution: 'PreferSameNode' }),
          endpointSlice('samenode', hinted, webPorts()),
        );
        await e.waitServedBy('node1-a', 'tcp', ip, 80, ['node1-b'], {}, 8);
        await e.waitServedBy('node2-b', 'tcp', ip, 80, ['node2-a'], {}, 8);
      });

      it('LoadBalancer source ranges (rows 22-24): pod outside the ranges dropped, node inside them served and masqueraded, LB IP as source allowed', async () => {
        const e = env();
        const node1 = e.cluster.node('node1');
        const lbIP = '192.168.90.30';
        const ports = webPorts(30480);
        await e.apply(
          service({
            name: 'lbfw',
            type: 'LoadBalancer',
            clusterIP: '10.96.2.30',
            ports,
            loadBalancerSourceRanges: [`${e.cluster.external.ip}/32`, `${node1.ip}/32`],
          }),
          endpointSlice('lbfw', eps(e, 'node1-b'), ports),
        );
        const svc = await e.kube.call('GET', '/api/v1/namespaces/default/services/lbfw');
        await e.kube.setStatus({ ...svc, kind: 'Service' }, { loadBalancer: { ingress: [{ ip: lbIP }] } });
        // Row 23: the node (inside a range) reaches the LB IP, masqueraded (eTP Cluster).
        const self = await e.waitReachable('node1', 'tcp', lbIP, 80);
        assert.equal(self.value.pod, 'node1-b');
        assert.equal(srcIP(self.value), node1.podGateway, 'node -> LB IP is masqueraded');
        // Row 22: a pod is not in the ranges: dropped (a timeout, not a refusal), although its ClusterIP works.
        const viaClusterIP = await e.waitReachable('node1-a', 'tcp', '10.96.2.30', 80);
        assert.equal(viaClusterIP.value.pod, 'node1-b');
        const denied = await e.sendMany('node1-a', 'tcp', lbIP, 80, 2, { timeoutMs: 1000 });
        assert.deepEqual(
          denied.map((r) => (r.ok ? 'ok' : r.error)),
          ['ETIMEDOUT', 'ETIMEDOUT'],
          'pod outside the ranges is dropped',
        );
        // Row 24: the LB IP as a local address of the node, used as source (VIP hairpin): allowed, masqueraded.
        await nsRun(e.cluster.nsOf('node1'), ['ip', 'addr', 'add', `${lbIP}/32`, 'dev', 'lo']);
        const hairpin = await e.waitReachable('node1', 'tcp', lbIP, 80, { bind: lbIP });
        assert.equal(hairpin.value.pod, 'node1-b');
        assert.equal(srcIP(hairpin.value), node1.podGateway, 'src LB IP -> LB IP is masqueraded');
      });
    });

    withEnv('--masquerade-all', mode, { proxyArgs: ['--masquerade-all'] }, (env) => {
      it('every ClusterIP connection from a pod is masqueraded (local and remote endpoint, TCP and UDP)', async () => {
        const e = env();
        const node1 = e.cluster.node('node1');
        const ip = '10.96.2.40';
        await e.apply(
          service({ name: 'masq', clusterIP: ip, ports: webPorts() }),
          endpointSlice('masq', eps(e, 'node1-b', 'node2-a'), webPorts()),
        );
        const seen = await e.waitFor('both endpoints answered over TCP and UDP', async () => {
          const rs = [
            ...(await e.sendMany('node1-a', 'tcp', ip, 80, 8)),
            ...(await e.sendMany('node1-a', 'udp', ip, 53, 8)),
          ];
          return rs.every((r) => r.ok) && podsOf(rs).length === 2 ? rs : undefined;
        });
        for (const r of seen.value) {
          assert.ok(r.ok);
          const want = r.reply.pod === 'node1-b' ? node1.podGateway : node1.ip;
          assert.equal(srcIP(r.reply), want, `masqueraded to node1 (${r.reply.pod} saw ${r.reply.src})`);
        }
      });
    });

    // --cluster-cidr is left out for every other detector, so a proxy that ignored
    // --detect-local-mode would have no detector at all and fail the masquerade checks.
    const noCIDR = ['--cluster-cidr'];
    withEnv(
      '--detect-local-mode NodeCIDR',
      mode,
      { dropFlags: noCIDR, proxyArgs: ['--detect-local-mode', 'NodeCIDR'] },
      detectorCases,
    );

    // The harness names the node ends of the pod veths veth0, veth1, ... (cluster.ts buildPod).
    withEnv(
      '--detect-local-mode InterfaceNamePrefix',
      mode,
      {
        dropFlags: noCIDR,
        proxyArgs: ['--detect-local-mode', 'InterfaceNamePrefix', '--pod-interface-name-prefix', 'veth'],
      },
      detectorCases,
    );

    withEnv(
      '--detect-local-mode BridgeInterface',
      mode,
      {
        cluster: { podBridge: 'cbr0' },
        dropFlags: noCIDR,
        proxyArgs: ['--detect-local-mode', 'BridgeInterface', '--pod-bridge-interface', 'cbr0'],
      },
      detectorCases,
    );

    withEnv('no local detector (ClusterCIDR without --cluster-cidr)', mode, { dropFlags: noCIDR }, (env) => {
      it('nothing is masqueraded for ClusterIP: pod, node and external sources all reach the endpoint unchanged', async () => {
        const e = env();
        const seen = await sourcesSeen(e, '10.96.2.50');
        assert.deepEqual(seen, {
          pod: e.cluster.pod('node1-a').ip,
          node: e.cluster.node('node1').ip,
          ext: e.cluster.external.ip,
        });
      });
    });

    withEnv(
      'dual-stack',
      mode,
      {
        cluster: { ipv6: true },
        dropFlags: ['--cluster-cidr'],
        proxyArgs: ['--cluster-cidr', `${CLUSTER_CIDR},${CLUSTER_CIDR6}`],
      },
      (env) => {
        it('a dual-stack Service: TCP and UDP over IPv6 to the v6 ClusterIP reach the v6 endpoints, IPv4 still works', async () => {
          const e = env();
          const [v4, v6] = ['10.96.2.60', 'fd00:10:96::60'];
          const ports = webPorts();
          await e.apply(
            service({ name: 'dual', clusterIP: v4, clusterIPs: [v4, v6], ports }),
            endpointSlice('dual', eps(e, 'node1-b', 'node2-a'), ports, 'dual-v4'),
            endpointSlice('dual', eps(e, 'node1-b', 'node2-a'), ports, 'dual-v6', 'IPv6'),
          );
          await e.waitReachable('node1-a', 'tcp', v6, 80);
          const client6 = e.cluster.pod('node1-a').ip6;
          for (const proto of ['tcp', 'udp'] as const) {
            const seen = await e.waitFor(`${proto} over IPv6 reaches both endpoints`, async () => {
              const rs = await e.sendMany('node1-a', proto, v6, proto === 'tcp' ? 80 : 53, 10);
              return rs.every((r) => r.ok) && podsOf(rs).length === 2 ? rs : undefined;
            });
            assert.deepEqual(podsOf(seen.value), ['node1-b', 'node2-a']);
            for (const r of seen.value)
              assert.ok(r.ok && srcIP(r.reply) === client6, `${proto}: pod IPv6 source kept: ${JSON.stringify(r)}`);
          }
          const four = await e.waitReachable('node1-a', 'tcp', v4, 80);
          assert.equal(srcIP(four.value), e.cluster.pod('node1-a').ip);
        });

        it('IPv6 from outside the cluster: ClusterIP (routed via node1) and NodePort on node IPv6 addresses, masqueraded', async () => {
          const e = env();
          const v6 = 'fd00:10:96::61';
          const ports = webPorts(30680);
          const [node1, node2] = [e.cluster.node('node1'), e.cluster.node('node2')];
          await e.apply(
            service({
              name: 'dual-ext',
              type: 'NodePort',
              clusterIP: '10.96.2.61',
              clusterIPs: ['10.96.2.61', v6],
              ports,
            }),
            endpointSlice('dual-ext', eps(e, 'node1-b'), ports, 'dual-ext-v4'),
            endpointSlice('dual-ext', eps(e, 'node1-b'), ports, 'dual-ext-v6', 'IPv6'),
          );
          const r = await e.waitReachable('ext', 'tcp', v6, 80);
          assert.equal(r.value.pod, 'node1-b');
          assert.equal(srcIP(r.value), node1.podGateway6, "masqueraded to node1's address on the pod side");
          // node2's NodePort forwards to node1-b across the IPv6 segment: masqueraded to node2's IPv6 address.
          const np = await e.waitReachable('ext', 'tcp', node2.ip6!, 30680);
          assert.equal(np.value.pod, 'node1-b');
          assert.equal(srcIP(np.value), node2.ip6);
          const npUDP = await e.waitReachable('ext', 'udp', node1.ip6!, 30681);
          assert.equal(npUDP.value.pod, 'node1-b');
          assert.equal(srcIP(npUDP.value), node1.podGateway6);
        });
      },
    );
  });
}
