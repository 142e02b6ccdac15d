// The userspace mode on the real kernel: the UserspaceDataplane runs in a
// node namespace (this same file, started as a child with KPT_US_CHILD=1,
// because a Node process cannot enter a namespace), real pods answer with
// the test agents, and every check is a real TCP/UDP exchange. Namespaces
// are `kpt-us-<pid>-<rand>-*`, registered with test/netns/cleanup.ts before
// they exist (removed on exit, failure, SIGINT/SIGTERM). Runs as root.
//
//   ext 192.168.77.100 (+ .101) --veth-- node 192.168.77.11 --veths-- pods
//     routes 10.96/16, the externalIP and the LB VIP via the node       pa 10.244.1.10, pb .11, pc .12 ("on node other")
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as readline from 'node:readline';
import { Agent, type ClientResult } from '../netns/agentclient.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../netns/cleanup.js';
import { ip, nodeScript, nsRun, nsSpawn, type NsProcess } from '../netns/spawn.js';

const NODE_IP = '192.168.77.11';
const EXT_IP = '192.168.77.100';
const EXTERNAL_IP = '192.168.99.50';
const LB_IP = '198.51.100.10';
const GW = '10.244.1.1';
const PODS = { pa: '10.244.1.10', pb: '10.244.1.11', pc: '10.244.1.12' } as const;
type Pod = keyof typeof PODS;
const TCP_PORT = 8080;
const UDP_PORT = 5353;

// ---------- child: the proxy's datapath inside the node namespace ----------

async function child(): Promise<void> {
  const { syncStateFromObjects } = await import('../../src/core/snapshot.js');
  const { UserspaceDataplane } = await import('../../src/platform/userspace/dataplane.js');
  const dp = new UserspaceDataplane({
    config: {
      family: 'IPv4',
      masqueradeMark: 0x4000,
      masqueradeAll: false,
      localDetector: { kind: 'none' },
      nodePortAddresses: null,
      localhostNodePorts: true,
      localIPs: ['127.0.0.1', NODE_IP, GW],
    },
  });
  const out = (o: unknown) => process.stdout.write(JSON.stringify(o) + '\n');
  readline
    .createInterface({ input: process.stdin })
    .on('line', (line) => {
      const req = JSON.parse(line) as { id: number; op: string; services?: unknown[]; slices?: unknown[] };
      const work = async () => {
        if (req.op === 'sync') {
          const st = syncStateFromObjects({
            services: req.services ?? [],
            slices: req.slices ?? [],
            family: 'IPv4',
            nodeName: 'node1',
            nodeIPs: { IPv4: NODE_IP },
          });
          return { counters: (await dp.sync(st)).counters };
        }
        if (req.op === 'stats') return dp.stats();
        if (req.op === 'cleanup') return dp.cleanup();
        throw new Error(`unknown op ${req.op}`);
      };
      work().then(
        (r) => out({ id: req.id, ok: true, result: r ?? null }),
        (e: unknown) => out({ id: req.id, ok: false, error: String(e) }),
      );
    })
    .on('close', () => {
      void dp.close().then(() => process.exit(0));
    });
  out({ id: 0, ok: true });
}

// ---------- test side ----------

class Proxy {
  private next = 1;
  private readonly waiting = new Map<number, (r: { ok: boolean; result?: unknown; error?: string }) => void>();
  readonly ready: Promise<void>;
  constructor(readonly proc: NsProcess) {
    let up!: () => void;
    this.ready = new Promise((r) => {
      up = r;
    });
    readline.createInterface({ input: proc.child.stdout! }).on('line', (l) => {
      let m: { id: number; ok: boolean; result?: unknown; error?: string };
      try {
        m = JSON.parse(l) as typeof m;
      } catch {
        return;
      }
      if (m.id === 0) up();
      this.waiting.get(m.id)?.(m);
      this.waiting.delete(m.id);
    });
  }
  async call(op: string, args: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.next++;
    const r = await new Promise<{ ok: boolean; result?: unknown; error?: string }>((resolve) => {
      this.waiting.set(id, resolve);
      this.proc.child.stdin!.write(JSON.stringify({ id, op, ...args }) + '\n');
    });
    if (!r.ok) throw new Error(`${op}: ${r.error}\n${this.proc.log()}`);
    return r.result;
  }
}

interface PortSpec {
  name: string;
  port: number;
  protocol?: 'TCP' | 'UDP';
  targetPort: number;
  nodePort?: number;
}

function svc(name: string, spec: Record<string, unknown>, ports: PortSpec[]) {
  return {
    metadata: { namespace: 'ns1', name },
    spec: {
      type: 'ClusterIP',
      ipFamilies: ['IPv4'],
      clusterIPs: [spec['clusterIP']],
      ...spec,
      ports: ports.map((p) => ({ protocol: 'TCP', ...p })),
    },
    ...(spec['lb'] ? { status: { loadBalancer: { ingress: (spec['lb'] as string[]).map((i) => ({ ip: i })) } } } : {}),
  };
}

/** An EndpointSlice; endpoints on pod 'pc' claim node "other", the rest node1. `dead` is an address where nothing listens. */
function eps(
  svcName: string,
  ports: Array<{ name: string; port: number; protocol?: 'TCP' | 'UDP' }>,
  pods: Array<Pod | 'dead'>,
) {
  return {
    metadata: { namespace: 'ns1', name: `${svcName}-1`, labels: { 'kubernetes.io/service-name': svcName } },
    addressType: 'IPv4',
    ports: ports.map((p) => ({ protocol: 'TCP', ...p })),
    endpoints: pods.map((p) => ({
      addresses: [p === 'dead' ? GW : PODS[p]],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: p === 'pc' ? 'other' : 'node1',
    })),
  };
}

const WEB: PortSpec[] = [
  { name: 'http', port: 80, targetPort: TCP_PORT, nodePort: 30080 },
  { name: 'dns', port: 53, protocol: 'UDP', targetPort: UDP_PORT, nodePort: 30053 },
];
const WEB_EPS = [
  { name: 'http', port: TCP_PORT },
  { name: 'dns', port: UDP_PORT, protocol: 'UDP' as const },
];

const podOf = (r: ClientResult) => (r.ok ? r.reply.pod : `error:${r.error}`);

if (process.env['KPT_US_CHILD'] === '1') {
  void child();
} else {
  describe('userspace mode on the real kernel', { concurrency: false }, () => {
    const prefix = `kpt-us-${process.pid}-${randomBytes(2).toString('hex')}-`;
    const NS = { node: `${prefix}node`, ext: `${prefix}ext`, pa: `${prefix}pa`, pb: `${prefix}pb`, pc: `${prefix}pc` };
    const agents = new Map<string, Agent>();
    let proxy: Proxy;
    let proc: NsProcess | undefined;
    const a = (n: string) => agents.get(n)!;

    async function sync(services: unknown[], slices: unknown[]): Promise<void> {
      await proxy.call('sync', { services, slices });
    }
    async function many(from: string, proto: 'tcp' | 'udp', host: string, port: number, n: number): Promise<string[]> {
      const out: string[] = [];
      for (let i = 0; i < n; i++) out.push(podOf(await a(from)[proto](host, port, { timeoutMs: 1500 })));
      return out;
    }

    before(async () => {
      for (const ns of Object.values(NS)) {
        trackNamespace(ns);
        await ip(['netns', 'add', ns]);
        await ip(['-n', ns, 'link', 'set', 'lo', 'up']);
      }
      await ip(['-n', NS.node, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', NS.ext]);
      await ip(['-n', NS.node, 'addr', 'add', `${NODE_IP}/24`, 'dev', 'eth0']);
      await ip(['-n', NS.node, 'link', 'set', 'eth0', 'up']);
      await ip(['-n', NS.ext, 'addr', 'add', `${EXT_IP}/24`, 'dev', 'eth0']);
      await ip(['-n', NS.ext, 'addr', 'add', '192.168.77.101/24', 'dev', 'eth0']);
      await ip(['-n', NS.ext, 'link', 'set', 'eth0', 'up']);
      for (const dst of ['10.96.0.0/16', `${EXTERNAL_IP}/32`, `${LB_IP}/32`])
        await ip(['-n', NS.ext, 'route', 'add', dst, 'via', NODE_IP]);
      // No ICMP redirects: ext's Service traffic leaves the node by the interface it came in on, and the
      // redirect the node would send first uses up the per-host ICMP rate limit, swallowing the REJECT's
      // port-unreachable that follows it.
      await nsRun(NS.node, [
        'sysctl',
        '-q',
        '-w',
        'net.ipv4.ip_forward=1',
        'net.ipv4.conf.all.send_redirects=0',
        'net.ipv4.conf.eth0.send_redirects=0',
      ]);
      // Service IPs are nowhere: a packet no rule took care of leaves eth0 and goes unanswered.
      await ip(['-n', NS.node, 'route', 'add', '10.96.0.0/16', 'dev', 'eth0']);
      for (const [i, pod] of (['pa', 'pb', 'pc'] as const).entries()) {
        await ip(['-n', NS.node, 'link', 'add', `veth${i}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', NS[pod]]);
        await ip(['-n', NS.node, 'addr', 'add', `${GW}/32`, 'dev', `veth${i}`]);
        await ip(['-n', NS.node, 'link', 'set', `veth${i}`, 'up']);
        await ip(['-n', NS.node, 'route', 'add', `${PODS[pod]}/32`, 'dev', `veth${i}`]);
        await ip(['-n', NS[pod], 'addr', 'add', `${PODS[pod]}/32`, 'dev', 'eth0']);
        await ip(['-n', NS[pod], 'link', 'set', 'eth0', 'up']);
        await ip(['-n', NS[pod], 'route', 'add', GW, 'dev', 'eth0', 'scope', 'link']);
        await ip(['-n', NS[pod], 'route', 'add', 'default', 'via', GW, 'dev', 'eth0']);
      }
      for (const [name, ns] of Object.entries(NS)) agents.set(name, await Agent.start(ns, name));
      for (const pod of ['pa', 'pb', 'pc']) await a(pod).serve([TCP_PORT], [UDP_PORT]);
      proc = nsSpawn(NS.node, nodeScript('./userspace-kernel.test.js', import.meta.url), {
        env: { KPT_US_CHILD: '1' },
        pipeStdout: true,
      });
      proxy = new Proxy(proc);
      await Promise.race([
        proxy.ready,
        proc.exited.then((c) => {
          throw new Error(`proxy child exited ${c}: ${proc!.log()}`);
        }),
      ]);
    });

    after(async () => {
      proc?.child.stdin?.end();
      await proc?.stop(2000);
      await Promise.all([...agents.values()].map((x) => x.stop().catch(() => {})));
      for (const ns of Object.values(NS)) {
        deleteNamespaceSync(ns);
        untrackNamespace(ns);
      }
    });

    it('ClusterIP (TCP and UDP) from outside, from a pod and from the node: round-robin over the endpoints', async () => {
      await sync([svc('web', { clusterIP: '10.96.0.10' }, WEB)], [eps('web', WEB_EPS, ['pa', 'pb'])]);
      for (const from of ['ext', 'pc', 'node']) {
        const tcp = await many(from, 'tcp', '10.96.0.10', 80, 4);
        assert.deepEqual([...tcp].sort(), ['pa', 'pa', 'pb', 'pb'], `${from} tcp: ${tcp.join(',')}`);
        const udp = await many(from, 'udp', '10.96.0.10', 53, 4);
        assert.deepEqual([...udp].sort(), ['pa', 'pa', 'pb', 'pb'], `${from} udp: ${udp.join(',')}`);
      }
    });

    it('the endpoint sees the proxy node as the client (no source-IP preservation in this mode)', async () => {
      const r = await a('ext').tcp('10.96.0.10', 80);
      assert.ok(r.ok, JSON.stringify(r));
      assert.equal(r.reply.src.split(':')[0], GW);
    });

    it('NodePort on the node IP from outside and on 127.0.0.1 / the node IP from the node itself; externalIP and LB VIP', async () => {
      await sync(
        [svc('web', { clusterIP: '10.96.0.10', type: 'LoadBalancer', externalIPs: [EXTERNAL_IP], lb: [LB_IP] }, WEB)],
        [eps('web', WEB_EPS, ['pa'])],
      );
      const checks: Array<[string, 'tcp' | 'udp', string, number]> = [
        ['ext', 'tcp', NODE_IP, 30080],
        ['ext', 'udp', NODE_IP, 30053],
        ['node', 'tcp', '127.0.0.1', 30080],
        ['node', 'tcp', NODE_IP, 30080],
        ['node', 'udp', '127.0.0.1', 30053],
        ['node', 'udp', NODE_IP, 30053],
        ['ext', 'tcp', EXTERNAL_IP, 80],
        ['ext', 'udp', EXTERNAL_IP, 53],
        ['ext', 'tcp', LB_IP, 80],
        ['pb', 'tcp', LB_IP, 80],
      ];
      for (const [from, proto, host, port] of checks) {
        assert.deepEqual(await many(from, proto, host, port, 2), ['pa', 'pa'], `${from} ${proto} ${host}:${port}`);
      }
    });

    it('a Service without endpoints refuses at once (REJECT: connection refused for TCP and UDP) on ClusterIP and NodePort', async () => {
      await sync([svc('web', { clusterIP: '10.96.0.10', type: 'NodePort' }, WEB)], []);
      for (const [from, host, port] of [
        ['ext', '10.96.0.10', 80],
        ['pa', '10.96.0.10', 80],
        ['node', '10.96.0.10', 80],
        ['ext', NODE_IP, 30080],
      ] as const) {
        const r = await a(from).tcp(host, port, { timeoutMs: 1500 });
        assert.equal(
          r.ok ? 'ok' : r.error,
          'ECONNREFUSED',
          `${from} -> ${host}:${port}\n${(await nsRun(NS.node, ['nft', 'list', 'ruleset'])).stdout}`,
        );
      }
      const u = await a('ext').udp('10.96.0.10', 53, { timeoutMs: 1500 });
      assert.equal(u.ok ? 'ok' : u.error, 'ECONNREFUSED');
    });

    it('a fixed-port UDP flow never reaches its old endpoint after zero endpoints or Service deletion', async () => {
      // No DNAT to the endpoint in this mode: the session is dropped with the endpoint, or the listener closes.
      for (const [i, change] of (['zero endpoints', 'Service deleted'] as const).entries()) {
        const fixed = { localPort: 42001 + i };
        await sync([svc('web', { clusterIP: '10.96.0.10' }, WEB)], [eps('web', WEB_EPS, ['pa'])]);
        const first = await a('ext').udp('10.96.0.10', 53, fixed);
        assert.equal(first.ok && podOf(first), 'pa', JSON.stringify(first));
        if (change === 'zero endpoints')
          await sync([svc('web', { clusterIP: '10.96.0.10' }, WEB)], [eps('web', WEB_EPS, [])]);
        else await sync([], []);
        for (let k = 0; k < 5; k++) {
          const r = await a('ext').udp('10.96.0.10', 53, { ...fixed, timeoutMs: 400 });
          assert.equal(r.ok, false, `${change}: ${JSON.stringify(r)}`);
        }
      }
      const echo = await a('pc').udp(PODS.pa, UDP_PORT);
      assert.equal(echo.ok && podOf(echo), 'pa', 'the old endpoint is still running');
    });

    it('ClientIP affinity keeps a client on one endpoint', async () => {
      await sync(
        [svc('web', { clusterIP: '10.96.0.10', sessionAffinity: 'ClientIP' }, WEB)],
        [eps('web', WEB_EPS, ['pa', 'pb'])],
      );
      assert.equal(new Set(await many('ext', 'tcp', '10.96.0.10', 80, 5)).size, 1);
      assert.equal(new Set(await many('pc', 'udp', '10.96.0.10', 53, 4)).size, 1);
    });

    it('externalTrafficPolicy Local: external traffic only to local endpoints, ClusterIP to all', async () => {
      await sync(
        [svc('web', { clusterIP: '10.96.0.10', type: 'NodePort', externalTrafficPolicy: 'Local' }, WEB)],
        [eps('web', WEB_EPS, ['pa', 'pc'])],
      );
      assert.deepEqual(await many('ext', 'tcp', NODE_IP, 30080, 4), ['pa', 'pa', 'pa', 'pa']);
      assert.deepEqual([...(await many('ext', 'tcp', '10.96.0.10', 80, 4))].sort(), ['pa', 'pa', 'pc', 'pc']);
    });

    it('internalTrafficPolicy Local with only remote endpoints drops (no answer) instead of refusing', async () => {
      await sync(
        [svc('web', { clusterIP: '10.96.0.10', internalTrafficPolicy: 'Local' }, WEB)],
        [eps('web', WEB_EPS, ['pc'])],
      );
      const r = await a('pa').tcp('10.96.0.10', 80, { timeoutMs: 800 });
      assert.equal(r.ok ? 'ok' : r.error, 'ETIMEDOUT');
    });

    it('an endpoint that refuses is skipped for the next one', async () => {
      await sync([svc('web', { clusterIP: '10.96.0.10' }, WEB)], [eps('web', WEB_EPS, ['dead', 'pb'])]);
      assert.deepEqual(await many('ext', 'tcp', '10.96.0.10', 80, 4), ['pb', 'pb', 'pb', 'pb']);
    });

    it('endpoint changes keep open connections to endpoints that stay; connections to a removed endpoint are closed', async () => {
      await sync([svc('web', { clusterIP: '10.96.0.10' }, WEB)], [eps('web', WEB_EPS, ['pa'])]);
      assert.ok((await a('ext').open('held', '10.96.0.10', 80)).ok);
      assert.equal(podOf(await a('ext').send('held')), 'pa');
      await sync([svc('web', { clusterIP: '10.96.0.10' }, WEB)], [eps('web', WEB_EPS, ['pa', 'pb'])]);
      assert.equal(podOf(await a('ext').send('held')), 'pa');
      await sync([svc('web', { clusterIP: '10.96.0.10' }, WEB)], [eps('web', WEB_EPS, ['pb'])]);
      const r = await a('ext').send('held', 'ping', 1000);
      assert.equal(r.ok, false, JSON.stringify(r));
      assert.deepEqual(await many('ext', 'tcp', '10.96.0.10', 80, 2), ['pb', 'pb']);
    });

    it('a removed Service closes its connections and its portal', async () => {
      assert.ok((await a('pa').open('held2', '10.96.0.10', 80)).ok);
      await sync([], []);
      const r = await a('pa').send('held2', 'ping', 1000);
      assert.equal(r.ok, false, JSON.stringify(r));
      assert.deepEqual(await proxy.call('stats'), { tcpConnections: 0, udpSessions: 0 });
      const table = await nsRun(NS.node, ['nft', 'list', 'map', 'ip', 'kube-proxy-userspace', 'service-portals']);
      assert.doesNotMatch(table.stdout, /10\.96\.0\.10/);
    });

    it('cleanup removes the table and nothing else', async () => {
      await nsRun(NS.node, ['nft', 'add', 'table', 'ip', 'foreign']);
      await proxy.call('cleanup');
      const tables = (await nsRun(NS.node, ['nft', 'list', 'tables'])).stdout;
      assert.doesNotMatch(tables, /kube-proxy-userspace/);
      assert.match(tables, /table ip foreign/);
    });
  });
}
