// The node's primary IPs per family (upstream server.go detectNodeIPs): the
// Node object's addresses (first = primary family, second = the other family),
// overridden by a specified bindAddress; a family with no address gets the
// loopback address, which keyword expansion and detectors treat as "none".

import { isLoopback, parseIP } from '../ip.js';
import type { IPFamily } from '../types.js';

export interface NodeIPs {
  readonly primaryFamily: IPFamily;
  readonly nodeIPs: Readonly<Record<IPFamily, string>>;
  /** True when the primary family fell back to loopback (upstream logs "assuming loopback"). */
  readonly primaryIsLoopback: boolean;
}

/** `rawNodeIPs`: the Node's IPs as upstream's GetNodeHostIPs returns them (at most one per family). */
export function detectNodeIPs(rawNodeIPs: readonly string[], bindAddress: string): NodeIPs {
  let primaryFamily: IPFamily = 'IPv4';
  const nodeIPs: Record<IPFamily, string> = { IPv4: '127.0.0.1', IPv6: '::1' };
  const parsed = rawNodeIPs.map((s) => parseIP(s)).filter((p) => p !== null);
  if (parsed.length > 0) {
    primaryFamily = parsed[0]!.family;
    nodeIPs[primaryFamily] = parsed[0]!.text;
    const second = parsed[1];
    if (second && second.family !== primaryFamily) nodeIPs[second.family] = second.text;
  }
  const bind = parseIP(bindAddress);
  if (bind && !bind.bytes.every((b) => b === 0)) {
    primaryFamily = bind.family;
    nodeIPs[primaryFamily] = bind.text;
  }
  return { primaryFamily, nodeIPs, primaryIsLoopback: isLoopback(nodeIPs[primaryFamily]) };
}
