// One family's userspace objects under the one reconciler: the userspace
// driver (src/dataplane/userspace/driver.ts) says what each Service wants
// (listeners and portals), the reconciler (src/engine/reconciler.ts) what
// must change for that, and the plan says it as listener work around one
// table transaction. UserspaceDataplane applies it to real listeners and
// the kernel; the tests apply it to the Fake.
//
// The failure rule is the reconciler's: memory advances with every plan,
// so when applying a plan fails (or a listener would not open, or drift is
// seen) the caller calls failed(). The next plan then adopts the listeners
// the caller holds and replaces the table.
import type { DataplaneConfig, SyncState } from '../../core/types.js';
import {
  listenerWork,
  UserspaceDriver,
  type DesiredObjects,
  type ListenerWork,
  type TableWrite,
  type UserspaceKind,
  type UserspaceValue,
} from '../../dataplane/userspace/driver.js';
import type { Transaction } from '../../dataplane/nftables/transaction.js';
import { Reconciler, type LiveObject } from '../../engine/reconciler.js';

export interface UserspacePlan {
  /** Whether every Service was planned. */
  readonly full: boolean;
  /** How the table is written (the whole table, or changed elements only). */
  readonly write: TableWrite;
  readonly work: ListenerWork;
  readonly skipped: DesiredObjects['skipped'];
}

export class UserspacePlanner {
  private readonly driver: UserspaceDriver;
  private readonly reconciler: Reconciler<UserspaceKind, UserspaceValue>;

  constructor(config: DataplaneConfig) {
    this.driver = new UserspaceDriver(config);
    this.reconciler = new Reconciler(this.driver.spec);
  }

  /**
   * The work for this state. The table is replaced (after adopting `live()`,
   * the listeners held now) when the reconciler needs the live state, and on
   * a full sync when `watched` is false: without a drift watch that is the
   * only repair. Otherwise only changed portals' elements are written.
   */
  plan(
    state: SyncState,
    live: () => Iterable<LiveObject<UserspaceKind, UserspaceValue>>,
    watched: boolean,
  ): UserspacePlan {
    const replace = this.reconciler.needsLive() || (state.fullSync && !watched);
    const full = state.fullSync || replace;
    if (replace) this.reconciler.adopt(live());
    const want = this.driver.wanted(state, full);
    const work = listenerWork(this.reconciler.plan(want.owners, full).ops);
    return { full, write: replace ? 'replace' : 'elements', work, skipped: want.skipped };
  }

  /** The plan's table transaction, once its listeners are open (`port`: an open listener's port). */
  transaction(
    plan: UserspacePlan,
    port: (listener: string) => number | undefined,
  ): { tx: Transaction; unserved: string[] } {
    return this.driver.transaction(plan.work.portals, port, plan.write);
  }

  /** Applying a plan failed, or what it applied is no longer there: the next plan replaces the table. */
  failed(): void {
    this.reconciler.failed();
  }
}
