// The IPVS mode, pure side (the platform side is src/platform/ipvs). Same
// shape as every mode (docs/architecture.md): a renderer class, a Fake of the
// kernel interface and a trace over the Fake.
//
// IpvsRenderer (renderer.ts) turns a SyncState into the desired kernel state
// for one IP family, in upstream's layout (pkg/proxy/ipvs/proxier.go): the
// virtual servers with their real servers (objects.ts), the Service
// addresses for kube-ipvs0, the members of upstream's ipsets (ipsets.ts) and
// the iptables restore input that matches them (rules.ts). It remembers each
// service port's contribution, so a partial sync re-renders only
// state.changedServices and lists in `touched` what may have changed; its
// memory describes what should be, so a failed apply needs no reset (the
// next, full, sync compares with the kernel). Never throws on bad data.
//
// planSync (plan.ts) compares a render with what the kernel holds and lists
// the changes: IPVS requests, an ipset restore script, address changes, and
// the real servers to drain (the platform sets them to weight 0 and deletes
// them once drained). Virtual servers that are not ours are never touched.
//
// Fake (fake.ts): the kernel interface in memory (IPVS table with errno
// refusals, ipsets with ipset's restore semantics, the dummy link and its
// addresses, the iptables Fake with xt_set's check that matched sets exist,
// sysctls, timeouts); dump() prints it as the tools do. loadRender() puts a
// render into a Fake for the packet-flow table.
//
// trace (trace.ts): follows a new connection's first packet through what a
// Fake holds along the kernel's hooks (nat, filter, IPVS, POSTROUTING) and
// reports the candidate real servers, REJECT/DROP/ACCEPT and masquerade.

export { IpvsRenderer, DEFAULT_IPVS_OPTIONS } from './renderer.js';
export type {
  IpvsOptions,
  IpvsRender,
  IpvsRenderInput,
  IpvsTouched,
  DesiredVirtualServer,
  SkippedServicePort,
} from './renderer.js';
export { Fake, currentOf, loadRender, type FakeOpFailure } from './fake.js';
export { trace } from './trace.js';
export type { RuleSource, TraceCandidate, TraceResult, TraceStep } from './trace.js';
export { planSync, destKey } from './plan.js';
export type { IpvsPlan, IpvsCurrent, CurrentVirtualServer, RetiredRealServer, PlanOptions } from './plan.js';
export {
  IPVS_SCHEDULERS,
  SVC_FLAG,
  FWD_MASQ,
  realServerKey,
  virtualServerKey,
  sameVirtualServer,
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
