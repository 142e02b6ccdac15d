// Start-up node discovery: the proxy needs its Node's addresses (and pod
// CIDRs for --detect-local-mode NodeCIDR) before it can build its datapaths,
// as upstream's NodeManager waits for them. The Node is retried for a while;
// without it the proxy still starts (loopback fallback, logged).
import type { KubeConfig } from '@kubernetes/client-node';
import type { Node } from '../core/api.js';
import { KubeTransport } from '../platform/k8s/index.js';
import type { Logger } from '../platform/logger.js';

export async function fetchNode(kc: KubeConfig, nodeName: string, log: Logger, signal: AbortSignal, waitMs = 30_000): Promise<Node | null> {
  const transport = new KubeTransport(kc);
  const deadline = Date.now() + waitMs;
  let delay = 250;
  for (;;) {
    try {
      const r = await transport.list('/api/v1/nodes', { fieldSelector: `metadata.name=${nodeName}` }, signal);
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
