// Node intake: untrusted Node JSON -> NodeInfo (labels for topology, primary
// IPs per family, podCIDRs). Upstream picks node IPs like
// utilnode.GetNodeHostIPs: InternalIP addresses first, then ExternalIP, the
// first of each family.

import type { Node } from './api.js';
import { parseCIDR, parseIP } from './ip.js';
import type { SkipReporter } from './serviceport.js';
import { noSkipReporter } from './serviceport.js';
import type { IPFamily, NodeInfo } from './types.js';

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** Only string-valued labels survive. */
export function stringLabels(x: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!isRecord(x)) return out;
  for (const [k, v] of Object.entries(x)) if (typeof v === 'string') out[k] = v;
  return out;
}

function nodeIPs(node: Node, report: (r: string) => void): Partial<Record<IPFamily, string>> {
  const out: Partial<Record<IPFamily, string>> = {};
  const addrs = isRecord(node.status) && Array.isArray(node.status.addresses) ? node.status.addresses : [];
  for (const type of ['InternalIP', 'ExternalIP']) {
    for (const a of addrs) {
      if (!isRecord(a) || a['type'] !== type) continue;
      const ip = parseIP(a['address']);
      if (!ip) {
        report(`invalid node address ${JSON.stringify(a['address'])}`);
        continue;
      }
      if (out[ip.family] === undefined) out[ip.family] = ip.text;
    }
  }
  return out;
}

function podCIDRs(node: Node, report: (r: string) => void): string[] {
  const spec = isRecord(node.spec) ? node.spec : {};
  const raw =
    Array.isArray(spec.podCIDRs) && spec.podCIDRs.length > 0 ? spec.podCIDRs : spec.podCIDR ? [spec.podCIDR] : [];
  const out: string[] = [];
  for (const c of raw) {
    const p = parseCIDR(c);
    if (!p) report(`invalid podCIDR ${JSON.stringify(c)}`);
    else if (!out.includes(p.text)) out.push(p.text);
  }
  return out;
}

/**
 * NodeInfo from a Node object. `nodeIPOverride` (e.g. a bind address) wins for
 * its family. Never throws; a missing/garbled Node yields empty fields.
 */
export function nodeInfoFromNode(
  nodeName: string,
  node: Node | null,
  nodeIPOverride: Partial<Record<IPFamily, string>> = {},
  onSkip: SkipReporter = noSkipReporter,
): NodeInfo {
  const report = (r: string) => onSkip(nodeName, r);
  const md = node && isRecord(node.metadata) ? node.metadata : {};
  const ips = node ? nodeIPs(node, report) : {};
  return {
    name: nodeName,
    labels: stringLabels(md.labels),
    nodeIPs: { ...ips, ...nodeIPOverride },
    podCIDRs: node ? podCIDRs(node, report) : [],
  };
}
