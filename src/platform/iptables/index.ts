// iptables mode on a real kernel (platform side). See dataplane.ts for the
// sync contract and restore.ts for how large restores stay linear.
export { IptablesDataplane, ROUTE_LOCALNET, type IptablesDataplaneOptions } from './dataplane.js';
export { IptablesPlanner } from './planner.js';
export { Iptables, type Table, type RestoreFlags } from './iptables.js';
export { type Sysctl, procSysctl, runnerSysctl } from './sysctl.js';
export {
  cleanupLeftovers,
  chainsToRemove,
  iptablesModeChains,
  deleteChainsInput,
  CANARY_CHAIN,
  type CleanupResult,
} from './cleanup.js';
export { detectFeatures, parseIptablesVersion, supportsRandomFully, type IptablesFeatures } from './features.js';
export { withWholeTableCache, wholeTableCachePays, isNftBackend, WHOLE_TABLE_COST_FACTOR } from './restore.js';
