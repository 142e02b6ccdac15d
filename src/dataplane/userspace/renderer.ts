// UserspaceRenderer: the userspace mode's renderer class, the same shape as
// the other modes' (docs/architecture.md): the whole table for a whole
// state, in two pure steps with the listeners' ports in between:
//   plan(state)        which listeners must exist with which endpoints, and
//                      where each portal sends new flows (plan.ts);
//   render(plan, ports) the whole redirect table for the ports the listeners
//                      got, as one nftables Transaction (rules.ts).
// It keeps no memory. The tests use it to see a whole table; the dataplane
// and `kube-proxy-ts diff` plan through the driver and the reconciler
// (driver.ts, src/platform/userspace/planner.ts), whose full transaction is
// this one (driver.test.ts).
import type { DataplaneConfig, SyncState } from '../../core/types.js';
import type { Transaction } from '../nftables/transaction.js';
import { planUserspace, type UserspacePlan } from './plan.js';
import { renderCleanup, renderRules } from './rules.js';

export class UserspaceRenderer {
  constructor(readonly config: DataplaneConfig) {}

  plan(state: SyncState): UserspacePlan {
    return planUserspace(state);
  }

  /** `ports` maps listener keys to bound ports; a portal whose listener has none is refused. */
  render(plan: UserspacePlan, ports: ReadonlyMap<string, number>): Transaction {
    return renderRules(plan, ports, this.config);
  }

  /** The transaction that removes this family's table (no error when it is absent). */
  cleanup(): Transaction {
    return renderCleanup(this.config.family);
  }
}
