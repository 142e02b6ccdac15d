// Issue 2's "done when", proven on the real proxy process: it starts from a
// kubeconfig against the HTTPS test API server, reports /healthz as upstream
// (including node eligibility), exports upstream's metric names, and its
// counters and latency histogram move when Services and EndpointSlices change.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, nodeObject, service, webPorts } from '../netns/fixtures.js';

const REQUIRED_METRICS = [
  'kubeproxy_sync_proxy_rules_duration_seconds',
  'kubeproxy_sync_full_proxy_rules_duration_seconds',
  'kubeproxy_sync_partial_proxy_rules_duration_seconds',
  'kubeproxy_sync_proxy_rules_last_timestamp_seconds',
  'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds',
  'kubeproxy_network_programming_duration_seconds',
  'kubeproxy_sync_proxy_rules_endpoint_changes_pending',
  'kubeproxy_sync_proxy_rules_endpoint_changes_total',
  'kubeproxy_sync_proxy_rules_service_changes_pending',
  'kubeproxy_sync_proxy_rules_service_changes_total',
  'kubeproxy_sync_proxy_rules_no_local_endpoints_total',
  'kubeproxy_sync_proxy_rules_iptables_restore_failures_total',
  'kubeproxy_proxy_healthz_total',
  'kubeproxy_proxy_livez_total',
  'process_resident_memory_bytes',
  'process_cpu_seconds_total',
];

/** Value of one sample line `name{labels} value` (labels matched as a substring), or null. */
function sample(text: string, name: string, labels = ''): number | null {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (m && m[1] === name && (m[2] ?? '').includes(labels)) return Number(m[3]);
  }
  return null;
}

describe('the proxy process: health, metrics and API intake (iptables)', { concurrency: false }, () => {
  let env: E2EEnv;
  before(async () => {
    env = await E2EEnv.start('iptables');
  });
  after(async () => {
    await env?.dispose();
  });

  const node1 = () => env.cluster.node('node1');
  async function get(path: string, port = 10249): Promise<{ status: number; body: string }> {
    const agent = await env.cluster.agent('node1');
    const host = port === 10249 ? '127.0.0.1' : node1().ip;
    const r = await agent.http(`http://${host}:${port}${path}`, 3000);
    return { status: r.status ?? 0, body: String(r.body ?? '') };
  }

  it("/healthz and /livez answer 200 with upstream's JSON once synced", async () => {
    for (const path of ['/healthz', '/livez']) {
      const r = await get(path, 10256);
      assert.equal(r.status, 200, `${path}: ${r.body}`);
      const body = JSON.parse(r.body) as Record<string, unknown>;
      assert.equal(body['healthy'], true);
      assert.match(String(body['lastUpdated']), /^\d{4}-\d\d-\d\dT/);
      assert.ok((body['status'] as Record<string, unknown> | undefined)?.['IPv4'], `${path} reports IPv4: ${r.body}`);
      if (path === '/healthz') assert.equal(body['nodeEligible'], true);
      else assert.equal(body['nodeEligible'], undefined);
    }
  });

  it("exports upstream's metric names, /proxyMode and /configz", async () => {
    const m = await get('/metrics');
    assert.equal(m.status, 200);
    for (const name of REQUIRED_METRICS) assert.ok(m.body.includes(`# TYPE ${name} `), `missing metric ${name}`);
    assert.equal((await get('/proxyMode')).body.trim(), 'iptables');
    const configz = JSON.parse((await get('/configz')).body) as Record<string, Record<string, unknown>>;
    assert.equal(configz['kubeproxy.config.k8s.io']?.['mode'], 'iptables');
  });

  it('counts service and endpoint changes and observes network programming latency', async () => {
    const before = (await get('/metrics')).body;
    const svcBefore = sample(before, 'kubeproxy_sync_proxy_rules_service_changes_total') ?? 0;
    const epBefore = sample(before, 'kubeproxy_sync_proxy_rules_endpoint_changes_total') ?? 0;
    const latBefore = sample(before, 'kubeproxy_network_programming_duration_seconds_count', 'ip_family="IPv4"') ?? 0;

    const ip = '10.96.7.10';
    const slice = endpointSlice('metrics', [{ pod: env.cluster.pod('node2-a') }], webPorts());
    slice.metadata = {
      ...slice.metadata,
      annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': new Date().toISOString() },
    };
    await env.apply(service({ name: 'metrics', clusterIP: ip, ports: webPorts() }), slice);
    await env.waitServedBy('node1-a', 'tcp', ip, 80, ['node2-a']);

    const { value: afterText } = await env.waitFor('metrics reflect the change', async () => {
      const t = (await get('/metrics')).body;
      return (sample(t, 'kubeproxy_network_programming_duration_seconds_count', 'ip_family="IPv4"') ?? 0) > latBefore
        ? t
        : undefined;
    });
    assert.ok((sample(afterText, 'kubeproxy_sync_proxy_rules_service_changes_total') ?? 0) > svcBefore);
    assert.ok((sample(afterText, 'kubeproxy_sync_proxy_rules_endpoint_changes_total') ?? 0) > epBefore);
    assert.ok(
      (sample(afterText, 'kubeproxy_sync_partial_proxy_rules_duration_seconds_count', 'ip_family="IPv4"') ?? 0) >= 1,
      'a partial sync happened',
    );
  });

  it('/healthz turns 503 (nodeEligible false) when the Node is being deleted, /livez stays 200', async () => {
    const n = node1();
    const deleting = nodeObject(n);
    deleting.spec = {
      ...(deleting.spec as object),
      taints: [{ key: 'ToBeDeletedByClusterAutoscaler', value: 'now', effect: 'NoSchedule' }],
    };
    await env.apply(deleting);
    try {
      const { value } = await env.waitFor('healthz 503', async () => {
        const r = await get('/healthz', 10256);
        return r.status === 503 ? r : undefined;
      });
      assert.equal((JSON.parse(value.body) as Record<string, unknown>)['nodeEligible'], false);
      assert.equal((await get('/livez', 10256)).status, 200);
    } finally {
      await env.apply(nodeObject(n));
    }
    await env.waitFor('healthz back to 200', async () =>
      (await get('/healthz', 10256)).status === 200 ? true : undefined,
    );
  });
});
