// How the iptables mode notices, within a second, that another actor changed
// its rules (`iptables -t nat -F KUBE-SERVICES`, `-X` of a service chain, the
// jump from PREROUTING deleted, a firewall reload), instead of at the next
// periodic sync. On the nf_tables backend (iptables-nft, the default of every
// current distribution) iptables tables are nf_tables tables named nat,
// filter and mangle in families ip and ip6, so the nftables mode's monitor
// (../nftables/monitor.ts) sees every change to them as an event, naming the
// chain and, for a rule, its expressions. Which of those are ours:
//   - anything in a chain named KUBE-* (our chains and the canary), except
//     the kubelet's own (KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT), which it
//     writes when it starts or finds its canary gone;
//   - a deleted rule, in any chain, that jumps to a KUBE-* chain (the jumps
//     from the built-in chains);
//   - a deleted nat, filter or mangle table.
// Rules others add to or delete from the built-in chains for their own chains
// (Docker, a CNI) are not: they cost nothing. Our own restores are kept apart
// by leaving the group while they run (NftMonitor.ownChange) with, as the
// bound of commits they may make, one per table section of the input.
//
// On the legacy backend there are no such events: drift is found by the
// sync's canary and natDrift checks, at the next periodic sync.
import type { Drift, IPFamily } from '../../core/types.js';
import { NftMonitor, type NftChange } from '../nftables/monitor.js';

const IPTABLES_TABLES: ReadonlySet<string> = new Set(['nat', 'filter', 'mangle']);
const OURS = 'KUBE-';
const KUBELETS: ReadonlySet<string> = new Set(['KUBE-KUBELET-CANARY', 'KUBE-IPTABLES-HINT']);
const ours = (chain: string) => chain.startsWith(OURS) && !KUBELETS.has(chain);

/**
 * The chains only the other of the two modes that share the KUBE-* names writes: when a
 * handover removes that mode's leftovers (src/cmd/handover.ts), the running mode's watch
 * must not take those deletions for changes to its own rules.
 */
export type OtherModesChain = (table: string, chain: string) => boolean;

/** Chains only iptables mode writes (an IPVS mode's watch ignores them). */
export const iptablesModeOnly: OtherModesChain = (table, chain) =>
  /^KUBE-(SVC|SEP|EXT|FW|SVL)-/.test(chain) ||
  chain === 'KUBE-NODEPORTS' ||
  chain === 'KUBE-EXTERNAL-SERVICES' ||
  (table === 'filter' && chain === 'KUBE-SERVICES');

/** Chains only IPVS mode writes (an iptables mode's watch ignores them). */
export const ipvsModeOnly: OtherModesChain = (_table, chain) =>
  chain === 'KUBE-NODE-PORT' ||
  chain === 'KUBE-LOAD-BALANCER' ||
  chain === 'KUBE-SOURCE-RANGES-FIREWALL' ||
  chain.startsWith('KUBE-IPVS-');

/** The monitor's filter for the iptables mode (see above), leaving out the other mode's chains. */
export function iptablesChangeIsOurs(c: NftChange, others: OtherModesChain = () => false): boolean {
  if (!IPTABLES_TABLES.has(c.table)) return false;
  const mine = (chain: string) => ours(chain) && !others(c.table, chain);
  if (c.tableDeleted || mine(c.name)) return true;
  return c.what === 'delete rule' && c.jumpTargets().some(mine);
}

/**
 * Table sections (`*nat` ... `COMMIT`) in iptables-restore input given as
 * pieces: iptables-nft commits once per section that changes something, so
 * this bounds the nf_tables commits one restore makes. Pieces may be
 * megabytes; only the starts of lines are looked at.
 */
export function restoreSections(parts: readonly string[]): number {
  let n = 0;
  let atLineStart = true;
  for (const p of parts) {
    if (p.length === 0) continue;
    if (atLineStart && p.startsWith('*')) n++;
    for (let i = p.indexOf('\n*'); i >= 0; i = p.indexOf('\n*', i + 2)) n++;
    atLineStart = p.endsWith('\n');
  }
  return n;
}

/** What IptablesDataplane needs of a drift watch (IptablesDriftWatch; tests give their own). */
export interface DriftWatch {
  open(
    o: {
      family: IPFamily;
      nftBackend: boolean;
      netns?: string;
      onEvent?: (level: 'info', fields: Record<string, unknown>, msg: string) => void;
    },
    onDrift: (drift: Drift) => void,
  ): Promise<void>;
  ownChange<T>(fn: () => Promise<T>, commits: number): Promise<T>;
  /** True while changes by others are reported (opened, on the nf_tables backend, not stopped). */
  watching(): boolean;
  stop(): void;
}

/**
 * The watch itself, for the iptables mode and the ipvs mode's chains: opened
 * once, at the first sync after watchDrift(); our own restores go through
 * ownChange(); stop() ends it for good (cleanup, close).
 */
export class IptablesDriftWatch implements DriftWatch {
  /** others: the chains of the mode that shares our names, which are not ours. */
  constructor(private readonly others: OtherModesChain = () => false) {}

  /** null: stopped, or no events on this backend; undefined: not opened yet. */
  private monitor: NftMonitor | null | undefined = undefined;
  private unsubscribe: (() => void) | null = null;

  async open(
    o: {
      family: IPFamily;
      nftBackend: boolean;
      netns?: string;
      onEvent?: (level: 'info', fields: Record<string, unknown>, msg: string) => void;
    },
    onDrift: (drift: Drift) => void,
  ): Promise<void> {
    if (this.monitor !== undefined) return;
    this.monitor = o.nftBackend ? await NftMonitor.open(o.netns) : null;
    if (!this.monitor) {
      o.onEvent?.(
        'info',
        { family: o.family, nftBackend: o.nftBackend },
        'no nf_tables events here; iptables rules changed by others are repaired at the next periodic sync',
      );
      return;
    }
    this.unsubscribe = this.monitor.subscribe(
      o.family === 'IPv4' ? 'ip' : 'ip6',
      (c) => iptablesChangeIsOurs(c, this.others),
      onDrift,
    );
  }

  /** Our own restore, kept out of the watch; at most `commits` nf_tables commits. */
  ownChange<T>(fn: () => Promise<T>, commits: number): Promise<T> {
    return this.monitor ? this.monitor.ownChange(fn, commits) : fn();
  }

  watching(): boolean {
    return this.monitor !== null && this.monitor !== undefined;
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.monitor = null;
  }
}
