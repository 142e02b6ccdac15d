// --service-traffic-metrics N in nftables mode: a counter table of our own
// follows each datapath's syncs, and the metrics read it at each scrape
// (src/platform/traffic.ts).
import type { Dataplane } from '../../../core/types.js';
import { hostRunner } from '../../../platform/exec.js';
import type { Logger } from '../../../platform/logger.js';
import type { ProxyMetrics } from '../../../platform/metrics.js';
import { ServiceTrafficCounters, withTrafficCounters } from '../../../platform/nftables/traffic.js';
import { registerTrafficMetrics } from '../../../platform/traffic.js';

/** nftables mode: a counter table of our own beside the kube-proxy table. */
export function withNftablesTrafficCounters(
  max: number,
  dataplanes: Dataplane[],
  metrics: ProxyMetrics,
  log: Logger,
): Dataplane[] {
  if (max <= 0) return dataplanes;
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
