// The per-Service traffic metrics over any TrafficSource: the series and
// their labels, the untracked gauge, and one kernel read per scrape.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { registerTrafficMetrics, type ServiceTraffic, type TrafficSource } from './traffic.js';

class Source implements TrafficSource {
  reads = 0;
  constructor(
    readonly family: 'IPv4' | 'IPv6',
    readonly untracked: number,
    private readonly rows: ServiceTraffic[],
  ) {}
  async read(): Promise<ServiceTraffic[]> {
    this.reads++;
    return this.rows;
  }
}

test('each counted port gives two series per family; a scrape reads each source once', async () => {
  const registry = new Registry();
  const v4 = new Source('IPv4', 2, [{ servicePort: 'ns/a:http', protocol: 'TCP', newConnections: 7, bytes: 1234 }]);
  const v6 = new Source('IPv6', 0, [{ servicePort: 'ns/a:http', protocol: 'TCP', newConnections: 1, bytes: 80 }]);
  registerTrafficMetrics(registry, [v4, v6]);
  const text = await registry.metrics();
  for (const line of [
    'kubeproxy_ts_service_new_connections_total{service_port="ns/a:http",protocol="TCP",ip_family="IPv4"} 7',
    'kubeproxy_ts_service_bytes_total{service_port="ns/a:http",protocol="TCP",ip_family="IPv4"} 1234',
    'kubeproxy_ts_service_new_connections_total{service_port="ns/a:http",protocol="TCP",ip_family="IPv6"} 1',
    'kubeproxy_ts_service_traffic_untracked_service_ports{ip_family="IPv4"} 2',
  ])
    assert.ok(text.includes(line), `${line}\n${text}`);
  assert.deepEqual([v4.reads, v6.reads], [1, 1]);
  await registry.metrics();
  assert.deepEqual([v4.reads, v6.reads], [2, 2], 'the next scrape reads again');
});
