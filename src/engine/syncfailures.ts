// Which failure counter a failed sync increments, per mode, as upstream
// counts them: iptables mode counts failed iptables-restore runs
// (sync_proxy_rules_iptables_restore_failures_total), and so does IPVS mode
// for its failed syncs (upstream's IPVS proxier counts its iptables-restore
// failures there); nftables mode counts failed transactions
// (sync_proxy_rules_nftables_sync_failures_total). userspace and eBPF have
// no such counter. A new mode adds its line here. Pure: the counters
// are injected (platform/metrics.ts ProxyMetrics implements them).

import type { IPFamily, ProxyMode } from '../core/types.js';
import { nullObserver, type ProxierObserver } from './observer.js';

export interface SyncFailureCounters {
  iptablesRestoreFailed(family: IPFamily): void;
  nftablesSyncFailed(family: IPFamily): void;
}

/** The counter a failed sync of `mode` increments, or null when the mode has none. */
export function syncFailureCounter(
  mode: ProxyMode,
  counters: SyncFailureCounters,
): ((family: IPFamily) => void) | null {
  switch (mode) {
    case 'iptables':
    case 'ipvs':
      return (family) => counters.iptablesRestoreFailed(family);
    case 'nftables':
      return (family) => counters.nftablesSyncFailed(family);
    default:
      return null;
  }
}

/** An observer that counts each failed sync of `mode` (tee it with the others). */
export function syncFailureObserver(mode: ProxyMode, counters: SyncFailureCounters): ProxierObserver {
  const count = syncFailureCounter(mode, counters);
  return count === null ? nullObserver : { ...nullObserver, syncFailed: (family) => count(family) };
}
