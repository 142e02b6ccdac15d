// --service-traffic-metrics N with real packets in the two-node namespace
// cluster, in nftables mode (the kube-proxy-ts-traffic table) and in ebpf
// mode (the kpt_traffic BPF map): new connections and client bytes per
// Service port are counted in the kernel and read at each scrape of node1's
// metrics address; only the first N Service ports (in key order) are counted
// and the rest are reported as untracked. ebpf mode also: counts survive
// partial syncs and a proxy restart, `diff` with the flag sees nothing to
// change, and a proxy started without the flag exports nothing and leaves
// the programs no counting to do.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as L from '../../src/dataplane/ebpf/layout.js';
import { TEST_PIN_ROOT } from '../ebpf/bpfnode.js';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { E2E_MODES, proxyArgv } from '../netns/proxy.js';
import { nsRun } from '../netns/spawn.js';

/** node1's /metrics text (the server binds 127.0.0.1 inside the node). */
async function scrape(env: E2EEnv): Promise<string> {
  const r = await (await env.cluster.agent('node1')).http('http://127.0.0.1:10249/metrics', 3000);
  if (r.status !== 200) throw new Error(`metrics of node1: ${JSON.stringify(r)}`);
  return r.body ?? '';
}

/** The value of one sample whose label set contains every given label, or undefined. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

const CONNS = 'kubeproxy_ts_service_new_connections_total';
const BYTES = 'kubeproxy_ts_service_bytes_total';

const UNTRACKED = 'kubeproxy_ts_service_traffic_untracked_service_ports';

/** tm-a (NodePort 30610, tcp/80 + udp/53), tm-b and tm-c, each with an endpoint on both nodes. */
async function startWithServices(mode: 'nftables' | 'ebpf'): Promise<E2EEnv> {
  const env = await E2EEnv.start(mode, { proxyArgs: ['--service-traffic-metrics', '3'] });
  try {
    const pods = [{ pod: env.cluster.pod('node1-a') }, { pod: env.cluster.pod('node2-a') }];
    await env.apply(
      service({ name: 'tm-a', clusterIP: '10.96.31.10', type: 'NodePort', ports: webPorts(30610) }),
      endpointSlice('tm-a', pods, webPorts(30610)),
      service({ name: 'tm-b', clusterIP: '10.96.31.11', ports: webPorts() }),
      endpointSlice('tm-b', pods, webPorts()),
      service({ name: 'tm-c', clusterIP: '10.96.31.12', ports: webPorts() }),
      endpointSlice('tm-c', pods, webPorts()),
    );
    await env.waitReachable('node1-b', 'tcp', '10.96.31.10', 80);
    await env.waitReachable('node1-b', 'tcp', '10.96.31.12', 80);
    return env;
  } catch (err) {
    await env.dispose();
    throw err;
  }
}

const A_TCP = { service_port: 'default/tm-a:tcp', ip_family: 'IPv4' };

/** Five connections to tm-a's cluster IP from a pod and two to its node port from outside: +7, and their bytes. */
async function countsSevenConnections(env: E2EEnv): Promise<void> {
  const before = await scrape(env);
  const c0 = sample(before, CONNS, A_TCP) ?? 0;
  const b0 = sample(before, BYTES, A_TCP) ?? 0;
  const n1 = env.cluster.node('node1');
  for (let i = 0; i < 5; i++) assert.ok((await env.send('node1-b', 'tcp', '10.96.31.10', 80)).ok);
  for (let i = 0; i < 2; i++) assert.ok((await env.send('ext', 'tcp', n1.ip, 30610)).ok);
  const afterText = await scrape(env);
  assert.equal((sample(afterText, CONNS, A_TCP) ?? 0) - c0, 7, 'five to the cluster IP, two to the node port');
  // Each connection sends at least a SYN, an ACK and a FIN (>= 3 x 52 bytes with IPv4 and TCP headers).
  assert.ok((sample(afterText, BYTES, A_TCP) ?? 0) - b0 >= 7 * 3 * 52, afterText);
  // UDP counts the first datagram of each flow as a new connection, and the datagram's bytes.
  const u = { service_port: 'default/tm-a:udp' };
  const u0 = sample(afterText, CONNS, u) ?? 0;
  const ub0 = sample(afterText, BYTES, u) ?? 0;
  assert.ok((await env.send('node1-b', 'udp', '10.96.31.10', 53)).ok);
  const udpText = await scrape(env);
  assert.equal((sample(udpText, CONNS, u) ?? 0) - u0, 1);
  assert.ok((sample(udpText, BYTES, u) ?? 0) - ub0 >= 28 + 1, 'IPv4 and UDP headers and a payload');
}

/** tm-a's two ports and tm-b:tcp are counted (after the cluster's own Services); tm-b:udp and tm-c are not. */
async function capsAtThree(env: E2EEnv): Promise<string> {
  assert.ok((await env.send('node1-b', 'tcp', '10.96.31.12', 80)).ok);
  const text = await scrape(env);
  assert.notEqual(sample(text, CONNS, { service_port: 'default/tm-b:tcp' }), undefined);
  assert.equal(sample(text, CONNS, { service_port: 'default/tm-b:udp' }), undefined);
  assert.equal(sample(text, CONNS, { service_port: 'default/tm-c:tcp' }), undefined, 'past the cap');
  // The demo cluster's own Services (default/kubernetes...) sort before tm-*, so count them out too.
  const untracked = sample(text, UNTRACKED, { ip_family: 'IPv4' });
  assert.ok(untracked !== undefined && untracked >= 3, text);
  return text;
}

describe('per-Service traffic metrics (nftables, --service-traffic-metrics 3)', { concurrency: false }, () => {
  let env: E2EEnv;
  before(async () => {
    env = await startWithServices('nftables');
  });
  after(async () => {
    await env?.dispose();
  });

  it('counts each new connection and the client bytes of a Service port, cluster IP and node port together', async () => {
    await countsSevenConnections(env);
  });

  it('counts only the first 3 Service ports in key order and reports the rest as untracked', async () => {
    await capsAtThree(env);
    const table = await nsRun(env.cluster.node('node1').ns, ['nft', 'list', 'table', 'ip', 'kube-proxy-ts-traffic']);
    assert.match(table.stdout, /10\.96\.31\.10 \. tcp \. 80 counter packets \d+ bytes \d+/);
    assert.doesNotMatch(table.stdout, /10\.96\.31\.12/);
  });

  it('--cleanup removes the counter table with the rest', async () => {
    const ns = env.cluster.node('node1').ns;
    await env.proxy('node1').stop();
    const r = await env.proxy('node1').cleanup();
    assert.equal(r.code, 0, r.output);
    const tables = (await nsRun(ns, ['nft', 'list', 'tables'])).stdout;
    assert.doesNotMatch(tables, /kube-proxy-ts-traffic/);
    assert.doesNotMatch(tables, /table ip kube-proxy\b/);
  });
});

/** The pinned map's entries on node1 (keys and values decoded; per-CPU values summed). */
async function pinned(env: E2EEnv, map: L.MapName): Promise<Array<[Uint8Array, Uint8Array]>> {
  const r = await env.proxy('node1').bpfNode!.helper<{ entries: Array<[string, string]> }>({
    cmd: 'dump',
    pinRoot: TEST_PIN_ROOT,
    map,
  });
  return r.entries.map(([k, v]) => [L.unhex(k), L.unhex(v)]);
}

const cfgFlagsV4 = async (env: E2EEnv) =>
  L.decodeCfgValue((await pinned(env, 'cfg')).find(([k]) => L.decodeU32(k) === 0)![1]).flags;

if (E2E_MODES.includes('ebpf'))
  describe('per-Service traffic metrics (ebpf, --service-traffic-metrics 3)', { concurrency: false }, () => {
    let env: E2EEnv;
    before(async () => {
      env = await startWithServices('ebpf');
    });
    after(async () => {
      await env?.dispose();
    });

    it('counts each new connection and the client bytes of a Service port, cluster IP and node port together', async () => {
      await countsSevenConnections(env);
    });

    it('counts only the first 3 Service ports in key order: three kpt_traffic entries, the rest untracked', async (t) => {
      const text = await capsAtThree(env);
      t.diagnostic(
        text
          .split('\n')
          .filter((l) => /^kubeproxy_ts_service_(new_connections|bytes|traffic)/.test(l))
          .join('\n'),
      );
      assert.equal((await pinned(env, 'traffic')).length, 3, 'one entry per counted port (IPv4 only here)');
      assert.ok((await cfgFlagsV4(env)) & L.CFG_TRAFFIC);
    });

    it("diff with the proxy's own flags finds nothing to change (the flag expects CFG_TRAFFIC)", async () => {
      const p = env.proxy('node1');
      const r = await p.bpfNode!.exec([...proxyArgv(), 'diff', ...p.flags()], { allowFailure: true });
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.match(r.stdout, /# ebpf IPv4: no changes/);
    });

    it('counts survive a partial sync and a proxy restart (the maps are pinned)', async () => {
      const before = await scrape(env);
      const c0 = sample(before, CONNS, A_TCP)!;
      const b0 = sample(before, BYTES, A_TCP)!;
      assert.ok(c0 >= 7);
      // A partial sync: tm-a gains an endpoint; connect until it answers (each one a new connection).
      const pods = ['node1-a', 'node2-a', 'node2-b'].map((p) => ({ pod: env.cluster.pod(p) }));
      await env.apply(endpointSlice('tm-a', pods, webPorts(30610)));
      let sent = 0;
      const deadline = Date.now() + 15000;
      for (let seen = false; !seen; sent++) {
        assert.ok(Date.now() < deadline, 'node2-b never answered');
        const r = await env.send('node1-b', 'tcp', '10.96.31.10', 80);
        assert.ok(r.ok, JSON.stringify(r));
        seen = r.reply.pod === 'node2-b';
        if (!seen) await new Promise((res) => setTimeout(res, 50));
      }
      const mid = await scrape(env);
      assert.equal(sample(mid, CONNS, A_TCP), c0 + sent, 'kept through the partial sync, and still counting');
      await env.proxy('node1').stop();
      await env.proxy('node1').start();
      const after = await scrape(env);
      assert.equal(sample(after, CONNS, A_TCP), sample(mid, CONNS, A_TCP), mid + after);
      assert.ok(sample(after, BYTES, A_TCP)! >= b0);
    });

    it('without the flag: no metrics, CFG_TRAFFIC cleared, no kpt_traffic entries, Service traffic still flows', async () => {
      await env.proxy('node1').restartWith([]);
      const text = await scrape(env);
      assert.doesNotMatch(text, /kubeproxy_ts_service_(new_connections|bytes)_total|untracked_service_ports/);
      assert.equal((await cfgFlagsV4(env)) & L.CFG_TRAFFIC, 0);
      assert.deepEqual(await pinned(env, 'traffic'), []);
      assert.ok((await env.send('node1-b', 'tcp', '10.96.31.10', 80)).ok);
    });
  });
