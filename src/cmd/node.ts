// Start-up node discovery: the proxy needs its Node's addresses (and pod
// CIDRs for --detect-local-mode NodeCIDR) before it can build its datapaths,
// as upstream's NodeManager waits for them. The Node is retried for a while;
// without it the proxy still starts (loopback fallback, logged).
import type { Node } from '../core/api.js';
import { detectNodeIPs } from '../core/config/nodeips.js';
import { parseIP } from '../core/ip.js';
import { nodeInfoFromNode } from '../core/nodeinfo.js';
import type { IPFamily } from '../core/types.js';
import type { KubeClient } from '../platform/k8s/index.js';
import type { Logger } from '../platform/logger.js';

export async function fetchNode(
  client: KubeClient,
  nodeName: string,
  log: Logger,
  signal: AbortSignal,
  waitMs = 30_000,
): Promise<Node | null> {
  const deadline = Date.now() + waitMs;
  let delay = 250;
  for (;;) {
    try {
      const r = await client.list('/api/v1/nodes', { fieldSelector: `metadata.name=${nodeName}` }, signal);
      const node = r.items[0] as Node | undefined;
      if (node) return node;
      log.warn({ nodeName }, 'Node object not found yet');
    } catch (e) {
      if (signal.aborted) return null;
      log.warn({ nodeName, err: (e as Error).message }, 'Cannot get this node from the API server yet');
    }
    if (Date.now() + delay > deadline || signal.aborted) return null;
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 5000);
  }
}

/** What the proxy (and `diff`) derive from the Node at start-up. */
export interface StartupNode {
  /** Upstream detectNodeIPs: bindAddress wins; a family without an address gets loopback. */
  readonly nodeIPs: Readonly<Record<IPFamily, string>>;
  readonly primaryFamily: IPFamily;
  readonly primaryIsLoopback: boolean;
  /** Only the addresses the Node object reported (no fallbacks), for change detection. */
  readonly reported: Readonly<Partial<Record<IPFamily, string>>>;
  /** The bindAddress as a per-family override, when one was specified. */
  readonly override?: Readonly<Partial<Record<IPFamily, string>>>;
  readonly podCIDRs: readonly string[];
}

export function startupNode(nodeName: string, node: Node | null, bindAddress: string): StartupNode {
  const info = nodeInfoFromNode(nodeName, node);
  // nodeInfoFromNode keeps the Node's order (InternalIP, then ExternalIP), so the primary family is first.
  const detected = detectNodeIPs(Object.values(info.nodeIPs), bindAddress);
  const bind = parseIP(bindAddress);
  const specified = bind !== null && !bind.bytes.every((b) => b === 0);
  return {
    ...detected,
    reported: info.nodeIPs,
    ...(specified ? { override: { [bind.family]: bind.text } } : {}),
    podCIDRs: info.podCIDRs,
  };
}
