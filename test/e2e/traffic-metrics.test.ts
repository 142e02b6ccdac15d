// --service-traffic-metrics N (nftables mode) with real packets in the
// two-node namespace cluster: new connections and client bytes per Service
// port are counted in the kernel (the kube-proxy-ts-traffic table) and read
// at each scrape of node1's metrics address; only the first N Service ports
// (in key order) are counted and the rest are reported as untracked.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
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

describe('per-Service traffic metrics (nftables, --service-traffic-metrics 3)', { concurrency: false }, () => {
  let env: E2EEnv;
  before(async () => {
    env = await E2EEnv.start('nftables', { proxyArgs: ['--service-traffic-metrics', '3'] });
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
  });
  after(async () => {
    await env?.dispose();
  });

  it('counts each new connection and the client bytes of a Service port, cluster IP and node port together', async () => {
    const a = { service_port: 'default/tm-a:tcp', ip_family: 'IPv4' };
    const before = await scrape(env);
    const c0 = sample(before, CONNS, a) ?? 0;
    const b0 = sample(before, BYTES, a) ?? 0;
    const n1 = env.cluster.node('node1');
    for (let i = 0; i < 5; i++) assert.ok((await env.send('node1-b', 'tcp', '10.96.31.10', 80)).ok);
    for (let i = 0; i < 2; i++) assert.ok((await env.send('ext', 'tcp', n1.ip, 30610)).ok);
    const afterText = await scrape(env);
    assert.equal((sample(afterText, CONNS, a) ?? 0) - c0, 7, 'five to the cluster IP, two to the node port');
    // Each connection sends at least a SYN, an ACK and a FIN (>= 3 x 52 bytes with IPv4 and TCP headers).
    assert.ok((sample(afterText, BYTES, a) ?? 0) - b0 >= 7 * 3 * 52, afterText);
    // UDP counts the first datagram of each flow as a new connection.
    const u = { service_port: 'default/tm-a:udp' };
    const u0 = sample(afterText, CONNS, u) ?? 0;
    assert.ok((await env.send('node1-b', 'udp', '10.96.31.10', 53)).ok);
    assert.equal((sample(await scrape(env), CONNS, u) ?? 0) - u0, 1);
  });

  it('counts only the first 3 Service ports in key order and reports the rest as untracked', async () => {
    assert.ok((await env.send('node1-b', 'tcp', '10.96.31.12', 80)).ok);
    const text = await scrape(env);
    assert.notEqual(sample(text, CONNS, { service_port: 'default/tm-b:tcp' }), undefined);
    assert.equal(sample(text, CONNS, { service_port: 'default/tm-b:udp' }), undefined);
    assert.equal(sample(text, CONNS, { service_port: 'default/tm-c:tcp' }), undefined, 'past the cap');
    // The demo cluster's own Services (default/kubernetes...) sort before tm-*, so count them out too.
    const untracked = sample(text, 'kubeproxy_ts_service_traffic_untracked_service_ports', { ip_family: 'IPv4' });
    assert.ok(untracked !== undefined && untracked >= 3, text);
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
