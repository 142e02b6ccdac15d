// IPVS-only behaviours with real packets, in the QEMU guest: schedulers (rr
// spreads evenly, sh keeps a client on one endpoint, lc prefers the idle
// endpoint), ClientIP persistence, graceful termination of TCP real servers
// (a long-lived connection survives its endpoint's removal; deletion once
// drained or after the bound), UDP real servers of gone and of terminating
// endpoints, SCTP, KUBE-IPVS-FILTER, and the sysctls.
//
// The cluster is test/netns's (two nodes, two pods each, echo servers); the
// IPVS dataplane runs in this process against node1's namespace (netlink
// sockets opened in it, ipset and iptables run inside it), fed SyncStates
// built from the same Service and EndpointSlice objects the cluster suites
// send to the API server. Clients are node1's pods and node1 itself.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../src/core/types.js';
import { realClock } from '../../src/platform/clock.js';
import { netnsRunner } from '../../src/platform/exec.js';
import { runnerSysctl } from '../../src/platform/iptables/sysctl.js';
import { IpvsDataplane, type IpvsModeOptions } from '../../src/platform/ipvs/dataplane.js';
import { openKernel, type IpvsKernelDeps } from '../../src/platform/ipvs/kernel.js';
import { NetnsCluster } from '../netns/cluster.js';
import { podsOf } from '../netns/e2e.js';
import { endpointSlice, service, webPorts, type EndpointSpec, type PortSpec } from '../netns/fixtures.js';
import type { KubeObject } from '../netns/kube.js';
import { nsRun, nsSpawn, type NsProcess } from '../netns/spawn.js';
import { CLUSTER_CIDR } from '../netns/topology.js';
import type { ClientResult } from '../netns/agentclient.js';

const OPTS: IpvsModeOptions = {
  scheduler: 'rr',
  excludeCIDRs: [],
  strictARP: true,
  tcpTimeout: 0,
  tcpFinTimeout: 2, // closed connections leave IPVS's table 2 s after their FIN
  udpTimeout: 0,
};

describe('IPVS behaviours with real packets (node1 runs the dataplane in-process)', { concurrency: false }, () => {
  let cluster: NetnsCluster;
  let kernel: IpvsKernelDeps;
  let objects = new Map<string, KubeObject>();
  const dataplanes: IpvsDataplane[] = [];

  const n1 = () => cluster.node('node1');
  const pod = (n: string) => cluster.pod(n);
  const eps = (...names: string[]): EndpointSpec[] => names.map((n) => ({ pod: pod(n) }));
  const config = (): DataplaneConfig => ({
    family: 'IPv4',
    masqueradeMark: 0x4000,
    masqueradeAll: false,
    localDetector: { kind: 'cidr', cidrs: [CLUSTER_CIDR] },
    nodePortAddresses: null,
    localhostNodePorts: false,
    localIPs: [n1().ip],
  });
  const dataplane = (scheduler: string, drainMs = 60_000) => {
    const dp = new IpvsDataplane({
      config: config(),
      ipvs: { ...OPTS, scheduler },
      kernel,
      run: netnsRunner(n1().ns),
      clock: realClock,
      syncPeriodMs: 3_600_000,
      drainBounds: { tcpMs: drainMs, udpMs: drainMs },
      drainCheckMs: 3_600_000, // the tests call checkDraining() themselves
    });
    dataplanes.push(dp);
    return dp;
  };
  const state = (): SyncState =>
    syncStateFromObjects({
      services: [...objects.values()].filter((o) => o.kind === 'Service') as never,
      slices: [...objects.values()].filter((o) => o.kind === 'EndpointSlice') as never,
      family: 'IPv4',
      nodeName: 'node1',
      nodeIPs: { IPv4: n1().ip },
    });
  const apply = async (dp: IpvsDataplane, ...objs: KubeObject[]) => {
    for (const o of objs) objects.set(`${o.kind}/${(o.metadata as { name: string }).name}`, o);
    return dp.sync(state());
  };
  const send = async (from: string, proto: 'tcp' | 'udp', ip: string, port: number, opts = {}) => {
    const a = await cluster.agent(from);
    return proto === 'tcp' ? a.tcp(ip, port, opts) : a.udp(ip, port, opts);
  };
  const sendMany = async (from: string, ip: string, n: number, port = 80): Promise<ClientResult[]> => {
    const out: ClientResult[] = [];
    for (let i = 0; i < n; i++) out.push(await send(from, 'tcp', ip, port));
    return out;
  };
  const counts = (rs: ClientResult[]) => {
    const m: Record<string, number> = {};
    for (const r of rs) if (r.ok) m[r.reply.pod] = (m[r.reply.pod] ?? 0) + 1;
    return m;
  };
  const ipvsadm = async (...args: string[]) => (await nsRun(n1().ns, ['ipvsadm', ...args])).stdout;

  before(async () => {
    cluster = await NetnsCluster.create();
    kernel = await openKernel(
      netnsRunner(cluster.node('node1').ns),
      runnerSysctl(netnsRunner(cluster.node('node1').ns)),
      cluster.node('node1').ns,
    );
  });
  after(async () => {
    for (const dp of dataplanes) dp.close();
    kernel?.close();
    await cluster?.destroy();
  });

  it('rr: 40 connections from one client spread exactly evenly over 4 endpoints', async () => {
    objects = new Map();
    const dp = dataplane('rr');
    await apply(
      dp,
      service({ name: 'rr', clusterIP: '10.96.5.1', ports: webPorts() }),
      endpointSlice('rr', eps('node1-a', 'node1-b', 'node2-a', 'node2-b'), webPorts()),
    );
    const rs = await sendMany('node1-a', '10.96.5.1', 40);
    assert.deepEqual(
      counts(rs),
      { 'node1-a': 10, 'node1-b': 10, 'node2-a': 10, 'node2-b': 10 },
      JSON.stringify(rs.filter((r) => !r.ok)),
    );
    assert.match(await ipvsadm('-Ln', '-t', '10.96.5.1:80'), /TCP\s+10\.96\.5\.1:80 rr/);
  });

  it('sh: the scheduler changes in place, and each client stays on one endpoint', async () => {
    const dp = dataplane('sh');
    await dp.sync(state()); // same Services, new scheduler: an edit of the virtual server
    assert.match(await ipvsadm('-Ln', '-t', '10.96.5.1:80'), /TCP\s+10\.96\.5\.1:80 sh/);
    for (const client of ['node1-a', 'node1-b']) {
      const rs = await sendMany(client, '10.96.5.1', 12);
      assert.ok(
        rs.every((r) => r.ok),
        JSON.stringify(rs),
      );
      assert.equal(podsOf(rs).length, 1, `${client} stays on one endpoint: ${JSON.stringify(counts(rs))}`);
    }
  });

  it('lc: while one endpoint holds a connection, new ones go to the idle endpoint', async () => {
    objects = new Map();
    const dp = dataplane('lc');
    await apply(
      dp,
      service({ name: 'lc', clusterIP: '10.96.5.2', ports: webPorts() }),
      endpointSlice('lc', eps('node2-a', 'node2-b'), webPorts()),
    );
    const client = await cluster.agent('node1-b');
    assert.ok((await client.open('lc-held', '10.96.5.2', 80)).ok);
    const held = await client.send('lc-held', 'hello');
    assert.ok(held.ok, JSON.stringify(held));
    const busy = held.reply.pod;
    const rs = await sendMany('node1-a', '10.96.5.2', 8);
    assert.deepEqual(podsOf(rs), [busy === 'node2-a' ? 'node2-b' : 'node2-a'], JSON.stringify(counts(rs)));
    await client.closeConn('lc-held');
  });

  it('ClientIP affinity is IPVS persistence with the Service timeout', async () => {
    const dp = dataplane('rr');
    await apply(
      dp,
      service({
        name: 'sticky',
        clusterIP: '10.96.5.3',
        ports: webPorts(),
        sessionAffinity: 'ClientIP',
        affinityTimeoutSeconds: 600,
      }),
      endpointSlice('sticky', eps('node1-a', 'node1-b', 'node2-a', 'node2-b'), webPorts()),
    );
    assert.match(await ipvsadm('-Ln', '-t', '10.96.5.3:80'), /10\.96\.5\.3:80 rr persistent 600/);
    const rs = await sendMany('node1-a', '10.96.5.3', 12);
    assert.ok(
      rs.every((r) => r.ok),
      JSON.stringify(rs),
    );
    assert.equal(podsOf(rs).length, 1, `one endpoint for one client: ${JSON.stringify(counts(rs))}`);
  });

  it("graceful termination: a long-lived connection survives its endpoint's removal; the real server goes once drained", async () => {
    const dp = dataplane('rr');
    await apply(
      dp,
      service({ name: 'drain', clusterIP: '10.96.5.4', ports: webPorts() }),
      endpointSlice('drain', eps('node2-a', 'node2-b'), webPorts()),
    );
    const client = await cluster.agent('node1-a');
    assert.ok((await client.open('long', '10.96.5.4', 80)).ok);
    const first = await client.send('long', 'before');
    assert.ok(first.ok, JSON.stringify(first));
    const gone = first.reply.pod;
    const stays = gone === 'node2-a' ? 'node2-b' : 'node2-a';
    await apply(dp, endpointSlice('drain', eps(stays), webPorts()));
    assert.match(
      await ipvsadm('-Ln', '-t', '10.96.5.4:80'),
      new RegExp(`${pod(gone).ip.replaceAll('.', '\\.')}:8080\\s+Masq\\s+0\\s+1`),
    );
    const during = await client.send('long', 'during');
    assert.ok(during.ok && during.reply.pod === gone, `the held connection still works: ${JSON.stringify(during)}`);
    assert.equal(await dp.checkDraining(), 0, 'an active connection keeps the real server');
    assert.deepEqual(podsOf(await sendMany('node1-b', '10.96.5.4', 6)), [stays], 'new connections avoid it');
    // An RST: IPVS keeps a reset connection 10 s (a FIN'ed one 2 minutes in TIME_WAIT), then the real server goes.
    await client.closeConn('long', true);
    const deadline = Date.now() + 30_000;
    while ((await dp.checkDraining()) === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 1000));
    assert.doesNotMatch(await ipvsadm('-Ln', '-t', '10.96.5.4:80'), new RegExp(pod(gone).ip.replaceAll('.', '\\.')));
  });

  it('graceful termination is bounded: a real server kept busy is deleted once the wait is over', async () => {
    const bound = 15_000; // longer than a sync takes under emulation
    const dp = dataplane('rr', bound);
    await apply(dp, endpointSlice('drain', eps('node2-a', 'node2-b'), webPorts()));
    const client = await cluster.agent('node1-b');
    assert.ok((await client.open('busy', '10.96.5.4', 80)).ok);
    const first = await client.send('busy', 'x');
    assert.ok(first.ok);
    const gone = first.reply.pod;
    await apply(dp, endpointSlice('drain', eps(gone === 'node2-a' ? 'node2-b' : 'node2-a'), webPorts()));
    const retired = Date.now();
    assert.equal(await dp.checkDraining(), 0, 'within the bound it stays');
    await new Promise((r) => setTimeout(r, Math.max(0, retired + bound + 500 - Date.now())));
    assert.equal(await dp.checkDraining(), 1, 'past the bound it goes, busy or not');
    assert.doesNotMatch(await ipvsadm('-Ln', '-t', '10.96.5.4:80'), new RegExp(pod(gone).ip.replaceAll('.', '\\.')));
    await client.closeConn('busy');
  });

  it('UDP: a flow from a fixed source port moves on when its endpoint is gone; a terminating one drains', async () => {
    const dp = dataplane('rr');
    const ports = webPorts();
    await apply(
      dp,
      service({ name: 'dns', clusterIP: '10.96.5.5', ports }),
      endpointSlice('dns', eps('node2-a'), ports),
    );
    const fixed = { localPort: 42000 };
    const a = await send('node1-a', 'udp', '10.96.5.5', 53, fixed);
    assert.ok(a.ok && a.reply.pod === 'node2-a', JSON.stringify(a));
    // Terminating (still in the slice, may still answer): weight 0, the flow stays.
    const term: EndpointSpec = { pod: pod('node2-a'), ready: false, serving: true, terminating: true };
    await apply(dp, endpointSlice('dns', [term, { pod: pod('node2-b') }], ports));
    assert.match(await ipvsadm('-Ln', '-u', '10.96.5.5:53'), /10\.244\.\d+\.\d+:5353\s+Masq\s+0/);
    const stays = await send('node1-a', 'udp', '10.96.5.5', 53, fixed);
    assert.ok(
      stays.ok && stays.reply.pod === 'node2-a',
      `the flow stays on the draining endpoint: ${JSON.stringify(stays)}`,
    );
    // Gone from the slice: deleted at once, the same 5-tuple is scheduled anew.
    await apply(dp, endpointSlice('dns', eps('node2-b'), ports));
    assert.doesNotMatch(
      await ipvsadm('-Ln', '-u', '10.96.5.5:53'),
      new RegExp(`${pod('node2-a').ip.replaceAll('.', '\\.')}:`),
    );
    let moved: ClientResult | undefined;
    for (let i = 0; i < 5 && !(moved?.ok && moved.reply.pod === 'node2-b'); i++)
      moved = await send('node1-a', 'udp', '10.96.5.5', 53, { ...fixed, timeoutMs: 1000 });
    assert.ok(moved?.ok && moved.reply.pod === 'node2-b', `the flow moved: ${JSON.stringify(moved)}`);
  });

  it('SCTP: associations through a ClusterIP reach the endpoint, client address preserved', async () => {
    const dp = dataplane('rr');
    const ports: PortSpec[] = [{ name: 'sctp', port: 9000, targetPort: 9000, protocol: 'SCTP' as never }];
    const servers: NsProcess[] = [];
    try {
      for (const p of ['node2-a', 'node2-b']) servers.push(nsSpawn(pod(p).ns, ['python3', '-c', SCTP_SERVER, p]));
      await apply(
        dp,
        service({ name: 'sctp', clusterIP: '10.96.5.6', ports }),
        endpointSlice('sctp', eps('node2-a', 'node2-b'), ports),
      );
      assert.match(await ipvsadm('-Ln'), /SCTP\s+10\.96\.5\.6:9000 rr/);
      const seen = new Set<string>();
      for (let i = 0; i < 4; i++) {
        const r = await nsRun(pod('node1-a').ns, ['python3', '-c', SCTP_CLIENT, '10.96.5.6', '9000'], {
          allowFailure: true,
        });
        assert.equal(r.code, 0, r.stderr);
        const [who, peer] = r.stdout.trim().split(' ');
        assert.equal(peer, pod('node1-a').ip, 'the endpoint sees the client');
        seen.add(who!);
      }
      assert.deepEqual([...seen].sort(), ['node2-a', 'node2-b'], 'rr alternates');
    } finally {
      for (const s of servers) await s.stop(1000);
    }
  });

  it('KUBE-IPVS-FILTER refuses other ports of a Service address; the sysctls and strict ARP are set', async () => {
    const r = await send('node1-a', 'tcp', '10.96.5.4', 8443, { timeoutMs: 3000 });
    assert.deepEqual([r.ok, !r.ok && r.error], [false, 'ECONNREFUSED']);
    const sys = async (k: string) => (await nsRun(n1().ns, ['sysctl', '-n', k])).stdout.trim();
    assert.equal(await sys('net.ipv4.vs.conntrack'), '1');
    assert.equal(await sys('net.ipv4.vs.expire_nodest_conn'), '1');
    assert.equal(await sys('net.ipv4.vs.expire_quiescent_template'), '1');
    assert.equal(await sys('net.ipv4.conf.all.arp_ignore'), '1');
    assert.equal(await sys('net.ipv4.conf.all.arp_announce'), '2');
    assert.match(await ipvsadm('-L', '--timeout'), /Timeout \(tcp tcpfin udp\): \d+ 2 \d+/);
    assert.match((await nsRun(n1().ns, ['ip', 'link', 'show', 'kube-ipvs0'])).stdout, /state DOWN/);
  });
});

/** An SCTP echo: answers each association with its pod name and the peer address it saw. */
const SCTP_SERVER = `
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_SCTP)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', 9000)); s.listen(16)
while True:
    c, peer = s.accept()
    c.recv(100); c.send(f'{sys.argv[1]} {peer[0]}'.encode()); c.close()
`;
const SCTP_CLIENT = `
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_SCTP)
s.settimeout(20); s.connect((sys.argv[1], int(sys.argv[2]))); s.send(b'hi'); print(s.recv(100).decode())
`;
