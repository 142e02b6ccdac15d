// Localhost NodePorts in nftables mode (KEP-6032) with real packets in the
// namespace cluster: with nodePortAddresses `primary,localhost` node1 serves
// 127.0.0.1:<NodePort> through its loopback relay, reaching endpoints on both
// nodes from the node's own address; UDP there is rejected and counted; a
// Service removal closes the listener; a port already taken on 127.0.0.1 is
// counted and the proxy goes on; without the opt-in, TCP there is rejected and
// counted; and with the gate off nothing listens and no table of ours is left.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv, podsOf, srcIP } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { nsRun } from '../netns/spawn.js';
import { LOCALHOST_TABLE } from '../../src/dataplane/nftables/localhost.js';
import { parseRejectCounters } from '../../src/platform/nftables/localhost.js';

const ARGS = ['--nodeport-addresses', 'primary,localhost'];
const GATE_OFF = [...ARGS, '--feature-gates', 'KubeProxyNFTablesLocalhostNodePorts=false'];
const NP = 30480; // tcp 30480, udp 30481 (webPorts)
const TAKEN = 30490;
const LISTENERS = 'kubeproxy_nftables_localhost_nodeport_listeners';
const FAILURES = 'kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total';
const REJECTED = 'kubeproxy_nftables_localhost_nodeport_rejected_packets_total';

/** node1's /metrics (the server binds 127.0.0.1 inside the node). */
async function scrape(env: E2EEnv): Promise<string> {
  const r = await (await env.cluster.agent('node1')).http('http://127.0.0.1:10249/metrics', 3000);
  if (r.status !== 200) throw new Error(`metrics of node1: ${JSON.stringify(r)}`);
  return r.body ?? '';
}

/** One sample's value whose labels include `labels`, or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

/** The source address node1's kernel picks for a connection to `ip` (what any process on node1 gets). */
async function routeSource(ns: string, ip: string): Promise<string> {
  const out = (await nsRun(ns, ['ip', 'route', 'get', ip])).stdout;
  const src = /\bsrc (\S+)/.exec(out)?.[1];
  assert.ok(src, `a source for ${ip}: ${out}`);
  return src;
}

describe('nftables localhost NodePorts (KEP-6032) on the real kernel', { concurrency: false }, () => {
  let env: E2EEnv;
  const ports = webPorts(NP);
  before(async () => {
    env = await E2EEnv.start('nftables', { proxyArgs: ARGS });
  });
  after(async () => {
    await env?.dispose();
  });

  it('serves 127.0.0.1:<NodePort> from node1, reaching pods on both nodes from the node address', async () => {
    const a = env.cluster.pod('node1-a');
    const b = env.cluster.pod('node2-a');
    await env.apply(
      service({ name: 'lnp', clusterIP: '10.96.40.10', type: 'NodePort', ports }),
      endpointSlice('lnp', [{ pod: a }, { pod: b }], ports),
    );
    const { value: replies, ms } = await env.waitFor('both pods through 127.0.0.1', async () => {
      const rs = await env.sendMany('node1', 'tcp', '127.0.0.1', NP, 8, { timeoutMs: 500 });
      // A batch sent while the relay came up can hold refusals from before it listened: wait for a whole one.
      return rs.every((r) => r.ok) && podsOf(rs).join(',') === 'node1-a,node2-a' ? rs : undefined;
    });
    console.log(`nftables: localhost NodePort served ${ms} ms after the Service was created`);
    const n1 = env.cluster.node('node1').ns;
    const want = { 'node1-a': await routeSource(n1, a.ip), 'node2-a': await routeSource(n1, b.ip) };
    for (const r of replies) {
      assert.ok(r.ok);
      const pod = r.reply.pod as 'node1-a' | 'node2-a';
      // The relay connects from the node: the endpoint sees node1's address on the route to it, not loopback.
      assert.equal(srcIP(r.reply), want[pod], `source seen by ${pod}`);
      assert.notEqual(srcIP(r.reply), '127.0.0.1');
    }
    console.log(
      `nftables: localhost NodePort sources seen: ${JSON.stringify(want)} (node1 is ${env.cluster.node('node1').ip})`,
    );
    const m = await scrape(env);
    assert.equal(sample(m, LISTENERS, { ip_family: 'IPv4' }), 1);
  });

  it('rejects UDP to a loopback NodePort and counts it', async () => {
    const r = await env.send('node1', 'udp', '127.0.0.1', NP + 1, { timeoutMs: 1500 });
    assert.equal(r.ok ? 'answered' : r.error, 'ECONNREFUSED');
    const m = await scrape(env);
    assert.ok((sample(m, REJECTED, { ip_family: 'IPv4', protocol: 'UDP' }) ?? 0) >= 1, 'UDP rejection counted');
    assert.equal(sample(m, REJECTED, { ip_family: 'IPv4', protocol: 'TCP' }), 0, 'served TCP is not rejected');
    // The proxy reads its counters over netlink (one GETOBJ dump), not with nft: they must be nft's.
    const listed = await nsRun(env.cluster.node('node1').ns, [
      'nft',
      '-j',
      'list',
      'counters',
      'table',
      'ip',
      LOCALHOST_TABLE,
    ]);
    const byNft = parseRejectCounters(listed.stdout);
    assert.equal(sample(m, REJECTED, { ip_family: 'IPv4', protocol: 'UDP' }), byNft.UDP);
    assert.equal(sample(m, REJECTED, { ip_family: 'IPv4', protocol: 'TCP' }), byNft.TCP);
  });

  it('a NodePort already taken on 127.0.0.1 is counted, and the proxy goes on', async () => {
    // node1's agent holds the port on every address of the node (0.0.0.0), 127.0.0.1 included.
    const agent = await env.cluster.agent('node1');
    await agent.serve([TAKEN], []);
    const tp = [{ name: 'tcp', port: 80, targetPort: 8080, protocol: 'TCP' as const, nodePort: TAKEN }];
    await env.apply(
      service({ name: 'taken', clusterIP: '10.96.40.11', type: 'NodePort', ports: tp }),
      endpointSlice('taken', [{ pod: env.cluster.pod('node2-a') }], tp),
    );
    await env.waitFor('the failure counted', async () => {
      const v = sample(await scrape(env), FAILURES, { ip_family: 'IPv4' });
      return v !== undefined && v >= 1 ? v : undefined;
    });
    assert.match(env.proxy('node1').log(), /localhost NodePort relay failed to listen/);
    const r = await env.send('node1', 'tcp', '127.0.0.1', TAKEN, { timeoutMs: 1000 });
    assert.equal(r.ok ? r.reply.pod : r.error, 'node1', 'the port stays with its owner');
    // Still alive and serving the other Service.
    await env.waitServedBy('node1', 'tcp', '127.0.0.1', NP, ['node1-a', 'node2-a'], {}, 2);
    await env.proxy('node1').waitHealthy(5000);
    await env.kube.remove('Service', 'taken', 'default');
  });

  it('a Service removal closes its listener', async () => {
    await env.kube.remove('Service', 'lnp', 'default');
    await env.waitFor('127.0.0.1:NodePort refused', async () => {
      const r = await env.send('node1', 'tcp', '127.0.0.1', NP, { timeoutMs: 500 });
      return !r.ok && r.error === 'ECONNREFUSED' ? true : undefined;
    });
    await env.waitFor('no listener left', async () =>
      sample(await scrape(env), LISTENERS, { ip_family: 'IPv4' }) === 0 ? true : undefined,
    );
  });

  it('without the nodePortAddresses opt-in: TCP to a loopback NodePort is rejected and counted', async () => {
    await env.replaceProxy('node1', []);
    await env.apply(
      service({ name: 'lnp-np', clusterIP: '10.96.40.12', type: 'NodePort', ports }),
      endpointSlice('lnp-np', [{ pod: env.cluster.pod('node2-a') }], ports),
    );
    const n1 = env.cluster.node('node1');
    await env.waitServedBy('node1', 'tcp', n1.ip, NP, ['node2-a'], {}, 2);
    // The reject table is written just after the sync that served the node IP, so a
    // probe sent in between is refused by the kernel (no listener) and not counted:
    // probe until our rule has refused one.
    await env.waitFor('a TCP rejection counted', async () => {
      const r = await env.send('node1', 'tcp', '127.0.0.1', NP, { timeoutMs: 1000 });
      assert.equal(r.ok ? r.reply.pod : r.error, 'ECONNREFUSED');
      const counted = sample(await scrape(env), REJECTED, { ip_family: 'IPv4', protocol: 'TCP' }) ?? 0;
      return counted >= 1 ? true : undefined;
    });
    assert.equal(sample(await scrape(env), LISTENERS, { ip_family: 'IPv4' }), 0);
  });

  it('with the gate off: nothing listens on loopback, no table of ours, metrics absent', async () => {
    await env.replaceProxy('node1', GATE_OFF);
    const n1 = env.cluster.node('node1');
    const tables = async () => (await nsRun(n1.ns, ['nft', 'list', 'tables'])).stdout;
    // The NodePort is programmed on the node IP, as before the gate existed...
    await env.waitServedBy('node1', 'tcp', n1.ip, NP, ['node2-a'], {}, 2);
    // ...and loopback is refused by the kernel, not by a rule of ours.
    await env.waitFor('the reject table left by the earlier run removed', async () =>
      /kube-proxy-ts-localhost/.test(await tables()) ? undefined : true,
    );
    const r = await env.send('node1', 'tcp', '127.0.0.1', NP, { timeoutMs: 1000 });
    assert.equal(r.ok ? r.reply.pod : r.error, 'ECONNREFUSED');
    const m = await scrape(env);
    assert.equal(sample(m, LISTENERS), undefined);
    assert.equal(sample(m, REJECTED), undefined);
  });
});
