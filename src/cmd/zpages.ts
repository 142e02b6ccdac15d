// The running proxy's /statusz and /flagz: which of them the feature gates
// turn on (ComponentStatusz, ComponentFlagz; both on by default, as upstream
// since 1.36), and the status document read from the proxier per request.
import { featureGateEnabled } from '../core/config/features.js';
import type { IPFamily, SyncState } from '../core/types.js';
import type { CanaryStatus } from '../engine/canary.js';
import type { Clock } from '../core/clock.js';
import type { Proxier } from '../engine/proxier.js';
import { buildStatusView } from '../engine/statusview.js';
import type { SyncStatusRecorder } from '../engine/syncstatus.js';
import type { MetricsServerOptions } from '../platform/metricsserver.js';
import type { RunCommand } from './options.js';

export function zpageOptions(
  cmd: RunCommand,
  proxier: Proxier,
  syncStatus: SyncStatusRecorder,
  clock: Clock,
  startTime: number,
  canaries: () => ReadonlyMap<IPFamily, CanaryStatus> = () => new Map(),
): Pick<MetricsServerOptions, 'statusz' | 'flagz'> {
  const gates = cmd.resolved.featureGates;
  const statusz = () => {
    const syncs = syncStatus.status();
    const states = new Map<IPFamily, SyncState | null>(syncs.map((s) => [s.family, proxier.lastSyncState(s.family)]));
    return buildStatusView({
      mode: cmd.mode,
      version: cmd.version,
      startTime,
      now: clock.now(),
      node: proxier.nodeInfo(),
      initialized: proxier.isInitialized(),
      syncs,
      states,
      canaries: canaries(),
    });
  };
  return {
    ...(featureGateEnabled(gates, 'ComponentStatusz') ? { statusz } : {}),
    ...(featureGateEnabled(gates, 'ComponentFlagz') ? { flagz: cmd.flagz } : {}),
  };
}
