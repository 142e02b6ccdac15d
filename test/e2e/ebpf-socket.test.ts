// Socket-level load balancing for pods (--ebpf-socket-lb-cgroup), with real
// sockets in the two-node namespace cluster. Only node1's proxy gets the
// flag, with a cgroup v2 directory this test makes (never the machine's
// cgroup root); the agent of pod node1-a (our own process) is moved into it.
// The pod's connections then go straight to an endpoint (no connection entry
// of the tc programs appears: no packet carried the Service address, and the
// programs let every one of those packets go at their first check) with
// everything the tc path honours:
//   - TCP, connected UDP and unconnected UDP (sendmsg), the pod's own source
//     address kept, getpeername/recvmsg showing the Service address;
//   - internalTrafficPolicy Local (none local: a drop, as the tc path);
//   - topology hints for the node's zone;
//   - the terminating fallback (serving terminating endpoints when none is ready);
//   - round-robin chosen at the socket, turn by turn;
//   - REJECT: no endpoints and ports a ClusterIP does not define refuse the
//     connection (ECONNREFUSED);
//   - what socket balancing leaves to the tc programs (ClientIP affinity,
//     Maglev) still works for the pod, through the tc path.
// Pod node1-b, outside the cgroup, keeps the tc path.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { E2EEnv, podsOf, srcIP } from '../netns/e2e.js';
import { endpointSlice, nodeObject, service, webPorts, type EndpointSpec } from '../netns/fixtures.js';
import type { KubeObject } from '../netns/kube.js';
import { E2E_MODES } from '../netns/proxy.js';
import { TEST_PIN_ROOT } from '../ebpf/bpfnode.js';
import * as L from '../../src/dataplane/ebpf/layout.js';

const RUN = E2E_MODES.includes('ebpf');
const ZONE = 'topology.kubernetes.io/zone';
const CGROUP2 = '/sys/fs/cgroup/unified';

function withAnnotation(o: KubeObject, key: string, value: string): KubeObject {
  return { ...o, metadata: { ...o.metadata, annotations: { [key]: value } } };
}

/** The cgroup v2 mount of this machine (the root itself on a v2-only host). */
function cgroup2Root(): string {
  return existsSync(`${CGROUP2}/cgroup.procs`) ? CGROUP2 : '/sys/fs/cgroup';
}

if (RUN)
  describe('ebpf mode: socket-level balancing for a pod in a cgroup of ours', { concurrency: false }, () => {
    let env: E2EEnv;
    const cgroup = `${cgroup2Root()}/kpt-${process.pid}-sockpod`;
    const eps = (...names: string[]): EndpointSpec[] => names.map((n) => ({ pod: env.cluster.pod(n) }));
    const pod = (n: string) => env.cluster.pod(n);
    /** Entries in node1's connection map (the tc programs' translations). */
    const ct = async (): Promise<number> =>
      (
        await env
          .proxy('node1')
          .bpfNode!.helper<{ entries: unknown[] }>({ cmd: 'dump', pinRoot: TEST_PIN_ROOT, map: 'ct' })
      ).entries.length;

    /** Packets node1's tc programs let go at their first check (STAT_PASS). */
    const passed = async (): Promise<number> =>
      Number(
        (await env.proxy('node1').bpfNode!.helper<{ stats: string[] }>({ cmd: 'stats', pinRoot: TEST_PIN_ROOT })).stats[
          L.STAT.pass
        ],
      );

    before(async () => {
      mkdirSync(cgroup);
      env = await E2EEnv.start('ebpf');
      const old = env.proxy('node1');
      await old.stop();
      assert.equal((await old.cleanup()).code, 0);
      await env.replaceProxy('node1', ['--ebpf-socket-lb-cgroup', cgroup]);
      // The pod's agent is started now, then moved into the cgroup: its sockets are served from here on.
      await env.cluster.agent('node1-a');
      writeFileSync(`${cgroup}/cgroup.procs`, String(agentPid(env.cluster.nsOf('node1-a'))));
    });
    after(async () => {
      await env?.dispose();
      if (existsSync(cgroup)) rmdirSync(cgroup); // empty: the agent moved into it has exited
    });

    it('TCP, connected and unconnected UDP go straight to an endpoint, from the pod address; the Service address is what the pod sees', async () => {
      const ip = '10.96.5.10';
      await env.apply(
        service({ name: 'plain', clusterIP: ip, ports: webPorts() }),
        endpointSlice('plain', eps('node1-b', 'node2-a', 'node2-b'), webPorts()),
      );
      await env.waitReachable('node1-a', 'tcp', ip, 80);
      const before = await ct();
      const passedBefore = await passed();
      const rs = [
        ...(await env.sendMany('node1-a', 'tcp', ip, 80, 9)),
        ...(await env.sendMany('node1-a', 'udp', ip, 53, 9)),
        ...(await env.sendMany('node1-a', 'udp', ip, 53, 9, { unconnected: true })),
      ];
      for (const r of rs) {
        assert.ok(r.ok, JSON.stringify(r));
        assert.equal(srcIP(r.reply), pod('node1-a').ip, 'not masqueraded');
        // The TCP server sees its own address as the destination (the UDP echo server listens on any).
        if (r.peer?.endsWith(':80')) assert.equal(r.reply.dst, `${pod(r.reply.pod).ip}:8080`, 'sent to the endpoint');
        const port = r.peer?.slice(r.peer.lastIndexOf(':') + 1);
        assert.equal(r.peer, `${ip}:${port}`, 'getpeername/recvmsg show the Service');
        assert.ok(port === '80' || port === '53', r.peer);
      }
      assert.ok(podsOf(rs).length >= 2, `one endpoint only: ${podsOf(rs).join(',')}`);
      assert.equal(await ct(), before, 'no tc connection entry: no packet carried the Service address');
      // Every packet of these crosses at least two of node1's tc hooks (in from the pod, out towards the
      // endpoint, or the other way), and none of them is the programs' business: they leave at the first check.
      const left = (await passed()) - passedBefore;
      assert.ok(left >= 2 * rs.length, `${left} packets left at the first check for ${rs.length} exchanges`);
      // A pod outside the cgroup keeps the tc path.
      const other = await env.send('node1-b', 'tcp', ip, 80);
      assert.ok(other.ok, JSON.stringify(other));
      assert.ok((await ct()) > before, 'node1-b is translated by the tc programs');
    });

    it("internalTrafficPolicy Local: only the node's endpoint; none local is a drop", async () => {
      const ip = '10.96.5.11';
      await env.apply(
        service({ name: 'itp', clusterIP: ip, ports: webPorts(), internalTrafficPolicy: 'Local' }),
        endpointSlice('itp', eps('node1-b', 'node2-a'), webPorts()),
      );
      await env.waitServedBy('node1-a', 'tcp', ip, 80, ['node1-b']);
      const before = await ct();
      const rs = await env.sendMany('node1-a', 'tcp', ip, 80, 6);
      assert.deepEqual(podsOf(rs), ['node1-b']);
      assert.equal(await ct(), before, 'balanced at the socket');
      await env.apply(endpointSlice('itp', eps('node2-a'), webPorts()));
      const dropped = await env.waitFor('no local endpoint: dropped', async () => {
        const r = await env.send('node1-a', 'tcp', ip, 80, { timeoutMs: 700 });
        return !r.ok ? r : undefined;
      });
      assert.equal(dropped.value.ok ? '' : dropped.value.error, 'ETIMEDOUT', 'DROP, not REJECT');
    });

    it("topology: zone hints pick the endpoint hinted for the node's zone", async () => {
      const [node1, node2] = [env.cluster.node('node1'), env.cluster.node('node2')];
      await env.apply(nodeObject(node1, { [ZONE]: 'zone-a' }), nodeObject(node2, { [ZONE]: 'zone-b' }));
      // The hints disagree with where the pods run: only the hints explain the choice.
      const hinted: EndpointSpec[] = [
        { pod: pod('node1-b'), zone: 'zone-a', forZones: ['zone-b'] },
        { pod: pod('node2-a'), zone: 'zone-b', forZones: ['zone-a'] },
        { pod: pod('node2-b'), zone: 'zone-b', forZones: ['zone-b'] },
      ];
      const ip = '10.96.5.12';
      await env.apply(
        service({ name: 'zones', clusterIP: ip, ports: webPorts() }),
        endpointSlice('zones', hinted, webPorts()),
      );
      await env.waitServedBy('node1-a', 'tcp', ip, 80, ['node2-a'], {}, 8);
      const before = await ct();
      assert.deepEqual(podsOf(await env.sendMany('node1-a', 'tcp', ip, 80, 8)), ['node2-a']);
      assert.equal(await ct(), before, 'balanced at the socket');
    });

    it('terminating-but-serving endpoints serve only while no endpoint is ready', async () => {
      const term = (n: string): EndpointSpec => ({ pod: pod(n), ready: false, serving: true, terminating: true });
      const ip = '10.96.5.13';
      await env.apply(
        service({ name: 'term', clusterIP: ip, ports: webPorts() }),
        endpointSlice('term', [term('node1-b'), term('node2-a')], webPorts()),
      );
      await env.waitServedBy('node1-a', 'tcp', ip, 80, ['node1-b', 'node2-a']);
      const before = await ct();
      await env.sendMany('node1-a', 'tcp', ip, 80, 4);
      assert.equal(await ct(), before, 'balanced at the socket');
      await env.apply(endpointSlice('term', [term('node1-b'), term('node2-a'), { pod: pod('node2-b') }], webPorts()));
      await env.waitServedBy('node1-a', 'tcp', ip, 80, ['node2-b']);
    });

    it('round-robin (annotation) is chosen at the socket, turn by turn', async () => {
      const ip = '10.96.5.14';
      await env.apply(
        withAnnotation(
          service({ name: 'rr', clusterIP: ip, ports: webPorts() }),
          'kube-proxy-ts/lb-algorithm',
          'round-robin',
        ),
        endpointSlice('rr', eps('node1-b', 'node2-a'), webPorts()),
      );
      await env.waitFor('both endpoints', async () => {
        const ps = podsOf(await env.sendMany('node1-a', 'tcp', ip, 80, 4));
        return ps.length === 2 ? ps : undefined;
      });
      const before = await ct();
      const order = (await env.sendMany('node1-a', 'tcp', ip, 80, 8)).map((r) => (r.ok ? r.reply.pod : r.error));
      for (let i = 1; i < order.length; i++) assert.notEqual(order[i], order[i - 1], order.join(' '));
      assert.equal(await ct(), before, 'balanced at the socket');
    });

    it('REJECT at connect: no endpoints and an undefined ClusterIP port refuse the connection', async () => {
      const ip = '10.96.5.15';
      await env.apply(service({ name: 'empty', clusterIP: ip, ports: webPorts() }));
      const tcp = await env.waitFor('tcp refused', async () => {
        const r = await env.send('node1-a', 'tcp', ip, 80, { timeoutMs: 3000 });
        return !r.ok && r.error === 'ECONNREFUSED' ? r : undefined;
      });
      assert.equal(tcp.value.ok, false);
      const udp = await env.send('node1-a', 'udp', ip, 53, { timeoutMs: 3000 });
      assert.deepEqual([udp.ok, !udp.ok && udp.error], [false, 'ECONNREFUSED']);
      const other = '10.96.5.10'; // the first test's Service: port 81 is not one of its ports
      const port = await env.send('node1-a', 'tcp', other, 81, { timeoutMs: 3000 });
      assert.deepEqual([port.ok, !port.ok && port.error], [false, 'ECONNREFUSED']);
    });

    it('left to the tc programs, and still honoured for the pod: ClientIP affinity, Maglev', async () => {
      const sticky = '10.96.5.16';
      const maglev = '10.96.5.17';
      await env.apply(
        service({
          name: 'sticky',
          clusterIP: sticky,
          ports: webPorts(),
          sessionAffinity: 'ClientIP',
          affinityTimeoutSeconds: 600,
        }),
        endpointSlice('sticky', eps('node1-b', 'node2-a', 'node2-b'), webPorts()),
        withAnnotation(
          service({ name: 'mg', clusterIP: maglev, ports: webPorts() }),
          'kube-proxy-ts/lb-algorithm',
          'maglev',
        ),
        endpointSlice('mg', eps('node1-b', 'node2-a', 'node2-b'), webPorts()),
      );
      await env.waitReachable('node1-a', 'tcp', sticky, 80);
      await env.waitReachable('node1-a', 'tcp', maglev, 80);
      const before = await ct();
      const rs = await env.sendMany('node1-a', 'tcp', sticky, 80, 10);
      assert.ok(
        rs.every((r) => r.ok),
        JSON.stringify(rs.filter((r) => !r.ok)),
      );
      assert.equal(podsOf(rs).length, 1, `affinity: ${podsOf(rs).join(',')}`);
      const mid = await ct();
      assert.ok(mid > before, 'affinity is the tc path');
      const m = await env.send('node1-a', 'tcp', maglev, 80);
      assert.ok(m.ok, JSON.stringify(m));
      assert.equal(m.peer, `${maglev}:80`);
      assert.ok((await ct()) > mid, 'Maglev is the tc path');
    });
  });

/** The pid of the agent process in namespace ns (started by the harness, so ours). */
function agentPid(ns: string): number {
  const pids = execFileSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).split(/\s+/).filter(Boolean);
  for (const p of pids) {
    const cmd = execFileSync('cat', [`/proc/${p}/cmdline`], { encoding: 'utf8' });
    if (cmd.includes('agent')) return Number(p);
  }
  throw new Error(`no agent process in ${ns}`);
}
