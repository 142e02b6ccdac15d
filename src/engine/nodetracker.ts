// This proxy's own Node: labels (topology), primary IPs, podCIDRs and
// eligibility for the health server (upstream NodeManager + ProxyHealthServer
// SyncNode). Other Nodes are ignored.

import type { Node } from '../core/api.js';
import { LABEL_TOPOLOGY_ZONE } from '../core/api.js';
import { nodeInfoFromNode } from '../core/nodeinfo.js';
import type { SkipReporter } from '../core/serviceport.js';
import type { IPFamily, NodeInfo } from '../core/types.js';
import { isNodeEligible } from './health.js';
import type { NodeAddresses } from './nodewatch.js';

export interface NodeUpdate {
  /** A topology label (upstream NodeTopologyConfig: the zone) changed. */
  readonly labelsChanged: boolean;
  readonly podCIDRsChanged: boolean;
  readonly ipsChanged: boolean;
}

/** The labels whose change is a topology change (upstream OnTopologyChange). */
export const TOPOLOGY_LABELS: readonly string[] = [LABEL_TOPOLOGY_ZONE];

function sameTopology(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  return TOPOLOGY_LABELS.every((k) => a[k] === b[k]);
}

export class NodeTracker {
  private current: NodeInfo;
  /** The Node's own addresses, without the IP override; null until the Node is seen. */
  private reportedAddresses: NodeAddresses | null = null;
  private isEligible = false;

  constructor(
    readonly nodeName: string,
    private readonly ipOverride: Partial<Record<IPFamily, string>>,
    private readonly onSkip: SkipReporter,
  ) {
    this.current = nodeInfoFromNode(nodeName, null, ipOverride);
  }

  info(): NodeInfo {
    return this.current;
  }

  /** What the Node itself reports (no --bind-address override), for the restart decision (nodewatch.ts). */
  reported(): NodeAddresses | null {
    return this.reportedAddresses;
  }

  /**
   * Eligible while the Node is known, not deleted, has no deletionTimestamp
   * and no cluster-autoscaler ToBeDeleted taint (upstream healthz semantics;
   * the rule itself is health.ts isNodeEligible). False until the Node is seen.
   */
  eligible(): boolean {
    return this.isEligible;
  }

  /** Returns what changed, or null when the object is not this proxy's Node. */
  update(node: Node, deleted: boolean): NodeUpdate | null {
    const name = node && typeof node === 'object' ? node.metadata?.name : undefined;
    if (name !== this.nodeName) return null;
    const prev = this.current;
    this.isEligible = !deleted && isNodeEligible(node);
    if (deleted) {
      // Keep the last known labels/IPs: rules stay as they are while the node goes away.
      return { labelsChanged: false, podCIDRsChanged: false, ipsChanged: false };
    }
    const own = nodeInfoFromNode(this.nodeName, node, {}, this.onSkip);
    this.reportedAddresses = { nodeIPs: own.nodeIPs, podCIDRs: own.podCIDRs };
    const next = { ...own, nodeIPs: { ...own.nodeIPs, ...this.ipOverride } };
    // The same object while nothing in it changed: a sync after a Node update that changed nothing the
    // rules read (a status heartbeat, an annotation) then stays partial in the snapshot as well.
    if (JSON.stringify(next) !== JSON.stringify(prev)) this.current = next;
    return {
      labelsChanged: !sameTopology(prev.labels, this.current.labels),
      podCIDRsChanged: prev.podCIDRs.join(',') !== this.current.podCIDRs.join(','),
      ipsChanged: JSON.stringify(prev.nodeIPs) !== JSON.stringify(this.current.nodeIPs),
    };
  }
}
