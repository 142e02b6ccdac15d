// The iptables driver (src/dataplane/iptables/driver.ts) on the one
// reconciler: a SyncState in, the `iptables-restore` input out. No I/O:
// IptablesDataplane reads `iptables-save -t nat` and runs the restore; the
// tests, the fuzzer and the benchmarks run the same planner against a Fake.
//
// A sync is full when the caller asks for it and whenever the reconciler
// knows nothing (before the first sync, after failed()). A full sync
// rewrites every chain (its draft renders every port afresh, so every
// chain's value is new) and deletes what no Service wants. The nat table's
// chain list (`live`) is adopted when the reconciler knows nothing, or when
// our chains in it are not exactly the ones the reconciler knows (a leftover
// is deleted; a chain someone removed is not deleted again); when they are,
// adopting it would only rebuild the same memory.
// Large-cluster mode reads that list at most once per sync period, so a full
// sync may come without one. Memory advances when the input is made: if the
// restore fails, call failed().
import type { IptablesRender, IptablesRenderInput } from '../../dataplane/iptables/index.js';
import { IptablesDriver, type ChainGeneration, type IptablesKind } from '../../dataplane/iptables/driver.js';
import { isServiceChainName } from '../../dataplane/iptables/names.js';
import { Reconciler } from '../../engine/reconciler.js';
import { finish, type Steps } from '../../core/steps.js';

export class IptablesPlanner {
  private readonly driver = new IptablesDriver();
  private readonly reconciler = new Reconciler<IptablesKind, ChainGeneration>(this.driver.spec);

  /** True when the next plan is full whatever the caller asks, and wants the live chain list. */
  needsLive(): boolean {
    return this.reconciler.needsLive();
  }

  /** The restore input for `input`; `live` is the nat table's chain list (used by full syncs only). */
  plan(input: IptablesRenderInput, full: boolean, live: Iterable<string> | null = null): IptablesRender {
    return finish(this.planSteps(input, full, live));
  }

  /**
   * plan() as resumable steps (src/core/steps.ts): the driver's render, the
   * reconciler's plan and the assembly of the input, so the dataplane can run
   * a 10k-Service plan a slice at a time. The input is the same, byte for
   * byte. Until it is returned, nothing else may use this planner (failed()
   * included: the dataplane holds a drift seen meanwhile until then).
   */
  *planSteps(input: IptablesRenderInput, full: boolean, live: Iterable<string> | null = null): Steps<IptablesRender> {
    const r = this.reconciler;
    if (r.needsLive()) {
      full = true;
      r.adopt(this.driver.live(live ?? []));
    } else if (full && live !== null && !this.knowsExactly(live)) {
      r.adopt(this.driver.live(live));
    }
    const draft = yield* this.driver.desiredSteps(input, full);
    const p = yield* r.planSteps(draft, full);
    return yield* draft.translateSteps(p.ops, p.full);
  }

  /** Whether our chains in the list (no name twice) are exactly those the reconciler knows. */
  private knowsExactly(live: Iterable<string>): boolean {
    let known = 0;
    for (const c of live) {
      if (this.reconciler.applied('chain', c) !== undefined) known++;
      else if (isServiceChainName(c)) return false;
    }
    // Every remembered chain is applied once a plan is made.
    return known === this.reconciler.size;
  }

  /** The last restore did not reach the kernel (or the table changed under us): the next plan is full. */
  failed(): void {
    this.reconciler.failed();
    this.driver.failed();
  }

  /** The service chains the last plan left in the nat table. */
  *chains(): IterableIterator<string> {
    const r = this.reconciler;
    for (const owner of r.owners()) for (const [, chain] of r.ownedBy(owner)) yield chain;
  }
}
