// --service-traffic-metrics N: wraps each nftables datapath so that the
// per-Service counter table follows its syncs, and registers the metrics
// that read it. Other modes get a warning and no counters (docs/metrics.md
// says what they could offer).
import type { Dataplane, ProxyMode } from '../core/types.js';
import { hostRunner } from '../platform/exec.js';
import type { Logger } from '../platform/logger.js';
import type { ProxyMetrics } from '../platform/metrics.js';
import { registerTrafficMetrics, ServiceTrafficCounters, withTrafficCounters } from '../platform/nftables/traffic.js';

export function withServiceTraffic(
  max: number,
  mode: ProxyMode,
  dataplanes: Dataplane[],
  metrics: ProxyMetrics,
  log: Logger,
): Dataplane[] {
  if (max <= 0) return dataplanes;
  if (mode !== 'nftables') {
    log.warn({ mode }, '--service-traffic-metrics counts traffic in nftables mode only; no per-Service counters');
    return dataplanes;
  }
  const counters = dataplanes.map(
    (dp) =>
      new ServiceTrafficCounters(dp.family, hostRunner, max, (err) =>
        log.warn(
          { err: err instanceof Error ? err.message : String(err), family: dp.family },
          'per-Service traffic counters not updated',
        ),
      ),
  );
  registerTrafficMetrics(metrics.registry, counters);
  log.info({ maxServicePorts: max }, 'Per-Service traffic counters are on');
  return dataplanes.map((dp, i) => withTrafficCounters(dp, counters[i]!));
}
