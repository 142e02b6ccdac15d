// SyncStates into an IPVS Fake the way IpvsDataplane syncs a kernel (the
// same IpvsPlanner: the driver, the one reconciler, planOps), synchronously
// and without graceful termination: an unwanted real server is deleted at
// once. For the packet-flow table, the bundle round trip, the fuzzer and the
// driver's own tests.
import type { DataplaneConfig, SyncState } from '../../src/core/types.js';
import { applyPlan, currentOf, type Fake, type IpvsOptions } from '../../src/dataplane/ipvs/index.js';
import { IpvsPlanner, type IpvsPlanned } from '../../src/platform/ipvs/planner.js';

export class IpvsFakeLoader {
  readonly planner: IpvsPlanner;

  constructor(
    readonly fake: Fake,
    readonly config: DataplaneConfig,
    options?: IpvsOptions,
  ) {
    // Everything in the Fake was written by this loader: every virtual server is ours.
    this.planner = new IpvsPlanner(config, { ...options, adoptAll: true });
  }

  /** One sync; the first (and any after a failure) is full against what the Fake holds. */
  sync(state: SyncState, nodeAddresses?: readonly string[]): IpvsPlanned {
    const full = state.fullSync || this.planner.needsLive();
    const planned = this.planner.plan({
      state,
      full,
      nodeAddresses,
      // A change of the node's addresses makes the plan full too; the Fake is cheap to read.
      live: currentOf(this.fake, this.config.family),
    });
    try {
      applyPlan(this.fake, planned.plan, planned.rules);
    } catch (e) {
      this.planner.failed();
      throw e;
    }
    return planned;
  }
}

/** Load one state into a Fake as a full sync. */
export function loadState(fake: Fake, state: SyncState, config: DataplaneConfig): IpvsPlanned {
  return new IpvsFakeLoader(fake, config).sync({ ...state, fullSync: true });
}
