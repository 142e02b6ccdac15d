// Every Service behaviour the README lists, proven with real TCP and
// UDP packets on the real kernel: a two-node cluster of network namespaces
// (test/netns), the test API server, one kube-proxy-ts per node. Written
// once and run per proxy mode (E2E_MODES). Each case makes its own Service
// (own ClusterIP / ports), waits for the proxies to program it, then checks
// which pod answered and which client address that pod saw.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv, podsOf, srcIP } from '../netns/e2e.js';
import { endpointSlice, service, webPorts, type EndpointSpec } from '../netns/fixtures.js';
import { E2E_MODES } from '../netns/proxy.js';

const convergence: string[] = [];

for (const mode of E2E_MODES) {
  describe(`Services on the real kernel (${mode})`, { concurrency: false }, () => {
    let env: E2EEnv;
    before(async () => {
      env = await E2EEnv.start(mode);
    });
    after(async () => {
      await env?.dispose();
      if (convergence.length) console.log(`convergence times (${mode}):\n  ${convergence.splice(0).join('\n  ')}`);
    });

    const pod = (name: string) => env.cluster.pod(name);
    const eps = (...names: string[]): EndpointSpec[] => names.map((n) => ({ pod: pod(n) }));

    it('ClusterIP: TCP and UDP from a pod reach both endpoints, pod source IP preserved', async () => {
      const ip = '10.96.0.10';
      await env.apply(
        service({ name: 'web', clusterIP: ip, ports: webPorts() }),
        endpointSlice('web', eps('node1-b', 'node2-a'), webPorts()),
      );
      const { ms } = await env.waitReachable('node1-a', 'tcp', ip, 80);
      convergence.push(`new ClusterIP Service reachable: ${ms} ms`);
      for (const proto of ['tcp', 'udp'] as const) {
        const port = proto === 'tcp' ? 80 : 53;
        const seen = await env.waitFor(`${proto} reaches both endpoints`, async () => {
          const rs = await env.sendMany('node1-a', proto, ip, port, 10);
          return podsOf(rs).length === 2 && rs.every((r) => r.ok) ? rs : undefined;
        });
        for (const r of seen.value)
          assert.ok(r.ok && srcIP(r.reply) === pod('node1-a').ip, `${proto}: ${JSON.stringify(r)}`);
        assert.deepEqual(podsOf(seen.value), ['node1-b', 'node2-a']);
      }
    });

    it('ClusterIP from outside the cluster (routed via node1) is served and masqueraded', async () => {
      await env.apply(
        service({ name: 'outside', clusterIP: '10.96.0.22', ports: webPorts() }),
        endpointSlice('outside', eps('node1-b', 'node2-a'), webPorts()),
      );
      await env.waitReachable('ext', 'tcp', '10.96.0.22', 80);
      const rs = await env.sendMany('ext', 'tcp', '10.96.0.22', 80, 6);
      for (const r of rs) {
        assert.ok(r.ok, JSON.stringify(r));
        assert.notEqual(srcIP(r.reply), env.cluster.external.ip, 'source outside the cluster CIDR is masqueraded');
      }
    });

    it('NodePort from the external client: served by endpoints on both nodes, masqueraded to the node', async () => {
      const ports = webPorts(30080);
      await env.apply(
        service({ name: 'np', type: 'NodePort', clusterIP: '10.96.0.11', ports }),
        endpointSlice('np', eps('node1-a', 'node2-b'), ports),
      );
      const node1 = env.cluster.node('node1');
      await env.waitReachable('ext', 'tcp', node1.ip, 30080);
      const rs = await env.waitFor('both endpoints via node1', async () => {
        const r = await env.sendMany('ext', 'tcp', node1.ip, 30080, 10);
        return podsOf(r).length === 2 ? r : undefined;
      });
      for (const r of rs.value) {
        assert.ok(r.ok, JSON.stringify(r));
        assert.ok([node1.ip, node1.podGateway].includes(srcIP(r.reply)), `masqueraded to node1, saw ${r.reply.src}`);
      }
      const u = await env.waitReachable('ext', 'udp', env.cluster.node('node2').ip, 30081);
      assert.notEqual(srcIP(u.value), env.cluster.external.ip, 'UDP NodePort masqueraded too');
    });

    it('NodePort from the node itself, and on 127.0.0.1 only in iptables mode (localhost NodePorts)', async () => {
      const ports = webPorts(30090);
      const node1 = env.cluster.node('node1');
      await env.apply(
        service({ name: 'np-self', type: 'NodePort', clusterIP: '10.96.0.23', ports }),
        endpointSlice('np-self', eps('node2-a'), ports),
      );
      const self = await env.waitReachable('node1', 'tcp', node1.ip, 30090);
      assert.equal(self.value.pod, 'node2-a');
      assert.equal(srcIP(self.value), node1.ip, 'node-originated NodePort traffic is masqueraded');
      const local = await env.send('node1', 'tcp', '127.0.0.1', 30090, { timeoutMs: 1000 });
      if (mode === 'iptables') {
        assert.ok(
          local.ok && local.reply.pod === 'node2-a',
          `iptables serves localhost NodePorts: ${JSON.stringify(local)}`,
        );
      } else {
        assert.equal(local.ok, false, `${mode} does not serve 127.0.0.1 NodePorts: ${JSON.stringify(local)}`);
      }
    });

    it('externalIPs: traffic to the external IP (routed to node2) is served and masqueraded', async () => {
      const extIP = '192.168.80.10';
      await env.cluster.routeVia('ext', `${extIP}/32`, 'node2');
      await env.apply(
        service({ name: 'extip', clusterIP: '10.96.0.12', ports: webPorts(), externalIPs: [extIP] }),
        endpointSlice('extip', eps('node1-a'), webPorts()),
      );
      const r = await env.waitReachable('ext', 'tcp', extIP, 80);
      assert.equal(r.value.pod, 'node1-a');
      assert.equal(srcIP(r.value), env.cluster.node('node2').ip);
    });

    it('LoadBalancer IP with loadBalancerSourceRanges: allowed source served, other source dropped', async () => {
      const lbIP = '192.168.90.10';
      const ports = webPorts(30180);
      const ext = env.cluster.external;
      await env.cluster.routeVia('ext', `${lbIP}/32`, 'node1');
      await env.apply(
        service({
          name: 'lb',
          type: 'LoadBalancer',
          clusterIP: '10.96.0.13',
          ports,
          loadBalancerSourceRanges: [`${ext.ip}/32`],
        }),
        endpointSlice('lb', eps('node2-a'), ports),
      );
      const svc = await env.kube.call('GET', '/api/v1/namespaces/default/services/lb');
      await env.kube.setStatus({ ...svc, kind: 'Service' }, { loadBalancer: { ingress: [{ ip: lbIP }] } });
      const ok = await env.waitReachable('ext', 'tcp', lbIP, 80, { bind: ext.ip });
      convergence.push(`LoadBalancer ingress IP reachable after status update: ${ok.ms} ms`);
      assert.equal(ok.value.pod, 'node2-a');
      const denied = await env.sendMany('ext', 'tcp', lbIP, 80, 2, { bind: ext.ip2, timeoutMs: 1000 });
      assert.deepEqual(
        denied.map((r) => r.ok),
        [false, false],
        'a source outside the ranges is dropped',
      );
      // The NodePort of the same Service ignores the source ranges.
      const np = await env.send('ext', 'tcp', env.cluster.node('node1').ip, 30180, { bind: ext.ip2 });
      assert.ok(np.ok, `NodePort not subject to source ranges: ${JSON.stringify(np)}`);
    });

    it('ClientIP session affinity: the same endpoint every time', async () => {
      await env.apply(
        service({
          name: 'sticky',
          clusterIP: '10.96.0.14',
          ports: webPorts(),
          sessionAffinity: 'ClientIP',
          affinityTimeoutSeconds: 600,
        }),
        endpointSlice('sticky', eps('node1-a', 'node1-b', 'node2-a', 'node2-b'), webPorts()),
      );
      await env.waitReachable('node2-b', 'tcp', '10.96.0.14', 80);
      const rs = await env.sendMany('node2-b', 'tcp', '10.96.0.14', 80, 12);
      assert.ok(
        rs.every((r) => r.ok),
        JSON.stringify(rs),
      );
      assert.equal(podsOf(rs).length, 1, `one endpoint for one client, got ${podsOf(rs).join(',')}`);
    });

    it('externalTrafficPolicy Local (LoadBalancer, via its NodePort): client IP preserved, only local endpoints, health check 200/503', async () => {
      const ports = webPorts(30280);
      const hc = 32100;
      const [node1, node2] = [env.cluster.node('node1'), env.cluster.node('node2')];
      await env.apply(
        service({
          name: 'local',
          type: 'LoadBalancer',
          clusterIP: '10.96.0.15',
          ports,
          externalTrafficPolicy: 'Local',
          healthCheckNodePort: hc,
        }),
        endpointSlice('local', eps('node2-a', 'node2-b'), ports),
      );
      const first = await env.waitReachable('ext', 'tcp', node2.ip, 30280);
      assert.equal(srcIP(first.value), env.cluster.external.ip, 'client source IP preserved');
      const rs = await env.sendMany('ext', 'tcp', node2.ip, 30280, 8);
      assert.ok(
        rs.every((r) => r.ok && r.reply.pod.startsWith('node2-') && srcIP(r.reply) === env.cluster.external.ip),
        JSON.stringify(rs),
      );
      // Until node1 has synced the endpoints it rejects (no endpoints yet): wait that out, then expect a drop.
      // After 6 refusals in a burst node1's kernel withholds the ICMP errors to ext (one a second), and a
      // withheld reject times out like a drop: a timeout counts only when node1 withheld no error meanwhile.
      const { value: none } = await env.waitFor('node1 synced the endpoints', async () => {
        const withheld = await env.icmpRateLimited('node1');
        const r = await env.send('ext', 'tcp', node1.ip, 30280, { timeoutMs: 1000 });
        if (!r.ok && r.error === 'ECONNREFUSED') return undefined;
        return (await env.icmpRateLimited('node1')) === withheld ? r : undefined;
      });
      assert.deepEqual(
        [none.ok, !none.ok && none.error],
        [false, 'ETIMEDOUT'],
        'node1 has no local endpoint: DROP (not REJECT)',
      );
      const ext = await env.cluster.agent('ext');
      const h2 = await env.waitFor('health check 200 on node2', async () => {
        const r = await ext.http(`http://${node2.ip}:${hc}/`);
        return r.status === 200 ? r : undefined;
      });
      assert.equal(JSON.parse(h2.value.body ?? '{}').localEndpoints, 2);
      assert.equal(h2.value.headers?.['x-load-balancing-endpoint-weight'], '2');
      const h1 = await ext.http(`http://${node1.ip}:${hc}/`);
      assert.equal(h1.status, 503);
      assert.equal(JSON.parse(h1.body ?? '{}').localEndpoints, 0);
      // A pod on node1 is short-circuited to the cluster-wide endpoints, unmasqueraded.
      const fromPod = await env.send('node1-a', 'tcp', node1.ip, 30280);
      assert.ok(fromPod.ok && fromPod.reply.pod.startsWith('node2-'), JSON.stringify(fromPod));
      assert.equal(srcIP(fromPod.reply), pod('node1-a').ip);
    });

    it("internalTrafficPolicy Local: pods reach only their node's endpoint; none local is a drop", async () => {
      await env.apply(
        service({ name: 'itp', clusterIP: '10.96.0.16', ports: webPorts(), internalTrafficPolicy: 'Local' }),
        endpointSlice('itp', eps('node1-a', 'node2-a'), webPorts()),
      );
      await env.waitServedBy('node1-b', 'tcp', '10.96.0.16', 80, ['node1-a']);
      await env.waitServedBy('node2-b', 'tcp', '10.96.0.16', 80, ['node2-a']);
      await env.apply(endpointSlice('itp', eps('node2-a'), webPorts()));
      const dropped = await env.waitFor('node1 pod dropped (no local endpoint)', async () => {
        const r = await env.send('node1-b', 'tcp', '10.96.0.16', 80, { timeoutMs: 700 });
        return !r.ok ? r : undefined;
      });
      // ipvs: the virtual server keeps no real server and IPVS answers port unreachable (as upstream's).
      const want = mode === 'ipvs' ? 'ECONNREFUSED' : 'ETIMEDOUT';
      assert.equal(dropped.value.ok ? '' : dropped.value.error, want, mode === 'ipvs' ? 'REJECT' : 'DROP, not REJECT');
    });

    it('no endpoints: REJECT (connection refused, not a timeout) for TCP and UDP, ClusterIP and NodePort', async () => {
      await env.apply(service({ name: 'empty', type: 'NodePort', clusterIP: '10.96.0.17', ports: webPorts(30380) }));
      const tcp = await env.waitFor('tcp refused', async () => {
        const r = await env.send('node1-a', 'tcp', '10.96.0.17', 80, { timeoutMs: 3000 });
        return !r.ok && r.error === 'ECONNREFUSED' ? r : undefined;
      });
      assert.equal(tcp.value.ok, false);
      const udp = await env.send('node1-a', 'udp', '10.96.0.17', 53, { timeoutMs: 3000 });
      assert.deepEqual([udp.ok, !udp.ok && udp.error], [false, 'ECONNREFUSED']);
      // A listener on the node's own port 30380 proves the refusal is the proxy's REJECT, not an unused port.
      // node2 may sync the Service later than node1 (slow machines): until then its listener answers.
      await (await env.cluster.agent('node2')).serve([30380], []);
      const { value: np } = await env.waitFor('NodePort without endpoints is rejected too', async () => {
        const r = await env.send('ext', 'tcp', env.cluster.node('node2').ip, 30380, { timeoutMs: 3000 });
        return !r.ok && r.error === 'ECONNREFUSED' ? r : undefined;
      });
      assert.deepEqual([np.ok, !np.ok && np.error], [false, 'ECONNREFUSED']);
    });

    it('hairpin: a pod reaches itself through its Service (masqueraded)', async () => {
      await env.apply(
        service({ name: 'hairpin', clusterIP: '10.96.0.18', ports: webPorts() }),
        endpointSlice('hairpin', eps('node1-a'), webPorts()),
      );
      const r = await env.waitReachable('node1-a', 'tcp', '10.96.0.18', 80);
      assert.equal(r.value.pod, 'node1-a');
      assert.notEqual(srcIP(r.value), pod('node1-a').ip, 'hairpin traffic must be masqueraded');
    });

    it('terminating-but-serving endpoints are used only when no endpoint is ready', async () => {
      const term = (n: string): EndpointSpec => ({ pod: pod(n), ready: false, serving: true, terminating: true });
      await env.apply(
        service({ name: 'term', clusterIP: '10.96.0.19', ports: webPorts() }),
        endpointSlice('term', [term('node1-a'), term('node2-a')], webPorts()),
      );
      await env.waitServedBy('node1-b', 'tcp', '10.96.0.19', 80, ['node1-a', 'node2-a']);
      await env.apply(endpointSlice('term', [term('node1-a'), term('node2-a'), { pod: pod('node2-b') }], webPorts()));
      const { ms } = await env.waitServedBy('node1-b', 'tcp', '10.96.0.19', 80, ['node2-b']);
      convergence.push(`endpoint becomes ready, terminating ones dropped: ${ms} ms`);
    });

    it('stale UDP conntrack entries are removed after an endpoint change', async () => {
      const ports = webPorts();
      await env.apply(
        service({ name: 'udp', clusterIP: '10.96.0.20', ports }),
        endpointSlice('udp', eps('node1-a'), ports),
      );
      const fixed = { localPort: 41000 };
      const before = await env.waitReachable('node2-b', 'udp', '10.96.0.20', 53, fixed);
      assert.equal(before.value.pod, 'node1-a');
      assert.equal(before.value.src, `${pod('node2-b').ip}:41000`);
      // node1-a keeps running: only the conntrack cleanup can move this flow.
      await env.apply(endpointSlice('udp', eps('node2-a'), ports));
      const { ms } = await env.waitServedBy('node2-b', 'udp', '10.96.0.20', 53, ['node2-a'], fixed, 3);
      convergence.push(`UDP flow from a fixed source port moved to the new endpoint: ${ms} ms`);
    });

    // A one-way sender keeps its conntrack entry alive: unless kube-proxy
    // deletes it, every datagram of this 5-tuple is DNATed to the old
    // endpoint, which keeps running and would answer (kubernetes #139629, #141371).
    const staleUDPGone = async (what: string, ip: string, localPort: number, change: () => Promise<void>) => {
      const ports = webPorts();
      const name = `udp-${localPort}`;
      await env.apply(service({ name, clusterIP: ip, ports }), endpointSlice(name, eps('node1-a'), ports));
      const fixed = { localPort };
      const first = await env.waitReachable('node2-b', 'udp', ip, 53, fixed);
      assert.equal(first.value.pod, 'node1-a');
      assert.equal(first.value.src, `${pod('node2-b').ip}:${localPort}`);
      await change();
      const { value, ms } = await env.waitFor(
        `${what}: the fixed UDP flow is no longer answered by node1-a`,
        async () => {
          const r = await env.send('node2-b', 'udp', ip, 53, { ...fixed, timeoutMs: 500 });
          return r.ok ? undefined : r;
        },
      );
      convergence.push(`${what}: fixed UDP flow no longer reaches the old endpoint: ${ms} ms`);
      const later = await env.sendMany('node2-b', 'udp', ip, 53, 5, { ...fixed, timeoutMs: 300 });
      assert.deepEqual(podsOf(later), [], `${what}: nothing answers any more`);
      const echo = await env.send('node1-b', 'udp', pod('node1-a').ip, 5353);
      assert.ok(echo.ok && echo.reply.pod === 'node1-a', 'the old endpoint is still running');
      assert.match(env.proxy('node2').log(), /Stale UDP conntrack entries are reconciled.*netlink|netlink.*reconciled/);
      return value.ok ? '' : value.error;
    };

    it('a UDP Service dropping to zero endpoints: its conntrack entries go, the flow is rejected', async () => {
      const firstError = await staleUDPGone('zero endpoints', '10.96.0.24', 41001, () =>
        env.apply(endpointSlice('udp-41001', [], webPorts())),
      );
      // The first datagram after the entry went is normally REJECTed. It can time out instead when its
      // reply was in flight as the entry was deleted, or when the kernel rate-limits ICMP errors to this
      // client; then a datagram sent after the rate limit's 1 s refill must be refused.
      let error = firstError;
      if (error !== 'ECONNREFUSED') {
        await new Promise((r) => setTimeout(r, 1500));
        const again = await env.send('node2-b', 'udp', '10.96.0.24', 53, { localPort: 41001, timeoutMs: 1000 });
        error = again.ok ? `answered by ${again.reply.pod}` : again.error;
      }
      assert.equal(error, 'ECONNREFUSED', `REJECT now applies to the flow (first error: ${firstError})`);
    });

    it('a deleted UDP Service: its conntrack entries go', async () => {
      await staleUDPGone('Service deleted', '10.96.0.25', 41002, () => env.kube.remove('Service', 'udp-41002'));
    });

    it('converges after endpoint and Service changes (measured)', async () => {
      const ip = '10.96.0.21';
      await env.apply(
        service({ name: 'conv', clusterIP: ip, ports: webPorts() }),
        endpointSlice('conv', eps('node1-a'), webPorts()),
      );
      const created = await env.waitServedBy('node2-a', 'tcp', ip, 80, ['node1-a']);
      convergence.push(`Service + slice created -> served: ${created.ms} ms`);
      await env.apply(endpointSlice('conv', eps('node2-b'), webPorts()));
      const moved = await env.waitServedBy('node2-a', 'tcp', ip, 80, ['node2-b']);
      convergence.push(`endpoint replaced -> new endpoint only: ${moved.ms} ms`);
      const newPorts = [{ name: 'tcp', port: 8000, targetPort: 8080, protocol: 'TCP' as const }];
      await env.apply(
        service({ name: 'conv', clusterIP: ip, ports: newPorts }),
        endpointSlice('conv', eps('node2-b'), newPorts),
      );
      const ported = await env.waitReachable('node2-a', 'tcp', ip, 8000);
      convergence.push(`Service port changed -> new port served: ${ported.ms} ms`);
      await env.kube.remove('Service', 'conv');
      const gone = await env.waitFor('deleted Service no longer served', async () => {
        const r = await env.send('node2-a', 'tcp', ip, 8000, { timeoutMs: 500 });
        return r.ok ? undefined : r;
      });
      convergence.push(`Service deleted -> not served: ${gone.ms} ms`);
      // Each waitFor above is bounded (15 s): reaching here is the convergence assertion.
      assert.equal(gone.value.ok, false);
    });
  });
}
