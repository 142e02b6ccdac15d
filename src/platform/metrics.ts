// The kube-proxy metrics registry (names, types, labels and buckets exactly
// as upstream's pkg/proxy/metrics/metrics.go; the help texts are ours). ProxyMetrics implements
// ProxierObserver so the engine publishes into it without importing
// prom-client; datapaths, the conntrack reconciler and the health servers use
// the small methods below.
//
// SyncReport.counters (per-mode numbers a datapath returns) understood here:
//   "iptables_total:<table>" -> kubeproxy_sync_proxy_rules_iptables_total{table}
//   "iptables_last:<table>"  -> kubeproxy_sync_proxy_rules_iptables_last{table}
//   and the iptables dataplane's own names, as upstream sets them:
//   filterRules -> total and last {table="filter"} (filter is always rewritten),
//   natRules -> last {table="nat"}, natRulesTotal -> total {table="nat"}.
// Other keys are ignored.

import {
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  exponentialBuckets,
  linearBuckets,
} from './promclient.js';
import type { IPFamily } from '../core/types.js';
import type { ProxierObserver, RepairReport, SyncReport } from '../engine/observer.js';
import { toEpochMs } from '../engine/health.js';
import { run, type ExecResult } from './exec.js';

const SYNC_BUCKETS = exponentialBuckets(0.001, 2, 15);
/** Upstream merge(): a leading 0, then 0.25, 0.5, 1..59, 60..115, 120..300. */
const NETWORK_PROGRAMMING_BUCKETS = [
  0,
  ...linearBuckets(0.25, 0.25, 2),
  ...linearBuckets(1, 1, 59),
  ...linearBuckets(60, 5, 12),
  ...linearBuckets(120, 30, 7),
];

const IPTABLES_COUNTER_ALIASES: Readonly<Record<string, ReadonlyArray<readonly [string, string]>>> = {
  filterRules: [
    ['iptables_total', 'filter'],
    ['iptables_last', 'filter'],
  ],
  natRules: [['iptables_last', 'nat']],
  natRulesTotal: [['iptables_total', 'nat']],
};

/** nfacct packet counters for the two iptables custom collectors; undefined = unknown (not exported). */
export interface NfacctCounters {
  readonly ctStateInvalidDropped?: number;
  readonly localhostNodePortsAccepted?: number;
}

export interface ProxyMetricsOptions {
  /** Add process and Node.js runtime metrics (default true). */
  readonly defaultMetrics?: boolean;
  /** Reads nfacct counters at scrape time (iptables mode). */
  readonly nfacct?: () => Promise<NfacctCounters>;
}

/** The narrow API a datapath's platform side needs; ProxyMetrics implements it. */
export interface DatapathMetrics {
  iptablesRestoreFailed(family: IPFamily, partial?: boolean): void;
  nftablesSyncFailed(family: IPFamily): void;
  nftablesCleanupFailed(family: IPFamily): void;
}

/** What the conntrack cleanup reports (ConntrackCleanupReport fits it). */
export interface ConntrackMetrics {
  conntrackReconciled(family: IPFamily, seconds: number, deleted: number): void;
}

/** For tests and tools that do not collect metrics. */
export const nullDatapathMetrics: DatapathMetrics & ConntrackMetrics = {
  iptablesRestoreFailed() {},
  nftablesSyncFailed() {},
  nftablesCleanupFailed() {},
  conntrackReconciled() {},
};

export class ProxyMetrics implements ProxierObserver, DatapathMetrics, ConntrackMetrics {
  readonly registry = new Registry();
  private readonly r = [this.registry];

  readonly syncProxyRulesDuration = new Histogram({
    name: 'kubeproxy_sync_proxy_rules_duration_seconds',
    help: 'Seconds a sync of the proxy rules took',
    labelNames: ['ip_family'],
    buckets: SYNC_BUCKETS,
    registers: this.r,
  });
  readonly syncFullProxyRulesDuration = new Histogram({
    name: 'kubeproxy_sync_full_proxy_rules_duration_seconds',
    help: 'Seconds a full sync of the proxy rules took',
    labelNames: ['ip_family'],
    buckets: SYNC_BUCKETS,
    registers: this.r,
  });
  readonly syncPartialProxyRulesDuration = new Histogram({
    name: 'kubeproxy_sync_partial_proxy_rules_duration_seconds',
    help: 'Seconds a partial sync of the proxy rules took',
    labelNames: ['ip_family'],
    buckets: SYNC_BUCKETS,
    registers: this.r,
  });
  readonly syncProxyRulesLastTimestamp = new Gauge({
    name: 'kubeproxy_sync_proxy_rules_last_timestamp_seconds',
    help: 'When the proxy rules were last synced successfully (epoch seconds)',
    labelNames: ['ip_family'],
    registers: this.r,
  });
  readonly syncProxyRulesLastQueuedTimestamp = new Gauge({
    name: 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds',
    help: 'When a sync of the proxy rules was last requested (epoch seconds)',
    labelNames: ['ip_family'],
    registers: this.r,
  });
  readonly networkProgrammingDuration = new Histogram({
    name: 'kubeproxy_network_programming_duration_seconds',
    help: 'Seconds from an endpoint change in the cluster to the rules that carry it',
    labelNames: ['ip_family'],
    buckets: NETWORK_PROGRAMMING_BUCKETS,
    registers: this.r,
  });
  readonly endpointChangesPending = new Gauge({
    name: 'kubeproxy_sync_proxy_rules_endpoint_changes_pending',
    help: 'Endpoint changes recorded and not yet synced',
    registers: this.r,
  });
  readonly endpointChangesTotal = new Counter({
    name: 'kubeproxy_sync_proxy_rules_endpoint_changes_total',
    help: 'Endpoint changes recorded',
    registers: this.r,
  });
  readonly serviceChangesPending = new Gauge({
    name: 'kubeproxy_sync_proxy_rules_service_changes_pending',
    help: 'Service changes recorded and not yet synced',
    registers: this.r,
  });
  readonly serviceChangesTotal = new Counter({
    name: 'kubeproxy_sync_proxy_rules_service_changes_total',
    help: 'Service changes recorded',
    registers: this.r,
  });
  readonly noLocalEndpointsTotal = new Gauge({
    name: 'kubeproxy_sync_proxy_rules_no_local_endpoints_total',
    help: 'Services with a Local traffic policy that have endpoints, but none on this node',
    labelNames: ['ip_family', 'traffic_policy'],
    registers: this.r,
  });
  readonly iptablesRestoreFailuresTotal = new Counter({
    name: 'kubeproxy_sync_proxy_rules_iptables_restore_failures_total',
    help: 'iptables-restore runs that failed',
    labelNames: ['ip_family'],
    registers: this.r,
  });
  readonly iptablesPartialRestoreFailuresTotal = new Counter({
    name: 'kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total',
    help: 'iptables-restore runs of partial syncs that failed',
    labelNames: ['ip_family'],
    registers: this.r,
  });
  readonly iptablesTotal = new Gauge({
    name: 'kubeproxy_sync_proxy_rules_iptables_total',
    help: 'iptables rules of this proxy in the kernel',
    labelNames: ['ip_family', 'table'],
    registers: this.r,
  });
  readonly iptablesLast = new Gauge({
    name: 'kubeproxy_sync_proxy_rules_iptables_last',
    help: 'iptables rules this proxy wrote in its last sync',
    labelNames: ['ip_family', 'table'],
    registers: this.r,
  });
  readonly nftablesSyncFailuresTotal = new Counter({
    name: 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total',
    help: 'nftables syncs that failed',
    labelNames: ['ip_family'],
    registers: this.r,
  });
  readonly nftablesCleanupFailuresTotal = new Counter({
    name: 'kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total',
    help: 'nftables cleanups that failed',
    labelNames: ['ip_family'],
    registers: this.r,
  });
  readonly conntrackReconcilerSyncDuration = new Histogram({
    name: 'kubeproxy_conntrack_reconciler_sync_duration_seconds',
    help: 'Seconds a cleanup of stale conntrack entries took',
    labelNames: ['ip_family'],
    buckets: SYNC_BUCKETS,
    registers: this.r,
  });
  readonly conntrackReconcilerDeletedEntriesTotal = new Counter({
    name: 'kubeproxy_conntrack_reconciler_deleted_entries_total',
    help: 'Stale conntrack entries deleted',
    labelNames: ['ip_family'],
    registers: this.r,
  });
  readonly proxyHealthzTotal = new Counter({
    name: 'kubeproxy_proxy_healthz_total',
    help: 'Answers of /healthz, by HTTP status code',
    labelNames: ['code'],
    registers: this.r,
  });
  readonly proxyLivezTotal = new Counter({
    name: 'kubeproxy_proxy_livez_total',
    help: 'Answers of /livez, by HTTP status code',
    labelNames: ['code'],
    registers: this.r,
  });
  /** Bad input the engine skipped (not upstream; our own visibility of logged-and-counted skips). */
  readonly inputSkippedTotal = new Counter({
    name: 'kubeproxy_ts_input_skipped_total',
    help: 'API objects skipped as invalid',
    labelNames: ['kind'],
    registers: this.r,
  });
  /**
   * Failed syncs in every mode (not upstream: its failure counters exist only
   * for iptables-restore and nftables transactions; ebpf and userspace had none).
   */
  readonly syncFailuresTotal = new Counter({
    name: 'kubeproxy_ts_sync_failures_total',
    help: 'Failed syncs of the datapath, in every proxy mode',
    labelNames: ['ip_family'],
    registers: this.r,
  });
  /** healthCheckNodePort listeners that failed to open (not upstream: upstream only emits an event). */
  /** KEP-6032's listener metrics; registered by addLocalhostNodePortMetrics (nftables mode only). */
  private localhostNodePort: { listeners: Gauge<'ip_family'>; failures: Counter<'ip_family'> } | null = null;
  readonly serviceHealthcheckFailuresTotal = new Counter({
    name: 'kubeproxy_ts_service_healthcheck_listen_failures_total',
    help: 'Service health check listeners that failed to open',
    registers: this.r,
  });

  /**
   * Repairs after another actor changed what the datapath wrote (not
   * upstream, whose only repair is the canary check's full sync, uncounted).
   */
  readonly datapathRepairsTotal = new Counter({
    name: 'kubeproxy_ts_datapath_repairs_total',
    help: 'Full syncs that repaired the datapath after another actor changed it, by what was noticed',
    labelNames: ['mode', 'ip_family', 'reason'],
    registers: this.r,
  });

  constructor(opts: ProxyMetricsOptions = {}) {
    if (opts.defaultMetrics !== false) collectDefaultMetrics(this.registry);
    if (opts.nfacct) this.addNfacctCollectors(opts.nfacct);
  }

  // ---- ProxierObserver -------------------------------------------------

  queuedUpdate(family: IPFamily, at: number): void {
    this.syncProxyRulesLastQueuedTimestamp.set({ ip_family: family }, toEpochMs(at) / 1000);
  }

  syncSucceeded(report: SyncReport): void {
    const l = { ip_family: report.family };
    this.syncProxyRulesDuration.observe(l, report.durationSeconds);
    (report.partial ? this.syncPartialProxyRulesDuration : this.syncFullProxyRulesDuration).observe(
      l,
      report.durationSeconds,
    );
    this.syncProxyRulesLastTimestamp.set(l, toEpochMs(report.finishedAt) / 1000);
    this.noLocalEndpointsTotal.set({ ...l, traffic_policy: 'internal' }, report.noLocalEndpoints.internal);
    this.noLocalEndpointsTotal.set({ ...l, traffic_policy: 'external' }, report.noLocalEndpoints.external);
    for (const [key, value] of Object.entries(report.counters ?? {})) {
      if (!Number.isFinite(value)) continue;
      for (const [kind, table] of IPTABLES_COUNTER_ALIASES[key] ?? [key.split(':') as [string, string]]) {
        if (!table) continue;
        if (kind === 'iptables_total') this.iptablesTotal.set({ ...l, table }, value);
        else if (kind === 'iptables_last') this.iptablesLast.set({ ...l, table }, value);
      }
    }
  }

  /** Upstream records the duration of failed syncs too (the deferred observe in syncProxyRules). */
  syncFailed(family: IPFamily, _error: unknown, durationSeconds: number): void {
    this.syncFailuresTotal.inc({ ip_family: family });
    if (Number.isFinite(durationSeconds)) this.syncProxyRulesDuration.observe({ ip_family: family }, durationSeconds);
  }

  pendingChanges(kind: 'service' | 'endpoint', pending: number): void {
    (kind === 'service' ? this.serviceChangesPending : this.endpointChangesPending).set(pending);
  }

  changeRecorded(kind: 'service' | 'endpoint'): void {
    (kind === 'service' ? this.serviceChangesTotal : this.endpointChangesTotal).inc();
  }

  networkProgrammingLatency(family: IPFamily, seconds: number): void {
    if (Number.isFinite(seconds) && seconds >= 0)
      this.networkProgrammingDuration.observe({ ip_family: family }, seconds);
  }

  inputSkipped(kind: 'service' | 'endpointslice' | 'node', _key: string, _reason: string): void {
    this.inputSkippedTotal.inc({ kind });
  }

  driftDetected(): void {}

  datapathRepaired(r: RepairReport): void {
    this.datapathRepairsTotal.inc({ mode: r.mode, ip_family: r.family, reason: r.reason });
  }

  event(): void {}

  // ---- datapath / reconciler / server API ------------------------------

  /** iptables-restore failed (partial: it was a partial restore). */
  iptablesRestoreFailed(family: IPFamily, partial = false): void {
    this.iptablesRestoreFailuresTotal.inc({ ip_family: family });
    if (partial) this.iptablesPartialRestoreFailuresTotal.inc({ ip_family: family });
  }

  nftablesSyncFailed(family: IPFamily): void {
    this.nftablesSyncFailuresTotal.inc({ ip_family: family });
  }

  nftablesCleanupFailed(family: IPFamily): void {
    this.nftablesCleanupFailuresTotal.inc({ ip_family: family });
  }

  /** One conntrack cleanup pass (upstream CleanStaleEntries) for one family. */
  conntrackReconciled(family: IPFamily, seconds: number, deleted: number): void {
    this.conntrackReconcilerSyncDuration.observe({ ip_family: family }, seconds);
    if (deleted > 0) this.conntrackReconcilerDeletedEntriesTotal.inc({ ip_family: family }, deleted);
  }

  healthzServed(code: number): void {
    this.proxyHealthzTotal.inc({ code: String(code) });
  }

  livezServed(code: number): void {
    this.proxyLivezTotal.inc({ code: String(code) });
  }

  localhostNodePortListeners(family: IPFamily, n: number): void {
    this.localhostNodePort?.listeners.set({ ip_family: family }, n);
  }

  localhostNodePortListenerFailed(family: IPFamily): void {
    this.localhostNodePort?.failures.inc({ ip_family: family });
  }

  /**
   * The three KEP-6032 metrics, registered only where localhost NodePorts exist (nftables mode), as
   * upstream registers them with its nftables proxier. The rejected-packets counter
   * (`{ip_family,protocol}`) is the reject table's named counters, read at each scrape; a family
   * whose read fails exports nothing.
   */
  addLocalhostNodePortMetrics(
    sources: ReadonlyArray<{
      readonly family: IPFamily;
      rejectedPackets(): Promise<Readonly<Partial<Record<string, number>>>>;
    }>,
  ): void {
    this.localhostNodePort = {
      listeners: new Gauge({
        name: 'kubeproxy_nftables_localhost_nodeport_listeners',
        help: 'Userspace relays listening on a loopback NodePort',
        labelNames: ['ip_family'],
        registers: this.r,
      }),
      failures: new Counter({
        name: 'kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total',
        help: 'Loopback NodePort relays that could not listen (for example, the port was already taken)',
        labelNames: ['ip_family'],
        registers: this.r,
      }),
    };
    new Counter({
      name: 'kubeproxy_nftables_localhost_nodeport_rejected_packets_total',
      help: 'Packets to a loopback NodePort that were rejected: UDP and SCTP always, TCP when the loopback relay is not enabled',
      labelNames: ['ip_family', 'protocol'],
      registers: this.r,
      async collect() {
        this.reset();
        const all = await Promise.all(
          sources.map(async (s) => ({ s, c: await s.rejectedPackets().catch(() => ({})) })),
        );
        for (const { s, c } of all)
          for (const [protocol, packets] of Object.entries(c))
            if (packets !== undefined) this.inc({ ip_family: s.family, protocol }, packets);
      },
    });
  }

  serviceHealthcheckListenFailed(): void {
    this.serviceHealthcheckFailuresTotal.inc();
  }

  /** Prometheus text exposition of everything registered. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  private addNfacctCollectors(read: () => Promise<NfacctCounters>): void {
    // Upstream's custom collectors read nfacct at scrape time; a failed read exports nothing.
    const mk = (name: string, help: string, pick: (c: NfacctCounters) => number | undefined) =>
      new Counter({
        name,
        help,
        registers: this.r,
        async collect() {
          this.reset();
          try {
            const v = pick(await read());
            if (v !== undefined && Number.isFinite(v) && v > 0) this.inc(v);
          } catch {
            // unreadable: leave at 0
          }
        },
      });
    mk(
      'kubeproxy_iptables_ct_state_invalid_dropped_packets_total',
      'Packets dropped in KUBE-FORWARD because conntrack marked them INVALID',
      (c) => c.ctStateInvalidDropped,
    );
    mk(
      'kubeproxy_iptables_localhost_nodeports_accepted_packets_total',
      'Packets accepted on NodePorts of the loopback interface',
      (c) => c.localhostNodePortsAccepted,
    );
  }
}

/** Packets of one nfacct object from `nfacct get NAME` ("{ pkts = 0000..12, bytes = ... } = NAME;"); undefined if absent. */
export function parseNfacctPackets(text: string, name: string): number | undefined {
  for (const line of text.split('\n')) {
    const m = /\{\s*pkts\s*=\s*(\d+)\s*,.*\}\s*=\s*(\S+?);?\s*$/.exec(line);
    if (m && m[2] === name) return Number(m[1]);
  }
  return undefined;
}

/**
 * ProxyMetricsOptions.nfacct reading the two upstream counters with the
 * `nfacct` tool (exec injectable). A missing tool or object yields undefined.
 */
export function nfacctReader(
  exec: (args: string[]) => Promise<ExecResult> = (args) => run('nfacct', args, { allowFailure: true }),
): () => Promise<NfacctCounters> {
  const one = async (name: string) => {
    try {
      const r = await exec(['get', name]);
      return r.code === 0 ? parseNfacctPackets(r.stdout, name) : undefined;
    } catch {
      return undefined;
    }
  };
  return async () => ({
    ctStateInvalidDropped: await one('ct_state_invalid_dropped_pkts'),
    localhostNodePortsAccepted: await one('localhost_nps_accepted_pkts'),
  });
}
