// Which failure counter a failed sync increments, as upstream counts them:
// iptables mode counts failed iptables-restore runs
// (sync_proxy_rules_iptables_restore_failures_total), and so does IPVS mode
// for its failed syncs (upstream's IPVS proxier counts its iptables-restore
// failures there); nftables mode counts failed transactions
// (sync_proxy_rules_nftables_sync_failures_total). userspace and eBPF have
// no such counter. Each mode's driver names its counter
// (ModeDriver.failureCounter). Pure: the counters are injected
// (platform/metrics.ts ProxyMetrics implements them).

import type { IPFamily } from '../core/types.js';
import { nullObserver, type ProxierObserver } from './observer.js';

export interface SyncFailureCounters {
  iptablesRestoreFailed(family: IPFamily): void;
  nftablesSyncFailed(family: IPFamily): void;
}

/** upstream's counter a mode's failed syncs go to. */
export type SyncFailureCounterKind = 'iptables-restore' | 'nftables-sync';

/** The counter a failed sync increments, or null when the mode has none. */
export function syncFailureCounter(
  kind: SyncFailureCounterKind | null,
  counters: SyncFailureCounters,
): ((family: IPFamily) => void) | null {
  if (kind === null) return null;
  const count: Record<SyncFailureCounterKind, (family: IPFamily) => void> = {
    'iptables-restore': (family) => counters.iptablesRestoreFailed(family),
    'nftables-sync': (family) => counters.nftablesSyncFailed(family),
  };
  return count[kind];
}

/** An observer that counts each failed sync with `kind`'s counter (tee it with the others). */
export function syncFailureObserver(
  kind: SyncFailureCounterKind | null,
  counters: SyncFailureCounters,
): ProxierObserver {
  const count = syncFailureCounter(kind, counters);
  return count === null ? nullObserver : { ...nullObserver, syncFailed: (family) => count(family) };
}
