import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nfacctReader, parseNfacctPackets, ProxyMetrics } from './metrics.js';

/** Every metric upstream registers (pkg/proxy/metrics/metrics.go) with its type and label names. */
const TABLE: Array<[string, string, string[]]> = [
  ['kubeproxy_sync_proxy_rules_duration_seconds', 'histogram', ['ip_family']],
  ['kubeproxy_sync_full_proxy_rules_duration_seconds', 'histogram', ['ip_family']],
  ['kubeproxy_sync_partial_proxy_rules_duration_seconds', 'histogram', ['ip_family']],
  ['kubeproxy_sync_proxy_rules_last_timestamp_seconds', 'gauge', ['ip_family']],
  ['kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', 'gauge', ['ip_family']],
  ['kubeproxy_network_programming_duration_seconds', 'histogram', ['ip_family']],
  ['kubeproxy_sync_proxy_rules_endpoint_changes_pending', 'gauge', []],
  ['kubeproxy_sync_proxy_rules_endpoint_changes_total', 'counter', []],
  ['kubeproxy_sync_proxy_rules_service_changes_pending', 'gauge', []],
  ['kubeproxy_sync_proxy_rules_service_changes_total', 'counter', []],
  ['kubeproxy_sync_proxy_rules_no_local_endpoints_total', 'gauge', ['ip_family', 'traffic_policy']],
  ['kubeproxy_sync_proxy_rules_iptables_restore_failures_total', 'counter', ['ip_family']],
  ['kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total', 'counter', ['ip_family']],
  ['kubeproxy_sync_proxy_rules_iptables_total', 'gauge', ['ip_family', 'table']],
  ['kubeproxy_sync_proxy_rules_iptables_last', 'gauge', ['ip_family', 'table']],
  ['kubeproxy_sync_proxy_rules_nftables_sync_failures_total', 'counter', ['ip_family']],
  ['kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total', 'counter', ['ip_family']],
  ['kubeproxy_conntrack_reconciler_sync_duration_seconds', 'histogram', ['ip_family']],
  ['kubeproxy_conntrack_reconciler_deleted_entries_total', 'counter', ['ip_family']],
  ['kubeproxy_proxy_healthz_total', 'counter', ['code']],
  ['kubeproxy_proxy_livez_total', 'counter', ['code']],
];

test('registry holds every metric of table 2.21 with its type and labels', async () => {
  const m = new ProxyMetrics({ defaultMetrics: false });
  for (const [name, type, labels] of TABLE) {
    const metric = m.registry.getSingleMetric(name) as unknown as { labelNames: string[] } | undefined;
    assert.ok(metric, `missing ${name}`);
    const json = (await m.registry.getMetricsAsJSON()).find((x) => x.name === name);
    assert.equal(json?.type, type, name);
    assert.deepEqual([...metric.labelNames].sort(), [...labels].sort(), name);
  }
});

test('the KEP-6032 localhost NodePort metrics exist only once nftables mode registers them', async () => {
  const m = new ProxyMetrics({ defaultMetrics: false });
  m.localhostNodePortListeners('IPv4', 3); // before registration: nowhere to go, and no error
  assert.doesNotMatch((await m.render()).body, /kubeproxy_nftables_localhost_nodeport/);
  m.addLocalhostNodePortMetrics([
    { family: 'IPv4', rejectedPackets: async () => ({ UDP: 7, TCP: 0 }) },
    { family: 'IPv6', rejectedPackets: () => Promise.reject(new Error('no table')) },
  ]);
  m.localhostNodePortListeners('IPv4', 2);
  m.localhostNodePortListenerFailed('IPv6');
  m.localhostNodePortListenerFailed('IPv6');
  const text = (await m.render()).body;
  assert.match(text, /^kubeproxy_nftables_localhost_nodeport_listeners\{ip_family="IPv4"\} 2$/m);
  assert.match(text, /^kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total\{ip_family="IPv6"\} 2$/m);
  assert.match(
    text,
    /^kubeproxy_nftables_localhost_nodeport_rejected_packets_total\{ip_family="IPv4",protocol="UDP"\} 7$/m,
  );
  assert.doesNotMatch(text, /rejected_packets_total\{ip_family="IPv6"/, 'an unreadable family exports nothing');
});

test('histogram buckets are upstream: ExponentialBuckets(0.001,2,15) and the network programming merge', async () => {
  const m = new ProxyMetrics({ defaultMetrics: false });
  m.syncSucceeded({
    family: 'IPv4',
    durationSeconds: 0.003,
    partial: false,
    finishedAt: 1_700_000_000,
    noLocalEndpoints: { internal: 0, external: 0 },
  });
  m.networkProgrammingLatency('IPv4', 61);
  const text = (await m.render()).body;
  const les = (name: string) =>
    [...text.matchAll(new RegExp(`^${name}_bucket\\{le="([^"]+)",ip_family="IPv4"\\}`, 'gm'))].map((x) => x[1]);
  const sync = les('kubeproxy_sync_proxy_rules_duration_seconds');
  assert.equal(sync.length, 16);
  assert.deepEqual(sync.slice(0, 3), ['0.001', '0.002', '0.004']);
  assert.equal(sync[14], '16.384');
  assert.equal(sync[15], '+Inf');
  const np = les('kubeproxy_network_programming_duration_seconds');
  assert.equal(np.length, 1 + 2 + 59 + 12 + 7 + 1);
  assert.deepEqual(np.slice(0, 5), ['0', '0.25', '0.5', '1', '2']);
  assert.ok(np.includes('59') && np.includes('115') && np.includes('300') && !np.includes('330'));
  assert.match(text, /kubeproxy_network_programming_duration_seconds_bucket\{le="60",ip_family="IPv4"\} 0/);
  assert.match(text, /kubeproxy_network_programming_duration_seconds_bucket\{le="65",ip_family="IPv4"\} 1/);
});

test('observer calls land in the right series', async () => {
  const m = new ProxyMetrics({ defaultMetrics: false });
  m.queuedUpdate('IPv6', 1_700_000_123_500);
  m.syncSucceeded({
    family: 'IPv4',
    durationSeconds: 0.5,
    partial: true,
    finishedAt: 1_700_000_200,
    noLocalEndpoints: { internal: 2, external: 3 },
    counters: { 'iptables_total:nat': 42, 'iptables_last:filter': 7, bogus: 1 },
  });
  m.pendingChanges('endpoint', 4);
  m.changeRecorded('service');
  m.changeRecorded('service');
  m.iptablesRestoreFailed('IPv4', true);
  m.conntrackReconciled('IPv4', 0.01, 3);
  m.healthzServed(503);
  m.livezServed(200);
  const t = (await m.render()).body;
  assert.match(t, /^kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds\{ip_family="IPv6"\} 1700000123.5$/m);
  assert.match(t, /^kubeproxy_sync_partial_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} 1$/m);
  assert.match(t, /^kubeproxy_sync_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} 1$/m);
  assert.doesNotMatch(t, /kubeproxy_sync_full_proxy_rules_duration_seconds_count\{ip_family="IPv4"\}/);
  assert.match(t, /^kubeproxy_sync_proxy_rules_last_timestamp_seconds\{ip_family="IPv4"\} 1700000200$/m);
  assert.match(
    t,
    /^kubeproxy_sync_proxy_rules_no_local_endpoints_total\{ip_family="IPv4",traffic_policy="external"\} 3$/m,
  );
  assert.match(t, /^kubeproxy_sync_proxy_rules_iptables_total\{ip_family="IPv4",table="nat"\} 42$/m);
  assert.match(t, /^kubeproxy_sync_proxy_rules_iptables_last\{ip_family="IPv4",table="filter"\} 7$/m);
  assert.match(t, /^kubeproxy_sync_proxy_rules_endpoint_changes_pending 4$/m);
  m.syncSucceeded({
    family: 'IPv6',
    durationSeconds: 0.1,
    partial: false,
    finishedAt: 1,
    noLocalEndpoints: { internal: 0, external: 0 },
    counters: { filterRules: 11, natRules: 20, natRulesTotal: 90, restoreMs: 5 },
  });
  const t6 = (await m.render()).body;
  assert.match(t6, /^kubeproxy_sync_proxy_rules_iptables_total\{ip_family="IPv6",table="filter"\} 11$/m);
  assert.match(t6, /^kubeproxy_sync_proxy_rules_iptables_last\{ip_family="IPv6",table="filter"\} 11$/m);
  assert.match(t6, /^kubeproxy_sync_proxy_rules_iptables_last\{ip_family="IPv6",table="nat"\} 20$/m);
  assert.match(t6, /^kubeproxy_sync_proxy_rules_iptables_total\{ip_family="IPv6",table="nat"\} 90$/m);
  assert.match(t, /^kubeproxy_sync_proxy_rules_service_changes_total 2$/m);
  assert.match(t, /^kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total\{ip_family="IPv4"\} 1$/m);
  assert.match(t, /^kubeproxy_conntrack_reconciler_deleted_entries_total\{ip_family="IPv4"\} 3$/m);
  assert.match(t, /^kubeproxy_proxy_healthz_total\{code="503"\} 1$/m);
  assert.match(t, /^kubeproxy_proxy_livez_total\{code="200"\} 1$/m);
});

test('default process metrics and nfacct collectors at scrape time', async () => {
  let dropped = 5;
  const m = new ProxyMetrics({ nfacct: async () => ({ ctStateInvalidDropped: dropped }) });
  let t = (await m.render()).body;
  assert.match(t, /^process_cpu_user_seconds_total /m);
  assert.match(t, /^nodejs_eventloop_lag_seconds /m);
  assert.match(t, /^kubeproxy_iptables_ct_state_invalid_dropped_packets_total 5$/m);
  assert.match(t, /^kubeproxy_iptables_localhost_nodeports_accepted_packets_total 0$/m);
  dropped = 9;
  t = (await m.render()).body;
  assert.match(t, /^kubeproxy_iptables_ct_state_invalid_dropped_packets_total 9$/m);
});

test('nfacct reader parses `nfacct get` and tolerates a missing tool or object', async () => {
  const out = '{ pkts = 00000000000000000012, bytes = 00000000000000000840 } = ct_state_invalid_dropped_pkts;\n';
  assert.equal(parseNfacctPackets(out, 'ct_state_invalid_dropped_pkts'), 12);
  assert.equal(parseNfacctPackets(out, 'localhost_nps_accepted_pkts'), undefined);
  const read = nfacctReader(async (args) =>
    args[1] === 'ct_state_invalid_dropped_pkts'
      ? { code: 0, stdout: out, stderr: '' }
      : { code: 1, stdout: '', stderr: 'No such file or directory' },
  );
  assert.deepEqual(await read(), { ctStateInvalidDropped: 12, localhostNodePortsAccepted: undefined });
  const m = new ProxyMetrics({ defaultMetrics: false, nfacct: read });
  assert.match((await m.render()).body, /^kubeproxy_iptables_ct_state_invalid_dropped_packets_total 12$/m);
  const broken = nfacctReader(async () => {
    throw new Error('spawn nfacct ENOENT');
  });
  assert.deepEqual(await broken(), { ctStateInvalidDropped: undefined, localhostNodePortsAccepted: undefined });
});

test('every failed sync counts in kubeproxy_ts_sync_failures_total, whatever the mode', async () => {
  const m = new ProxyMetrics({ defaultMetrics: false });
  m.syncFailed('IPv4', new Error('boom'), 0.2);
  m.syncFailed('IPv4', new Error('boom'), Number.NaN);
  m.syncFailed('IPv6', new Error('boom'), 0.1);
  const t = (await m.render()).body;
  assert.match(t, /^kubeproxy_ts_sync_failures_total\{ip_family="IPv4"\} 2$/m);
  assert.match(t, /^kubeproxy_ts_sync_failures_total\{ip_family="IPv6"\} 1$/m);
  assert.match(t, /^kubeproxy_sync_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} 1$/m);
});

test('each repair after drift counts in kubeproxy_ts_datapath_repairs_total by mode, family and reason', async () => {
  const m = new ProxyMetrics({ defaultMetrics: false });
  const r = { family: 'IPv4', mode: 'iptables', detail: 'x', seconds: 0.5, at: 0 } as const;
  m.datapathRepaired({ ...r, reason: 'rules_changed' });
  m.datapathRepaired({ ...r, reason: 'rules_changed' });
  m.datapathRepaired({ ...r, family: 'IPv6', mode: 'ebpf', reason: 'map_unpinned' });
  const t = (await m.render()).body;
  assert.match(
    t,
    /^kubeproxy_ts_datapath_repairs_total\{mode="iptables",ip_family="IPv4",reason="rules_changed"\} 2$/m,
  );
  assert.match(t, /^kubeproxy_ts_datapath_repairs_total\{mode="ebpf",ip_family="IPv6",reason="map_unpinned"\} 1$/m);
});
