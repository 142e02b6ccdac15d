// Lifecycle behaviours on the real kernel, per proxy mode: a proxy restart
// does not break established traffic, an API-server outage does not stop
// traffic and a change made after it is applied, and `--cleanup` removes
// everything the proxy created (and nothing else). Once (first mode): a
// changed node IP ends the process for a restart, as upstream's NodeManager
// does, and a --bind-address that differs from the Node's IP does not.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, nodeObject, service, webPorts } from '../netns/fixtures.js';
import { dumpRules, E2E_MODES, ProxyProcess } from '../netns/proxy.js';
import { nsRun } from '../netns/spawn.js';

for (const mode of E2E_MODES) {
  describe(`proxy lifecycle on the real kernel (${mode})`, { concurrency: false }, () => {
    let env: E2EEnv;
    before(async () => {
      env = await E2EEnv.start(mode);
    });
    after(async () => {
      await env?.dispose();
    });

    const pod = (name: string) => env.cluster.pod(name);

    it('a proxy restart does not break an established connection, and new ones keep working', async () => {
      const ip = '10.96.1.10';
      await env.apply(
        service({ name: 'keep', clusterIP: ip, ports: webPorts() }),
        endpointSlice('keep', [{ pod: pod('node2-a') }, { pod: pod('node2-b') }], webPorts()),
      );
      await env.waitReachable('node1-a', 'tcp', ip, 80);
      const client = await env.cluster.agent('node1-a');
      const opened = await client.open('held', ip, 80);
      assert.ok(opened.ok, JSON.stringify(opened));
      const first = await client.send('held', 'before');
      assert.ok(first.ok, JSON.stringify(first));

      const proxy = env.proxy('node1');
      await proxy.stop();
      const whileDown = await client.send('held', 'while-down');
      assert.ok(
        whileDown.ok && whileDown.reply.pod === first.reply.pod,
        `rules stay while the proxy is down: ${JSON.stringify(whileDown)}`,
      );
      await proxy.start();
      const after = await client.send('held', 'after');
      assert.ok(after.ok, JSON.stringify(after));
      assert.equal(after.reply.pod, first.reply.pod, 'same endpoint');
      assert.equal(after.reply.src, first.reply.src, 'same connection (same source port)');
      const fresh = await env.send('node1-a', 'tcp', ip, 80);
      assert.ok(fresh.ok, JSON.stringify(fresh));
      await client.closeConn('held');
    });

    it('an API-server outage keeps traffic flowing; a change made after it is applied', async () => {
      const ip = '10.96.1.11';
      await env.apply(
        service({ name: 'outage', clusterIP: ip, ports: webPorts() }),
        endpointSlice('outage', [{ pod: pod('node1-b') }], webPorts()),
      );
      await env.waitServedBy('node2-a', 'tcp', ip, 80, ['node1-b']);
      await env.cp.stopServing();
      try {
        // Keep sending for a few seconds while the proxies' watches fail and retry.
        const during = [];
        const until = Date.now() + 3000;
        // A lost SYN in a tight connect loop (about 1 in 5,000 here, with or without an outage) is
        // the kernel's, not the proxy's: each exchange gets one retry. Missing rules fail both tries.
        while (Date.now() < until) {
          let r = await env.send('node2-a', 'tcp', ip, 80);
          if (!r.ok) r = await env.send('node2-a', 'tcp', ip, 80);
          during.push(r);
        }
        assert.ok(during.length >= 5, `enough exchanges during the outage: ${during.length}`);
        assert.ok(
          during.every((r) => r.ok && r.reply.pod === 'node1-b'),
          `traffic during the outage: ${JSON.stringify(during)}`,
        );
        for (const n of env.cluster.nodes)
          assert.ok(env.proxy(n.name).running(), `proxy on ${n.name} survives the outage`);
      } finally {
        await env.cp.startServing();
      }
      await env.apply(endpointSlice('outage', [{ pod: pod('node2-b') }], webPorts()));
      const { ms } = await env.waitServedBy('node2-a', 'tcp', ip, 80, ['node2-b'], {}, 6);
      console.log(`${mode}: change after API-server outage applied in ${ms} ms`);
      // The API host closes connections after watches, when idle and at random (test/netns/apihost.ts).
      const api = await env.cp.stats();
      console.log(`${mode}: API host: ${api.handshakes} handshakes, ${api.closedByServer} connections it closed`);
      assert.equal(api.abortedHandshakes, 0, 'no TLS handshake opened and dropped, outage included');
    });

    it('an outage with the history compacted meanwhile: the proxies relist at once, and a change made during it is applied', async () => {
      const ip = '10.96.1.13';
      const before = await env.cp.stats();
      await env.cp.stopServing();
      try {
        // Made while the server is away (in its store), then the history dropped past every watch.
        await env.cp.createMany([
          service({ name: 'during', clusterIP: ip, ports: webPorts() }),
          endpointSlice('during', [{ pod: pod('node1-a') }], webPorts()),
        ]);
        await env.cp.compact();
      } finally {
        await env.cp.startServing();
      }
      const back = Date.now();
      await env.waitServedBy('node2-a', 'tcp', ip, 80, ['node1-a'], {}, 6);
      const ms = Date.now() - back;
      const api = await env.cp.stats();
      console.log(
        `${mode}: outage+410: change made during it applied ${ms} ms after the API returned; ` +
          `${api.handshakes - before.handshakes} handshakes, ${api.abortedHandshakes - before.abortedHandshakes} aborted`,
      );
      assert.equal(api.abortedHandshakes, 0, 'no TLS handshake opened and dropped');
      assert.ok(ms <= 10_000, `applied ${ms} ms after the API returned`);
    });

    it('--cleanup removes every rule the proxy made in the node, and Service traffic stops', async () => {
      const ip = '10.96.1.12';
      const node2 = env.cluster.node('node2');
      await env.apply(
        service({ name: 'gone', clusterIP: ip, ports: webPorts() }),
        endpointSlice('gone', [{ pod: pod('node1-a') }], webPorts()),
      );
      await env.waitReachable('node2-b', 'tcp', ip, 80);
      // A rule that is not the proxy's must survive the cleanup (and, in ipvs mode, a virtual server).
      await nsRun(node2.ns, ['iptables', '-t', 'filter', '-N', 'KPT-E2E-OTHER']);
      if (mode === 'ipvs') await nsRun(node2.ns, ['ipvsadm', '-A', '-t', '192.168.55.5:7777', '-s', 'rr']);
      const before = await dumpRules(node2.ns);
      // ebpf mode writes nothing to netfilter: its programs on the node's interfaces (their pinned links) are what it made.
      const bpfNode = env.proxy('node2').bpfNode;
      const programs = async () => (bpfNode ? (await bpfNode.exec(['sh', '-c', 'ls -R /sys/fs/bpf 2>&1'])).stdout : '');
      if (mode === 'ebpf') {
        const p = await programs();
        assert.match(p, /tcx-\d+-ingress/, `the proxy attached its programs (pinned links): ${p}`);
      } else assert.match(before.iptables + before.nft, /KUBE-|kube-proxy/, 'the proxy programmed something');
      const proxy = env.proxy('node2');
      await proxy.stop();
      const r = await proxy.cleanup();
      assert.equal(r.code, 0, r.output);
      const left = await dumpRules(node2.ns);
      // KUBE-FIREWALL (and its jumps) duplicates kubelet's chain: upstream's cleanup leaves it on purpose.
      const kubeChains = [...new Set(left.iptables.match(/KUBE-[A-Z0-9-]+/g) ?? [])].filter(
        (c) => c !== 'KUBE-FIREWALL',
      );
      assert.deepEqual(kubeChains, [], `iptables leftovers:\n${left.iptables}`);
      assert.doesNotMatch(left.nft, /table \w+ kube-proxy/, `nft leftovers:\n${left.nft}`);
      assert.match(left.iptables, /KPT-E2E-OTHER/, "a chain that is not the proxy's is kept");
      if (mode === 'ebpf') assert.doesNotMatch(await programs(), /tcx-|kube-proxy-ts/, 'no program of ours left');
      if (mode === 'ipvs') {
        const ipvs = (await nsRun(node2.ns, ['ipvsadm', '-Sn'])).stdout.trim().split('\n');
        assert.deepEqual(ipvs, ['-A -t 192.168.55.5:7777 -s rr'], 'only the virtual server that is not ours is left');
        assert.equal((await nsRun(node2.ns, ['ipset', 'list', '-n'])).stdout.trim(), '', 'no ipsets');
        const link = await nsRun(node2.ns, ['ip', 'link', 'show', 'kube-ipvs0'], { allowFailure: true });
        assert.notEqual(link.code, 0, 'kube-ipvs0 is gone');
      }
      const after = await env.send('node2-b', 'tcp', ip, 80, { timeoutMs: 700 });
      assert.equal(after.ok, false, 'no proxy rules, no Service');
    });

    if (mode === E2E_MODES[0]) {
      it('a changed node IP ends the proxy for a restart; a --bind-address unlike the Node IP does not', async () => {
        const node1 = env.cluster.node('node1');
        const proxy = env.proxy('node1');
        assert.ok(proxy.running());
        // Addresses live in the Node's status subresource, as on a real API server.
        const moved = nodeObject({ ...node1, ip: '192.168.77.199' });
        await env.kube.setStatus(moved, moved.status);
        const exited = await env.waitFor(
          'the proxy exits',
          async () => (proxy.running() ? undefined : proxy.exitCode()),
          15_000,
        );
        assert.equal(exited.value, 1);
        assert.match(proxy.log(), /the node's IPv4 address changed from 192\.168\.77\.11 to 192\.168\.77\.199/);
        await proxy.stop();
        const original = nodeObject(node1);
        await env.kube.setStatus(original, original.status);

        // Started with a bind address that is not the Node's InternalIP: a setting, not a change.
        const pinned = new ProxyProcess(env.cluster, node1, mode, env.cp.kubeconfig, ['--bind-address', '10.99.0.1']);
        await pinned.start();
        try {
          await new Promise((r) => setTimeout(r, 7000)); // more than one check of the node watch
          assert.ok(pinned.running(), `still running:\n${pinned.log()}`);
        } finally {
          await pinned.dispose(); // and its bpffs holder in ebpf mode, which would keep this file running
        }
        await proxy.start();
      });
    }
  });
}
