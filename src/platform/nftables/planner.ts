// The nftables driver (src/dataplane/nftables/driver.ts) on the one
// reconciler: a SyncState in, the transaction that brings one family's
// `kube-proxy` table there out. No I/O: NftablesDataplane reads the table
// back and applies the transaction; `kube-proxy-ts diff`, the tests and the
// benchmarks run the same planner against a Fake.
//
// A sync is full when the state asks for it, after failed() (or before the
// first sync), and when an input of the static rules changed. A full sync
// starts from the table as read back (`live`: the reconciler adopts it, so
// leftovers are deleted, chains rewritten, elements diffed against the
// kernel); without a read-back it diffs against memory. Memory advances when
// the transaction is made: if applying it fails, call failed().
import type { DataplaneConfig, SyncState } from '../../core/types.js';
import {
  EMPTY_SNAPSHOT,
  NftablesDriver,
  type KernelSnapshot,
  type NftKind,
  type NftValue,
  type RenderResult,
} from '../../dataplane/nftables/driver.js';
import { DEFAULT_ENDPOINT_LAYOUT, type EndpointLayout } from '../../dataplane/nftables/static.js';
import { Reconciler } from '../../engine/reconciler.js';
import { finish, type Steps } from '../../core/steps.js';

export class NftablesPlanner {
  private readonly driver: NftablesDriver;
  private readonly reconciler: Reconciler<NftKind, NftValue>;

  constructor(config: DataplaneConfig, layout: EndpointLayout = DEFAULT_ENDPOINT_LAYOUT) {
    this.driver = new NftablesDriver(config, layout);
    this.reconciler = new Reconciler(this.driver.spec);
  }

  /** True when the next plan will be full, so the caller should read the table back for it. */
  needsFullSync(state: SyncState): boolean {
    return state.fullSync || this.reconciler.needsLive() || this.driver.staticChanged(state);
  }

  /** The transaction for `state`; `live` is the table read back (used by full syncs only). */
  plan(state: SyncState, now: number, live: KernelSnapshot | null = null): RenderResult {
    return finish(this.planSteps(state, now, live));
  }

  /**
   * plan() as resumable steps (src/core/steps.ts): the dataplane runs them a
   * slice at a time, so a 10k-Service plan does not hold the event loop.
   * Until the transaction is returned, nothing else may use this planner.
   */
  *planSteps(state: SyncState, now: number, live: KernelSnapshot | null = null): Steps<RenderResult> {
    const full = this.needsFullSync(state);
    if (full && (live !== null || this.reconciler.needsLive()))
      this.reconciler.adopt(this.driver.live(live ?? EMPTY_SNAPSHOT));
    const desired = yield* this.driver.desiredSteps(state, full);
    const p = yield* this.reconciler.planSteps(desired, full);
    return yield* this.driver.transactionSteps(state, p.ops, p.full, now);
  }

  /** The last transaction did not reach the kernel (or the table changed under us): the next plan is full. */
  failed(): void {
    this.reconciler.failed();
  }

  /** Stale chains waiting for deletion, with the time they were flushed. */
  pendingStaleChains(): ReadonlyMap<string, number> {
    return this.driver.pendingStaleChains();
  }
}
