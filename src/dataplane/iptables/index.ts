// The iptables mode, pure side (the platform side is src/platform/iptables).
// Same shape as every mode (docs/architecture.md): a renderer class, a Fake
// of the kernel interface and a trace over the Fake.
//
// IptablesRenderer (renderer.ts) turns a SyncState into one
// `iptables-restore --noflush --counters` payload, `*filter … COMMIT\n*nat …
// COMMIT\n`, in upstream's order (pkg/proxy/iptables/proxier.go
// syncProxyRules). One renderer per dataplane; its memory is a memo of
// rendered service ports that only saves work. render(input):
//   - input.previous is the `memory` of the last render whose restore
//     succeeded, or null to force a full sync (first sync, after a failure);
//   - the filter section is always complete; the nat section always rewrites
//     KUBE-SERVICES, KUBE-NODEPORTS, KUBE-POSTROUTING and KUBE-MARK-MASQ, and
//     writes the SVC/SVL/EXT/FW/SEP chains only of state.changedServices on a
//     partial sync (r.partial);
//   - stale service chains (in input.existingNatChains, which is the chain
//     list of `iptables-save -t nat` or null to skip that check, or in
//     previous.natChainsActive) are declared and deleted with `-X`;
//   - never throws on bad data: an unrenderable service port is listed in
//     r.skipped. Counts for the metrics: filterRules, natRules,
//     natRulesTotal, noLocalEndpoints.
// The caller (src/platform/iptables/dataplane.ts) applies r.restoreText,
// keeps r.memory only on success, and after a full sync ensures the jump
// rules from the built-in chains (IPTABLES_JUMP_CHAINS, jumpRuleArgs;
// entries with onlyIfChainRendered only when r.filterChains holds the
// target).
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
// the jump rules and stale-chain helpers (jumps.ts), the check that another
// actor removed our nat rules (drift.ts), and the rule diff that
// `kube-proxy-ts diff` prints (diff.ts, canon.ts).

export type {
  IptablesOptions,
  IptablesRenderInput,
  IptablesRender,
  IptablesMemory,
  SkippedServicePort,
} from './renderer.js';
export { IptablesRenderer, DEFAULT_IPTABLES_OPTIONS } from './renderer.js';
export type { JumpChain } from './jumps.js';
export { natDrift, savedTable, SavedTableReader, type SavedTable } from './drift.js';
export {
  IPTABLES_JUMP_CHAINS,
  IPTABLES_TOP_LEVEL_CHAINS,
  KUBE_PROXY_CANARY,
  jumpRuleArgs,
  chainsFromSave,
  staleChains,
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
