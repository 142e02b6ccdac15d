// --service-traffic-metrics N in ebpf mode: the programs count per-Service
// traffic in their BPF maps, and the metrics read them at each scrape
// (src/platform/traffic.ts).
import type { Dataplane } from '../../../core/types.js';
import { BugError } from '../../../core/errors.js';
import { EbpfDataplane } from '../../../platform/ebpf/dataplane.js';
import type { Logger } from '../../../platform/logger.js';
import type { ProxyMetrics } from '../../../platform/metrics.js';
import { registerTrafficMetrics } from '../../../platform/traffic.js';

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
