// iptables datapath, pure side. API for the platform helper (src/platform/iptables/).
//
// A sync, as upstream syncProxyRules does it:
//   1. existing = chainsFromSave(<iptables-save -t nat>, 'nat'), or null to skip that
//      cleanup (upstream skips it while the last render was largeClusterMode and the
//      last cleanup is younger than syncPeriod; chains of services deleted since
//      the last render are still removed, from previous.natChainsActive)
//   2. r = renderIptables({ state, config, options, previous: memory, existingNatChains: existing })
//      (log/count r.skipped; metrics from r.filterRules / r.natRules / r.natRulesTotal /
//       r.noLocalEndpoints; r.partial tells a partial sync)
//   3. exec `iptables-restore --noflush --counters` (ip6tables-restore for IPv6) with r.restoreText
//   4. on success: memory = r.memory; if !r.partial ensure the jump rules (below).
//      on failure: memory = null (the next render is full).
//
// renderIptables(input: IptablesRenderInput): IptablesRender
//   Pure and deterministic (services in key order). Produces the exact restore
//   payload `*filter … COMMIT\n*nat … COMMIT\n` in upstream order:
//   - the filter section is always complete;
//   - the nat section always rewrites KUBE-SERVICES, KUBE-NODEPORTS,
//     KUBE-POSTROUTING, KUBE-MARK-MASQ; SVC/SVL/EXT/FW/SEP chains are written
//     only for services in state.changedServices (a partial sync), unless
//     state.fullSync or previous === null (or of another family);
//   - stale service chains (in existingNatChains or previous.natChainsActive but
//     no longer active) are declared and deleted with `-X`, listed in deletedChains.
//   Options: randomFully, nfacct counters present, beLiberal, largeClusterThreshold
//   (DEFAULT_IPTABLES_OPTIONS = upstream defaults with everything supported).
//   Never throws on bad data: an unrenderable service port is skipped and listed.
//
// Jump rules (reference 4.1 table): IPTABLES_JUMP_CHAINS: readonly JumpChain[]
//   {table, from, to, comment, extraArgs, onlyIfChainRendered}; argv via
//   jumpRuleArgs(j) for `iptables -t <table> -C|-I <from> [1] ...args`. Install only
//   after the restore that creates the targets; skip entries with
//   onlyIfChainRendered unless r.filterChains includes j.to (KUBE-FIREWALL).
// IPTABLES_TOP_LEVEL_CHAINS, KUBE_PROXY_CANARY: for the canary and cleanup.
// chainsFromSave(saveText, table): string[] — chain names of one table of iptables-save output.
// staleChains(existing, active): string[] — our service chains not active, sorted.
// Names: servicePortChainHash, serviceChainName, localChainName, externalChainName,
//   firewallChainName, endpointChainName, isServiceChainName.
//
// FakeIptables (fake.ts): in-memory kernel state for tests. restore(text,
//   {noflush}) applies each table all-or-nothing at its COMMIT (like
//   iptables-nft: an error in nat leaves an already committed filter) or throws
//   ProxyError KPT_EXEC_FAILED;
//   save(table?) prints iptables-save text; ensureRule(pos, table, chain, argv)
//   mirrors upstream EnsureRule; rules(table, chain), hasChain, chains, restores[].
// The packet tracer over a FakeIptables is test/tracer/iptables.ts.

export type {
  IptablesOptions,
  IptablesRenderInput,
  IptablesRender,
  IptablesMemory,
  SkippedServicePort,
} from './render.js';
export { renderIptables, DEFAULT_IPTABLES_OPTIONS } from './render.js';
export type { JumpChain } from './jumps.js';
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
export { FakeIptables } from './fake.js';
export type { IptablesTable } from './fake.js';
