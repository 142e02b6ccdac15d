// iptables datapath, pure side. API for the platform helper (src/platform/iptables/):
//
//   renderIptables(input: IptablesRenderInput): IptablesRender
//     Pure. Produces the exact `iptables-restore --noflush --counters` payload
//     (`*filter … COMMIT\n*nat … COMMIT\n`) in upstream syncProxyRules order.
//     - The filter section is always complete.
//     - The nat section always rewrites the top-level chains (KUBE-SERVICES,
//       KUBE-NODEPORTS, KUBE-POSTROUTING, KUBE-MARK-MASQ); SVC/SVL/EXT/FW/SEP
//       chains are written only for services in state.changedServices, unless
//       the sync is full (state.fullSync, or input.previous === null).
//     - Stale service chains (in input.existingNatChains but not active) are
//       declared and deleted with `-X`. Pass the chains of `iptables-save -t nat`
//       (parse them with chainsFromSave); pass null to skip the cleanup (upstream
//       does so in large-cluster mode between syncPeriods).
//     Never throws on bad data: a service port that cannot be rendered is
//     skipped and listed in `skipped`.
//     On success of the restore, keep `render.memory` and pass it as
//     `previous` next time; on failure pass null (next sync is full).
//
//   IPTABLES_JUMP_CHAINS: readonly JumpChain[]   (reference table 4.1, "Jump rules")
//     jumpRuleArgs(j): string[]  — args after `-I <from>` / `-C <from>`, i.e.
//     `iptables -t <table> -I <from> 1 ...jumpRuleArgs(j)` (only on full syncs).
//     Install them only after the restore that creates the target chains; the
//     KUBE-FIREWALL jumps apply only when that chain is rendered
//     (render.filterChains includes 'KUBE-FIREWALL').
//
//   chainsFromSave(saveText, table): string[] — chain names in one table of
//     iptables-save output.
//   staleChains(existing, active): string[] — our service chains (KUBE-SVC/SVL/
//     EXT/FW/SEP-*) in `existing` that are not in `active`, sorted.
//
//   Names (names.ts): servicePortChainHash, serviceChainName, localChainName,
//     externalChainName, firewallChainName, endpointChainName, isServiceChainName.
//
//   FakeIptables (fake.ts): in-memory kernel state; restore(text, {noflush})
//     applies all-or-nothing or throws ProxyError KPT_EXEC_FAILED; save(table?)
//     dumps iptables-save text; insertRule/ensureRule for the jump rules.
//
// The tracer (test/tracer/iptables.ts) walks packets through a FakeIptables.

export type { IptablesOptions, IptablesRenderInput, IptablesRender, IptablesMemory, SkippedServicePort } from './render.js';
export { renderIptables, DEFAULT_IPTABLES_OPTIONS } from './render.js';
export type { JumpChain } from './jumps.js';
export { IPTABLES_JUMP_CHAINS, jumpRuleArgs, chainsFromSave, staleChains } from './jumps.js';
export {
  servicePortChainHash,
  serviceChainName,
  localChainName,
  externalChainName,
  firewallChainName,
  endpointChainName,
  isServiceChainName,
} from './names.js';
export { FakeIptables } from './fake.js';
export type { IptablesTable } from './fake.js';
