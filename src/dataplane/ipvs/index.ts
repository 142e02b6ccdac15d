// The IPVS mode, pure side (the platform side is src/platform/ipvs). Same
// shape as every mode (docs/architecture.md): a driver for the one
// reconciler, a Fake of the kernel interface and a trace over the Fake.
//
// IpvsDriver (driver.ts) says which keyed objects (objects.ts, IpvsKind)
// each owner wants for one IP family, in upstream's layout
// (pkg/proxy/ipvs/proxier.go): the node wants every ipset; each Service
// wants, for each of its ports (renderer.ts), its virtual servers with their
// real servers, its addresses on kube-ipvs0, its members of upstream's
// ipsets (ipsets.ts) and markers for the iptables rules (rules.ts) that
// depend on them. It remembers nothing of what was applied: the reconciler
// (src/engine/reconciler.ts) owns ownership, the diff, the order and the
// failure rule. Never throws on bad data.
//
// planOps (plan.ts) turns the reconciler's ops into the platform's requests:
// IPVS requests, an ipset restore script, address changes, whether the rules
// must be written again, and the real servers to drain (the platform sets
// them to weight 0 and deletes them once drained). liveObjects (live.ts)
// turns what the kernel holds into the objects the reconciler adopts; only
// ours: virtual servers of others are never touched.
//
// Fake (fake.ts): the kernel interface in memory (IPVS table with errno
// refusals, ipsets with ipset's restore semantics, the dummy link and its
// addresses, the iptables Fake with xt_set's check that matched sets exist,
// sysctls, timeouts); dump() prints it as the tools do. applyPlan() puts a
// plan into a Fake for the packet-flow table.
//
// trace (trace.ts): follows a new connection's first packet through what a
// Fake holds along the kernel's hooks (nat, filter, IPVS, POSTROUTING) and
// reports the candidate real servers, REJECT/DROP/ACCEPT and masquerade.

export { IpvsDriver, IPVS_SPEC, NODE_OWNER, renderedVirtualServers, setsWithMembers } from './driver.js';
export type { IpvsDesired, IpvsRenderInput } from './driver.js';
export { DEFAULT_IPVS_OPTIONS } from './serviceport.js';
export type { IpvsOptions, SkippedServicePort } from './serviceport.js';
export { Fake, currentOf, applyPlan, type FakeOpFailure } from './fake.js';
export { trace } from './trace.js';
export type { RuleSource, TraceCandidate, TraceResult, TraceStep } from './trace.js';
export { planOps } from './plan.js';
export type { IpvsPlan, RetiredRealServer, PlanOptions } from './plan.js';
export { liveObjects, ownedVirtualServer, excludedVirtualServer } from './live.js';
export type { IpvsCurrent, CurrentVirtualServer, Ownership } from './live.js';
export {
  IPVS_SCHEDULERS,
  SVC_FLAG,
  FWD_MASQ,
  PRESENT,
  IPVS_KINDS,
  isSetKind,
  destKey,
  realServerKey,
  virtualServerKey,
  sameVirtualServer,
  sameIpvsValue,
  type IpvsKind,
  type IpvsObject,
  type IpvsValue,
  type IpvsOp,
  type IpvsScheduler,
  type RealServer,
  type RealServerStatus,
  type VirtualServer,
} from './objects.js';
export { IPSET, IPSETS, ipsetName, allIpsetNames, ipsetCreateArgs, canonicalEntry, entry } from './ipsets.js';
export type { IpsetName, IpsetType, IpsetInfo } from './ipsets.js';
export { CHAIN, IPVS_CHAINS, IPVS_JUMP_CHAINS, renderIpvsRules } from './rules.js';
export type { NoNodeAccess, IpvsRulesInput } from './rules.js';
