// The last sync of each IP family as an operator wants to see it: when, how
// long, full or partial, and the last error with its time. It is a
// ProxierObserver fed by the proxier like the metrics and the health state;
// /statusz and `kube-proxy-ts status` read it.
//
// Invariants: lastError survives later successes (a recovered failure is
// still worth seeing; its time tells whether it is older than the last
// success); failuresSinceSuccess counts failed attempts since the last success.

import type { IPFamily } from '../core/types.js';
import type { Clock } from '../core/clock.js';
import { nullObserver, type ProxierObserver, type RepairReport, type SyncReport } from './observer.js';

export interface FamilySyncStatus {
  readonly family: IPFamily;
  /** null until the family synced successfully once. */
  readonly lastSync: { readonly at: number; readonly durationSeconds: number; readonly partial: boolean } | null;
  readonly lastError: { readonly at: number; readonly message: string } | null;
  readonly failuresSinceSuccess: number;
  /** Repairs after drift (another actor changed what the datapath wrote) since the start. */
  readonly repairs: number;
  readonly lastRepair: {
    readonly at: number;
    readonly reason: string;
    readonly detail: string;
    readonly seconds: number;
  } | null;
}

/** "message: cause message: ..." so a wrapped datapath error shows what actually failed. */
export function errorText(err: unknown): string {
  const parts: string[] = [];
  let cur: unknown = err;
  for (let depth = 0; cur !== undefined && cur !== null && depth < 5; depth++) {
    const msg = cur instanceof Error ? cur.message : String(cur);
    if (!parts.includes(msg)) parts.push(msg);
    cur = cur instanceof Error ? cur.cause : undefined;
  }
  return parts.join(': ');
}

export class SyncStatusRecorder {
  private readonly byFamily = new Map<IPFamily, FamilySyncStatus>();

  constructor(
    private readonly clock: Clock,
    families: readonly IPFamily[],
  ) {
    for (const family of families) this.byFamily.set(family, empty(family));
  }

  /** Plug into the proxier's observer tee. */
  readonly observer: ProxierObserver = {
    ...nullObserver,
    syncSucceeded: (r: SyncReport) => {
      const prev = this.get(r.family);
      this.byFamily.set(r.family, {
        ...prev,
        lastSync: { at: r.finishedAt * 1000, durationSeconds: r.durationSeconds, partial: r.partial },
        failuresSinceSuccess: 0,
      });
    },
    syncFailed: (family: IPFamily, error: unknown) => {
      const prev = this.get(family);
      this.byFamily.set(family, {
        ...prev,
        lastError: { at: this.clock.now(), message: errorText(error) },
        failuresSinceSuccess: prev.failuresSinceSuccess + 1,
      });
    },
    datapathRepaired: (r: RepairReport) => {
      const prev = this.get(r.family);
      this.byFamily.set(r.family, {
        ...prev,
        repairs: prev.repairs + 1,
        lastRepair: { at: r.at, reason: r.reason, detail: r.detail, seconds: r.seconds },
      });
    },
  };

  /** One entry per family, in the order given to the constructor. */
  status(): FamilySyncStatus[] {
    return [...this.byFamily.values()];
  }

  private get(family: IPFamily): FamilySyncStatus {
    return this.byFamily.get(family) ?? empty(family);
  }
}

function empty(family: IPFamily): FamilySyncStatus {
  return { family, lastSync: null, lastError: null, failuresSinceSuccess: 0, repairs: 0, lastRepair: null };
}
