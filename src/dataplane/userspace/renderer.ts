// UserspaceRenderer: the userspace mode's renderer class, the same shape as
// the other modes' (docs/architecture.md). A sync is two pure steps with the
// platform's listener work in between:
//   plan(state)        which listeners must exist with which endpoints, and
//                      where each portal sends new flows (plan.ts);
//   render(plan, ports) the whole redirect table for the ports the listeners
//                      got, as one nftables Transaction (rules.ts).
// It keeps no memory between syncs: every sync rewrites the whole table, and
// the listeners (the state that does persist) live in the platform side.
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
