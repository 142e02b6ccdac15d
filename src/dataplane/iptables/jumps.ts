// The jump rules from built-in chains into kube-proxy's chains (upstream
// iptablesJumpChains in pkg/proxy/iptables/proxier.go, plus the KUBE-FIREWALL
// jumps). The platform inserts them at position 1 with `iptables -t <table> -I <from> 1 <args>` (after
// checking with -C) on full syncs only, after the restore that creates the
// target chains. Also the helper to read iptables-save's chain list.
//
// The `--comment` texts are upstream's, byte for byte: iptables-save shows
// them, and operators, their tools and `kube-proxy-ts explain` match on
// them. Keep them identical; they are facts of compatibility, not our prose.

export type IptablesTableName = 'filter' | 'nat' | 'mangle';

export interface JumpChain {
  readonly table: IptablesTableName;
  /** Built-in chain that holds the jump rule. */
  readonly from: string;
  /** kube-proxy chain jumped to. */
  readonly to: string;
  readonly comment: string | null;
  /** Matches placed before the comment (e.g. conntrack NEW). */
  readonly extraArgs: readonly string[];
  /**
   * Only when the target chain is rendered: KUBE-FIREWALL exists only for IPv4
   * with localhost NodePorts (kubelet keeps its own copy; cleanup leaves it).
   * Deviation, on purpose: upstream (iptablesKubeletJumpChains) EnsureChain's
   * KUBE-FIREWALL and its two jumps on every full sync, even when it writes no
   * rule into it (IPv6, localhost NodePorts off), leaving an empty chain; we
   * do not create that empty chain.
   */
  readonly onlyIfChainRendered: boolean;
}

const NEW = ['-m', 'conntrack', '--ctstate', 'NEW'] as const;

function j(
  table: IptablesTableName,
  from: string,
  to: string,
  comment: string | null,
  extraArgs: readonly string[] = [],
  onlyIfChainRendered = false,
): JumpChain {
  return { table, from, to, comment, extraArgs, onlyIfChainRendered };
}

/** In upstream order; each entry is one rule. */
export const IPTABLES_JUMP_CHAINS: readonly JumpChain[] = [
  j('filter', 'INPUT', 'KUBE-EXTERNAL-SERVICES', 'kubernetes externally-visible service portals', NEW),
  j('filter', 'FORWARD', 'KUBE-EXTERNAL-SERVICES', 'kubernetes externally-visible service portals', NEW),
  j('filter', 'INPUT', 'KUBE-NODEPORTS', 'kubernetes health check service ports'),
  j('filter', 'FORWARD', 'KUBE-SERVICES', 'kubernetes service portals', NEW),
  j('filter', 'OUTPUT', 'KUBE-SERVICES', 'kubernetes service portals', NEW),
  j('filter', 'FORWARD', 'KUBE-FORWARD', 'kubernetes forwarding rules'),
  j('filter', 'INPUT', 'KUBE-PROXY-FIREWALL', 'kubernetes load balancer firewall', NEW),
  j('filter', 'OUTPUT', 'KUBE-PROXY-FIREWALL', 'kubernetes load balancer firewall', NEW),
  j('filter', 'FORWARD', 'KUBE-PROXY-FIREWALL', 'kubernetes load balancer firewall', NEW),
  j('nat', 'OUTPUT', 'KUBE-SERVICES', 'kubernetes service portals'),
  j('nat', 'PREROUTING', 'KUBE-SERVICES', 'kubernetes service portals'),
  j('nat', 'POSTROUTING', 'KUBE-POSTROUTING', 'kubernetes postrouting rules'),
  j('filter', 'INPUT', 'KUBE-FIREWALL', null, [], true),
  j('filter', 'OUTPUT', 'KUBE-FIREWALL', null, [], true),
];

/** Rule args after `-I <from> 1` (or `-C <from>`), quoted comment not shell-escaped: an argv. */
export function jumpRuleArgs(jc: JumpChain): string[] {
  const args = [...jc.extraArgs];
  if (jc.comment !== null) args.push('-m', 'comment', '--comment', jc.comment);
  args.push('-j', jc.to);
  return args;
}

/**
 * Chain names declared in one table of iptables-save output (upstream
 * GetChainsFromTable): the `:NAME POLICY [p:b]` lines between `*table` and COMMIT.
 */
export function chainsFromSave(saveText: string, table: IptablesTableName): string[] {
  const out: string[] = [];
  let inTable = false;
  for (const raw of saveText.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('*')) inTable = line.slice(1) === table;
    else if (line === 'COMMIT') inTable = false;
    else if (inTable && line.startsWith(':')) {
      const name = line.slice(1).split(/\s+/, 1)[0];
      if (name) out.push(name);
    }
  }
  return out;
}

/** Upstream kubeProxyCanaryChain: created in mangle, nat and filter by the monitor. */
export const KUBE_PROXY_CANARY = 'KUBE-PROXY-CANARY';

/**
 * The top-level chains kube-proxy owns per table (for cleanup: upstream
 * CleanupLeftovers deletes the jump rules, then flushes and deletes these plus
 * every service chain found by isServiceChainName). KUBE-FIREWALL is left alone
 * because kubelet owns an identical copy.
 */
export const IPTABLES_TOP_LEVEL_CHAINS: Readonly<Record<'filter' | 'nat', readonly string[]>> = {
  filter: ['KUBE-SERVICES', 'KUBE-EXTERNAL-SERVICES', 'KUBE-FORWARD', 'KUBE-NODEPORTS', 'KUBE-PROXY-FIREWALL'],
  nat: ['KUBE-SERVICES', 'KUBE-NODEPORTS', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ'],
};

/**
 * What another mode that shares these tables keeps using: iptables and IPVS
 * modes both write nat KUBE-SERVICES, KUBE-POSTROUTING and KUBE-MARK-MASQ,
 * filter KUBE-FORWARD and KUBE-PROXY-FIREWALL, and some of the same jump
 * rules. Removing one mode's leftovers after the other has taken over
 * (src/cmd/handover.ts) must leave these alone: they are the running mode's.
 */
export interface SharedRules {
  readonly nat: readonly string[];
  readonly filter: readonly string[];
  readonly jumps: readonly JumpChain[];
}

/** Whether `jc` is one of `shared`'s jump rules: the same table, built-in chain and rule spec. */
export function sharedJump(jc: JumpChain, shared: SharedRules | undefined): boolean {
  const spec = jumpRuleArgs(jc).join(' ');
  return (
    shared?.jumps.some((s) => s.table === jc.table && s.from === jc.from && jumpRuleArgs(s).join(' ') === spec) ?? false
  );
}
