// --service-traffic-metrics N: per-Service traffic counters, and the metrics
// that read them at each scrape (src/platform/traffic.ts). nftables mode
// wraps each datapath so that its counter table follows the syncs; ebpf mode
// asks each datapath to count in its BPF maps. Other modes get a warning and
// no counters (the README says what they could offer).
import type { Dataplane, ProxyMode } from '../core/types.js';
import { EbpfDataplane } from '../platform/ebpf/dataplane.js';
import { hostRunner } from '../platform/exec.js';
import type { Logger } from '../platform/logger.js';
import type { ProxyMetrics } from '../platform/metrics.js';
import { ServiceTrafficCounters, withTrafficCounters } from '../platform/nftables/traffic.js';
import { registerTrafficMetrics } from '../platform/traffic.js';
import { BugError } from '../core/errors.js';

export function withServiceTraffic(
  max: number,
  mode: ProxyMode,
  dataplanes: Dataplane[],
  metrics: ProxyMetrics,
  log: Logger,
): Dataplane[] {
  if (max <= 0) return dataplanes;
  if (mode === 'ebpf') {
    const sources = dataplanes.map((dp) => {
      if (!(dp instanceof EbpfDataplane)) throw new BugError('ebpf mode without its datapath');
      return dp.countTraffic(max);
    });
    registerTrafficMetrics(metrics.registry, sources);
    log.info({ maxServicePorts: max }, 'Per-Service traffic counters are on (BPF maps)');
    return dataplanes;
  }
  if (mode !== 'nftables') {
    log.warn(
      { mode },
      '--service-traffic-metrics counts traffic in nftables and ebpf modes only; no per-Service counters',
    );
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
