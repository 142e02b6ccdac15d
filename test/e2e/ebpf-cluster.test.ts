// What only the ebpf mode has, with real packets in the two-node namespace
// cluster (the behaviours every mode shares run in cluster-*.test.ts):
//   - a proxy restart under a steady stream of new connections fails none of
//     them (the programs stay attached through their pinned links, and the
//     new proxy swaps its programs in and adopts the maps);
//   - tc programs of another tool on the node's interfaces (tcx and cls_bpf)
//     keep running through a restart and through --cleanup;
//   - Maglev (per-Service annotation): a flow gets the same endpoint whichever
//     node it enters through;
//   - ClientIP affinity (kept in an LRU map) holds while the client keeps
//     connecting and expires after timeoutSeconds of quiet;
//   - the cls_bpf fallback (--ebpf-attach tc) carries Service traffic;
//   - socket-level load balancing (--ebpf-socket-lb-cgroup) for the node's
//     processes, in a cgroup this test creates: connect/sendmsg go straight
//     to an endpoint, getpeername/recvmsg still show the Service address;
//   - --ebpf-xdp auto puts the XDP program on node1's uplink (the interface
//     with its Node IP) and it balances NodePort connections from outside;
//   - --ebpf-lb-mode dsr on both nodes: an eTP Cluster NodePort connection
//     from outside to node1, balanced to node2's endpoint, keeps the client's
//     address, and node2 answers it (the option sent, the entry written).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { E2EEnv, podsOf, srcIP } from '../netns/e2e.js';
import { endpointSlice, service, webPorts, type EndpointSpec } from '../netns/fixtures.js';
import type { KubeObject } from '../netns/kube.js';
import { E2E_MODES } from '../netns/proxy.js';
import { TEST_PIN_ROOT } from '../ebpf/bpfnode.js';
import * as L from '../../src/dataplane/ebpf/layout.js';
import { nsRun } from '../netns/spawn.js';
import { attachForeign } from '../ebpf/foreign.js';

const RUN = E2E_MODES.includes('ebpf');

function withAnnotation(o: KubeObject, key: string, value: string): KubeObject {
  return { ...o, metadata: { ...o.metadata, annotations: { [key]: value } } };
}

if (RUN)
  describe(
    'ebpf mode: restart, foreign programs, Maglev, affinity timeout, cls_bpf fallback, socket LB, XDP',
    { concurrency: false },
    () => {
      let env: E2EEnv;
      // A cgroup of our own for the node agent (never the root cgroup), made by the socket-LB part below.
      const cgroup = `/sys/fs/cgroup/unified/kpt-${process.pid}-socklb`;
      before(async () => {
        env = await E2EEnv.start('ebpf');
      });
      after(async () => {
        await env?.dispose();
        if (existsSync(cgroup)) rmdirSync(cgroup); // empty now: the agent moved into it has exited
      });
      const eps = (...names: string[]): EndpointSpec[] => names.map((n) => ({ pod: env.cluster.pod(n) }));

      it('a proxy restart fails no connection: new TCP and UDP exchanges keep succeeding throughout', async () => {
        const ip = '10.96.3.10';
        await env.apply(
          service({ name: 'steady', clusterIP: ip, ports: webPorts() }),
          endpointSlice('steady', eps('node1-b', 'node2-a'), webPorts()),
        );
        await env.waitReachable('node1-a', 'tcp', ip, 80);
        const results: Array<{ ok: boolean; what: string }> = [];
        let stop = false;
        const load = (async () => {
          while (!stop) {
            const t = await env.send('node1-a', 'tcp', ip, 80, { timeoutMs: 1000 });
            const u = await env.send('node1-a', 'udp', ip, 53, { timeoutMs: 1000 });
            results.push(
              { ok: t.ok, what: t.ok ? 'tcp' : `tcp ${t.error}` },
              { ok: u.ok, what: u.ok ? 'udp' : `udp ${u.error}` },
            );
          }
        })();
        const proxy = env.proxy('node1');
        await new Promise((r) => setTimeout(r, 300));
        const firstLog = proxy.log();
        await proxy.stop();
        const down = results.length;
        await new Promise((r) => setTimeout(r, 500));
        await proxy.start();
        await new Promise((r) => setTimeout(r, 500));
        stop = true;
        await load;
        const failed = results.filter((r) => !r.ok);
        assert.ok(results.length > down + 4, `exchanges while down and after: ${results.length - down}`);
        assert.deepEqual(failed, [], `${failed.length} of ${results.length} exchanges failed`);
        assert.match(proxy.log(), /adopted pinned BPF maps/);
        // Each family's first plan after a fresh start read nothing back (maps the process created hold no
        // entry of a family that has not written yet; the IPv6 plan used to read every IPv4 entry); the
        // restarted process adopted the pinned maps, and read them.
        const firstSyncs = (log: string) => {
          const out = new Map<string, { readBack: number }>();
          for (const line of log.split('\n')) {
            if (!line.includes('BPF maps synced')) continue;
            const l = JSON.parse(line) as { family: string; readBack: number };
            if (!out.has(l.family)) out.set(l.family, l);
          }
          return out;
        };
        const fresh = firstSyncs(firstLog);
        assert.deepEqual([...fresh.keys()].sort(), ['IPv4', 'IPv6'], firstLog.slice(0, 3000));
        for (const [family, l] of fresh) assert.equal(l.readBack, 0, `${family} after a fresh start`);
        assert.ok(firstSyncs(proxy.log()).get('IPv4')!.readBack > 0, 'IPv4 after the restart read the adopted maps');
      });

      it('foreign tc programs (tcx and cls_bpf) keep running through a restart and --cleanup', async () => {
        const bpf = env.proxy('node2').bpfNode!;
        await attachForeign(bpf, 'egress', 9);
        const progs = () => bpf.helper<{ ingress: string[]; egress: string[] }>({ cmd: 'programs', ifname: 'eth0' });
        assert.deepEqual((await progs()).ingress, ['kpt_ingress', 'foreign_tc']);

        const proxy = env.proxy('node2');
        await proxy.stop();
        await proxy.start();
        assert.deepEqual((await progs()).ingress, ['kpt_ingress', 'foreign_tc'], 'after a restart');
        const ip = '10.96.3.11';
        await env.apply(
          service({ name: 'stillok', clusterIP: ip, ports: webPorts() }),
          endpointSlice('stillok', eps('node1-a'), webPorts()),
        );
        await env.waitReachable('node2-a', 'tcp', ip, 80);

        await proxy.stop();
        const r = await proxy.cleanup();
        assert.equal(r.code, 0, r.output);
        assert.deepEqual(await progs(), { ingress: ['foreign_tc'], egress: [] });
        const f = await bpf.exec(['tc', 'filter', 'show', 'dev', 'eth0', 'egress']);
        assert.match(f.stdout, /pref 9 bpf .*foreign\.o:\[tc\] direct-action/);
        const pins = (await bpf.exec(['ls', '/sys/fs/bpf'])).stdout.split('\n');
        assert.ok(pins.includes('foreign-tcx') && !pins.includes(TEST_PIN_ROOT.split('/').pop()!), pins.join(' '));
        const nft = (await bpf.exec(['nft', 'list', 'tables'])).stdout;
        assert.doesNotMatch(nft, /kube-proxy-ebpf/);
        await proxy.start(); // the next tests want it back
      });

      it('Maglev (annotation): a flow keeps its endpoint whichever node it enters through', async () => {
        const extIP = '192.168.96.10';
        await env.apply(
          withAnnotation(
            service({ name: 'mg', clusterIP: '10.96.3.12', ports: webPorts(), externalIPs: [extIP] }),
            'kube-proxy-ts/lb-algorithm',
            'maglev',
          ),
          endpointSlice('mg', eps('node1-a', 'node1-b', 'node2-a', 'node2-b'), webPorts()),
        );
        const picks = async (via: string) => {
          await env.cluster.routeVia('ext', `${extIP}/32`, via);
          await env.waitReachable('ext', 'udp', extIP, 53, { localPort: 42000 });
          const out: string[] = [];
          for (let p = 42000; p < 42012; p++) {
            const r = await env.send('ext', 'udp', extIP, 53, { localPort: p });
            assert.ok(r.ok, `${via} port ${p}: ${JSON.stringify(r)}`);
            assert.notEqual(srcIP(r.reply), env.cluster.external.ip, 'eTP Cluster: masqueraded');
            out.push(r.reply.pod);
          }
          return out;
        };
        const viaNode1 = await picks('node1');
        const viaNode2 = await picks('node2');
        assert.deepEqual(viaNode2, viaNode1, 'the same endpoint for the same flow on both nodes');
        assert.ok(new Set(viaNode1).size >= 2, `flows spread over endpoints: ${viaNode1.join(' ')}`);
      });

      it('ClientIP affinity lasts while the client keeps coming and ends after timeoutSeconds of quiet', async () => {
        const ip = '10.96.3.13';
        await env.apply(
          service({
            name: 'brief',
            clusterIP: ip,
            ports: webPorts(),
            sessionAffinity: 'ClientIP',
            affinityTimeoutSeconds: 3,
          }),
          endpointSlice('brief', eps('node1-a', 'node1-b', 'node2-a', 'node2-b'), webPorts()),
        );
        await env.waitReachable('node2-b', 'tcp', ip, 80);
        const one = async () => {
          const rs = await env.sendMany('node2-b', 'tcp', ip, 80, 4);
          assert.ok(
            rs.every((r) => r.ok),
            JSON.stringify(rs),
          );
          const pods = podsOf(rs);
          assert.equal(pods.length, 1, `connections in a row stick to one endpoint: ${pods.join(' ')}`);
          return pods[0]!;
        };
        // After 4 s of quiet the remembered endpoint has expired and the next connection is balanced
        // again: over 8 quiet periods, 4 endpoints give a different pick with probability 1 - 4^-8.
        const first = await one();
        const later: string[] = [];
        for (let round = 0; round < 8 && later.every((p) => p === first); round++) {
          await new Promise((r) => setTimeout(r, 4000));
          later.push(await one());
        }
        assert.ok(
          later.some((p) => p !== first),
          `still ${first} after every quiet period: ${later.join(' ')}`,
        );
      });

      describe('node1 switched to --ebpf-attach tc --ebpf-socket-lb-cgroup <a cgroup of ours>', () => {
        before(async () => {
          mkdirSync(cgroup);
          const old = env.proxy('node1');
          await old.stop();
          assert.equal((await old.cleanup()).code, 0);
          await env.replaceProxy('node1', ['--ebpf-attach', 'tc', '--ebpf-socket-lb-cgroup', cgroup]);
        });
        it('with --ebpf-attach tc the programs are cls_bpf filters and carry Service traffic', async () => {
          const ip = '10.96.4.10';
          const ports = webPorts(30400);
          await env.apply(
            service({ name: 'tc', type: 'NodePort', clusterIP: ip, ports }),
            endpointSlice('tc', eps('node1-b', 'node2-b'), ports),
          );
          const rs = await env.waitFor('pod -> ClusterIP reaches both endpoints', async () => {
            const r = await env.sendMany('node1-a', 'tcp', ip, 80, 10);
            return podsOf(r).length === 2 && r.every((x) => x.ok) ? r : undefined;
          });
          for (const r of rs.value) assert.ok(r.ok && srcIP(r.reply) === env.cluster.pod('node1-a').ip);
          const np = await env.waitReachable('ext', 'tcp', env.cluster.node('node1').ip, 30400);
          assert.ok(['node1-b', 'node2-b'].includes(np.value.pod));
          const bpf = env.proxy('node1').bpfNode!;
          const f = await bpf.exec(['tc', 'filter', 'show', 'dev', 'eth0', 'ingress']);
          assert.match(f.stdout, /pref 1 bpf .*handle 0x4b505453 kpt_ingress.* direct-action/);
          assert.deepEqual((await bpf.helper<{ ingress: string[] }>({ cmd: 'programs', ifname: 'eth0' })).ingress, []);
        });

        it('socket LB: the node agent in our cgroup reaches an endpoint directly; it still sees the Service address', async () => {
          const ip = '10.96.4.11';
          await env.apply(
            service({ name: 'sock', clusterIP: ip, ports: webPorts() }),
            endpointSlice('sock', eps('node2-a', 'node2-b'), webPorts()),
          );
          await env.waitReachable('node1-a', 'tcp', ip, 80);
          // Move the node1 agent (our own process) into the test cgroup.
          writeFileSync(`${cgroup}/cgroup.procs`, String(await nodeAgentPid(env)));
          const bpf = env.proxy('node1').bpfNode!;
          const ct = async () =>
            (await bpf.helper<{ entries: Array<[string, string]> }>({ cmd: 'dump', pinRoot: TEST_PIN_ROOT, map: 'ct' }))
              .entries.length;
          const before = await ct();
          const tcp = await env.sendMany('node1', 'tcp', ip, 80, 8);
          const udp = await env.sendMany('node1', 'udp', ip, 53, 8);
          for (const r of [...tcp, ...udp]) {
            assert.ok(r.ok, JSON.stringify(r));
            assert.ok(['node2-a', 'node2-b'].includes(r.reply.pod));
            // The socket was sent to an endpoint, yet getpeername (TCP) and recvmsg (UDP) show the Service.
            assert.equal(r.peer?.slice(0, r.peer.lastIndexOf(':')), ip, `getpeername/recvmsg: ${r.peer}`);
          }
          assert.equal(await ct(), before, 'no tc connection entries: the packets never carried the Service address');
        });
      });

      describe('node1 switched to --ebpf-xdp auto', () => {
        // ext sends full checksums, as a real network delivers them: XDP leaves a veth peer's partial ones to tc.
        const offload = (on: boolean) =>
          nsRun(env.cluster.external.ns, ['ethtool', '-K', 'eth0', 'tx', on ? 'on' : 'off']);
        before(async () => {
          const old = env.proxy('node1');
          await old.stop();
          assert.equal((await old.cleanup()).code, 0);
          await env.replaceProxy('node1', ['--ebpf-xdp', 'auto']);
          await offload(false);
        });
        after(() => offload(true));
        it('the program runs on the uplink and balances eTP Local NodePort connections from outside', async () => {
          const ports = webPorts(30500);
          await env.apply(
            service({ name: 'xdp', type: 'NodePort', clusterIP: '10.96.5.10', ports, externalTrafficPolicy: 'Local' }),
            endpointSlice('xdp', eps('node1-b', 'node2-b'), ports),
          );
          const n1 = env.cluster.node('node1');
          await env.waitReachable('ext', 'tcp', n1.ip, 30500);
          const bpf = env.proxy('node1').bpfNode!;
          assert.match((await bpf.exec(['ip', '-d', 'link', 'show', 'dev', 'eth0'])).stdout, /prog\/xdp id \d+/);
          assert.match(env.proxy('node1').log(), /XDP program attached/);
          const xdpNew = async () =>
            Number(
              (await bpf.helper<{ stats: string[] }>({ cmd: 'stats', pinRoot: TEST_PIN_ROOT })).stats[L.STAT.xdpNew],
            );
          const before = await xdpNew();
          const rs = await env.sendMany('ext', 'tcp', n1.ip, 30500, 8);
          for (const r of rs) {
            assert.ok(r.ok, JSON.stringify(r));
            assert.equal(r.reply.pod, 'node1-b', 'eTP Local: the local endpoint only');
            assert.equal(srcIP(r.reply), env.cluster.external.ip, 'the client address kept');
          }
          assert.equal((await xdpNew()) - before, rs.length, 'every connection balanced in XDP');
        });
      });

      describe('both nodes switched to --ebpf-lb-mode dsr (node1 keeps XDP)', () => {
        before(async () => {
          await env.replaceProxy('node1', ['--ebpf-xdp', 'auto', '--ebpf-lb-mode', 'dsr']);
          await env.replaceProxy('node2', ['--ebpf-lb-mode', 'dsr']);
          await nsRun(env.cluster.external.ns, ['ethtool', '-K', 'eth0', 'tx', 'off']);
        });
        after(() => nsRun(env.cluster.external.ns, ['ethtool', '-K', 'eth0', 'tx', 'on']));
        it("an eTP Cluster NodePort on node1 to node2's endpoint: the endpoint sees the client, node2 answers it", async () => {
          const ports = webPorts(30600);
          await env.apply(
            service({ name: 'dsr', type: 'NodePort', clusterIP: '10.96.6.10', ports }),
            endpointSlice('dsr', eps('node2-b'), ports),
          );
          const n1 = env.cluster.node('node1');
          await env.waitReachable('ext', 'tcp', n1.ip, 30600);
          const stat = async (node: string, i: number) =>
            Number(
              (await env.proxy(node).bpfNode!.helper<{ stats: string[] }>({ cmd: 'stats', pinRoot: TEST_PIN_ROOT }))
                .stats[i],
            );
          const before = [await stat('node1', L.STAT.dsrOpt), await stat('node2', L.STAT.dsrReply)];
          const rs = [
            ...(await env.sendMany('ext', 'tcp', n1.ip, 30600, 6)),
            ...(await env.sendMany('ext', 'udp', n1.ip, 30601, 4)),
          ];
          for (const r of rs) {
            assert.ok(r.ok, JSON.stringify(r));
            assert.equal(r.reply.pod, 'node2-b');
            assert.equal(srcIP(r.reply), env.cluster.external.ip, 'not masqueraded');
          }
          const after = [await stat('node1', L.STAT.dsrOpt), await stat('node2', L.STAT.dsrReply)];
          assert.deepEqual(
            after.map((x, i) => x - before[i]!),
            [rs.length, rs.length],
            'node1 sent each connection with the option, node2 wrote each reply entry',
          );
        });
      });
    },
  );

/** The pid of the agent process serving the node1 namespace (started by the harness, so ours). */
async function nodeAgentPid(env: E2EEnv): Promise<number> {
  await env.cluster.agent('node1');
  const ns = env.cluster.nsOf('node1');
  const pids = execFileSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).split(/\s+/).filter(Boolean);
  for (const p of pids) {
    const cmd = execFileSync('cat', [`/proc/${p}/cmdline`], { encoding: 'utf8' });
    if (cmd.includes('agent')) return Number(p);
  }
  throw new Error(`no agent process in ${ns}`);
}
