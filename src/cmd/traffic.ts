// --service-traffic-metrics N: per-Service traffic counters, and the metrics
// that read them at each scrape (src/platform/traffic.ts). nftables mode
// wraps each datapath so that its counter table follows the syncs; ebpf mode
// asks each datapath to count in its BPF maps. The modes' drivers call these
// (ModeDriver.countsTraffic); the others get a warning and no counters (the
// README says what they could offer).
import type { Dataplane } from '../core/types.js';
import { BugError } from '../core/errors.js';
import { EbpfDataplane } from '../platform/ebpf/dataplane.js';
import { hostRunner } from '../platform/exec.js';
import type { Logger } from '../platform/logger.js';
import type { ProxyMetrics } from '../platform/metrics.js';
import { ServiceTrafficCounters, withTrafficCounters } from '../platform/nftables/traffic.js';
import { registerTrafficMetrics } from '../platform/traffic.js';

/** ebpf mode: the programs count in their maps. */
export function withEbpfTrafficCounters(
  max: number,
  dataplanes: Dataplane[],
  metrics: ProxyMetrics,
  log: Logger,
): Dataplane[] {
  if (max <= 0) return dataplanes;
  const sources = dataplanes.map((dp) => {
    if (!(dp instanceof EbpfDataplane)) throw new BugError('ebpf mode without its datapath');
    return dp.countTraffic(max);
  });
  registerTrafficMetrics(metrics.registry, sources);
  log.info({ maxServicePorts: max }, 'Per-Service traffic counters are on (BPF maps)');
  return dataplanes;
}

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
