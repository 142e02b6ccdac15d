// When a change of this proxy's own Node means the process must restart, as
// upstream's NodeManager (pkg/proxy/node.go) decides it: the node's host IPs
// changed, or, when the local-traffic detector is built from the node's
// podCIDRs (--detect-local-mode NodeCIDR), the podCIDRs changed. Much is
// derived from these once at start (each family's DataplaneConfig: the
// nodePortAddresses "primary" expansion, the NodeCIDR detector, the node IP
// override) and is only derived again by a fresh start.
//
// Until the restart, the Proxier re-renders everything with the new values
// on its next sync (proxier.ts nodeChange), so the rules follow the node at
// once; this watch then ends the process, and its supervisor starts it again.
//
// The IPs compared are the ones the Node object reports, never the
// --bind-address override: an override that differs from the Node's address
// is a setting, not a change.

import type { IPFamily } from '../core/types.js';
import type { Clock, TimerHandle } from '../core/clock.js';

/** What the decision reads of the Node: its reported host IPs and podCIDRs. */
export interface NodeAddresses {
  readonly nodeIPs: Readonly<Partial<Record<IPFamily, string>>>;
  readonly podCIDRs: readonly string[];
}

/**
 * Why the proxy must restart, or null. A family's IP counts as changed when
 * the Node reported one at start and reports a different one now; an address
 * that appears or (briefly) disappears is not a change, as an unreadable
 * address is not for upstream either.
 */
export function nodeRestartReason(start: NodeAddresses, now: NodeAddresses, watchPodCIDRs: boolean): string | null {
  for (const fam of ['IPv4', 'IPv6'] as const) {
    const was = start.nodeIPs[fam];
    const is = now.nodeIPs[fam];
    if (was !== undefined && is !== undefined && was !== is)
      return `the node's ${fam} address changed from ${was} to ${is}`;
  }
  if (watchPodCIDRs && start.podCIDRs.join(',') !== now.podCIDRs.join(','))
    return `the node's podCIDRs changed from ${start.podCIDRs.join(',')} to ${now.podCIDRs.join(',')}`;
  return null;
}

/** What the watch polls: the Proxier satisfies it. */
export interface NodeView {
  /** Services and EndpointSlices listed: before that the Node may not have been seen yet. */
  isInitialized(): boolean;
  /** The Node's own reported addresses, or null until the Node was seen. */
  reportedNode(): NodeAddresses | null;
}

export const NODE_WATCH_INTERVAL_MS = 5000;

/**
 * Polls `view` every intervalMs and calls onRestart once, with the reason,
 * when nodeRestartReason says so; then stops. cancel() stops it earlier.
 */
export class NodeChangeWatch {
  private timer: TimerHandle | null = null;

  constructor(
    private readonly view: NodeView,
    private readonly start: NodeAddresses,
    private readonly watchPodCIDRs: boolean,
    private readonly clock: Clock,
    private readonly onRestart: (reason: string) => void,
    private readonly intervalMs = NODE_WATCH_INTERVAL_MS,
  ) {
    this.arm();
  }

  cancel(): void {
    this.timer?.cancel();
    this.timer = null;
  }

  private arm(): void {
    this.timer = this.clock.setTimer(this.intervalMs, () => this.check());
  }

  private check(): void {
    this.timer = null;
    const now = this.view.isInitialized() ? this.view.reportedNode() : null;
    const why = now === null ? null : nodeRestartReason(this.start, now, this.watchPodCIDRs);
    if (why !== null) this.onRestart(why);
    else this.arm();
  }
}
