// A datapath with something that rides along: the work a mode does beside its
// own rules (nftables mode's per-Service traffic counters, its localhost
// NodePort relays) follows each successful sync and is removed by cleanup.
// Every optional method of the inner datapath is passed through here, once:
// a wrapper that forgot one (drift watching, the large-cluster periodic sync)
// would silently switch that feature off for the wrapped mode.
import type { Dataplane, Drift, SyncOutcome, SyncState } from '../core/types.js';

/** What rides along: told after each successful sync, cleaned up first, closed first. */
export interface Sidecar {
  sync(state: SyncState): Promise<void>;
  cleanup(): Promise<void>;
  close?(): void | Promise<void>;
}

export function withSidecar(dp: Dataplane, side: Sidecar): Dataplane {
  const close = side.close
    ? async () => {
        await side.close!();
        await dp.close?.();
      }
    : dp.close
      ? () => dp.close!()
      : undefined;
  return {
    mode: dp.mode,
    family: dp.family,
    async sync(state: SyncState): Promise<SyncOutcome> {
      const out = await dp.sync(state);
      await side.sync(state);
      return out;
    },
    async cleanup(): Promise<void> {
      await side.cleanup();
      await dp.cleanup();
    },
    ...(close ? { close } : {}),
    ...(dp.watchDrift ? { watchDrift: (f: (drift: Drift) => void) => dp.watchDrift!(f) } : {}),
    ...(dp.skipsPeriodicFullSync ? { skipsPeriodicFullSync: () => dp.skipsPeriodicFullSync!() } : {}),
    ...(dp.startsEmpty ? { startsEmpty: () => dp.startsEmpty!() } : {}),
  };
}
