// The iptables mode, pure side (the platform side is src/platform/iptables).
// Same shape as every mode (docs/architecture.md): a driver for the one
// reconciler, a Fake of the kernel interface and a trace over the Fake.
//
// IptablesDriver (driver.ts) says which service chains (KUBE-SVC/SVL/EXT/FW/
// SEP) each Service wants, and turns the reconciler's operations on them into
// one `iptables-restore --noflush --counters` payload, `*filter … COMMIT\n*nat
// … COMMIT\n`, in upstream's order (pkg/proxy/iptables/proxier.go
// syncProxyRules; the text is assembled in renderer.ts). One driver per
// dataplane; its memory is a memo of rendered service ports (memo.ts) that
// only saves work, whose generation numbers are the chains' values. The
// reconciler, not the driver, remembers which chains exist and who wants
// them; src/platform/iptables/planner.ts puts the two together:
//   - the filter section is always complete; the nat section rewrites
//     KUBE-SERVICES, KUBE-NODEPORTS, KUBE-POSTROUTING and KUBE-MARK-MASQ
//     (except KUBE-SERVICES and KUBE-NODEPORTS in a large-cluster partial sync
//     that would write them unchanged: r.natTopKept), and
//     writes the service chains the reconciler puts: every one on a full sync
//     (which starts from the live chain list), on a partial one (r.partial)
//     those of state.changedServices whose render changed;
//   - chains the reconciler deletes are declared and deleted with `-X`;
//   - never throws on bad data: an unrenderable service port is listed in
//     r.skipped. Counts for the metrics: filterRules, natRules,
//     natRulesTotal, noLocalEndpoints;
//   - the render, the plan and the assembly are also offered as resumable
//     steps (desiredSteps, translateSteps, renderRestoreSteps; the planner's
//     planSteps), which the dataplane runs a slice at a time: the same bytes.
// The caller (src/platform/iptables/dataplane.ts) applies r.restoreParts,
// calls the planner's failed() when anything fails, and after a full sync
// ensures the jump rules from the built-in chains (IPTABLES_JUMP_CHAINS,
// jumpRuleArgs; entries with onlyIfChainRendered only when r.filterChains
// holds the target).
//
// Fake (fake.ts): the kernel's iptables tables in memory. restore(text,
// {noflush}) applies each table all-or-nothing at its COMMIT (as iptables-nft
// does) or throws ProxyError KPT_EXEC_FAILED; save(table?) prints
// iptables-save text; load(text) reads it back; ensureRule() mirrors
// upstream's EnsureRule.
//
// trace (trace.ts): follows a new connection's first packet through a Fake
// from the built-in chains and reports the endpoints, REJECT/DROP/ACCEPT,
// masquerade and every rule matched (TraceResult). Its chain walker and rule
// matcher (walk.ts, IptablesWalk) also walks IPVS mode's iptables rules.
//
// Also here: chain names (names.ts), the per-service rules (servicerules.ts),
// the jump rules and the iptables-save chain reader (jumps.ts), the check that another
// actor removed our nat rules (drift.ts), and the rule diff that
// `kube-proxy-ts diff` prints (diff.ts, canon.ts).

export type { IptablesOptions, IptablesRenderInput, IptablesRender, SkippedServicePort } from './renderer.js';
export { DEFAULT_IPTABLES_OPTIONS } from './renderer.js';
export { IptablesDriver, IptablesDraft, IPTABLES_OBJECTS } from './driver.js';
export type { ChainGeneration, ChainObject, ChainOp, IptablesKind, LiveChain } from './driver.js';
export type { JumpChain, SharedRules } from './jumps.js';
export { natDrift, savedTable, SavedTableReader, type SavedTable } from './drift.js';
export {
  IPTABLES_JUMP_CHAINS,
  IPTABLES_TOP_LEVEL_CHAINS,
  KUBE_PROXY_CANARY,
  jumpRuleArgs,
  chainsFromSave,
  sharedJump,
} from './jumps.js';
export {
  servicePortChainHash,
  serviceChainName,
  localChainName,
  externalChainName,
  firewallChainName,
  endpointChainName,
  isServiceChainName,
} from './names.js';
export { Fake } from './fake.js';
export type { IptablesTable } from './fake.js';
export { trace } from './trace.js';
export type { RuleSource, TraceCandidate, TraceResult, TraceStep } from './trace.js';
