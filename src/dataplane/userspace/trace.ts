// trace: the userspace mode's packet tracer, over a Fake (the redirect table
// and the listener table). The table is walked by the nftables tracer
// (../nftables/trace.ts) along the kernel's hook path, with this table's
// chains at each step:
//   remote source: nat prerouting (portals-container, then nodeports-container
//     for local destinations), then filter input (local destination, which
//     a redirect makes it) or filter forward;
//   node-local source: filter output (priority -110, before nat), nat output
//     (portals-host, nodeports-host), then filter input for local
//     destinations.
// What is left here is the relay: a packet redirected to a listener's port
// is relayed by that listener, so the result lists every endpoint its relay
// may choose (round-robin, so each with the same chance) instead of the
// node's port, and masq is true, because the relay opens a new connection
// from the node, so no endpoint ever sees the client's address. Refusals
// come from the no-endpoint vmaps: drop, or goto reject-chain.
// Strict and lenient modes: see TraceOptions in ../trace.ts. Pure.

import { traceResult, type TraceOptions, type TracePacket } from '../trace.js';
import {
  trace as traceTable,
  type HookChains,
  type RuleSource as TableSource,
  type TraceCandidate,
  type TraceResult,
  type TraceStep,
} from '../nftables/trace.js';
import type { FakeListener } from './fake.js';
import { CHAINS } from './rules.js';

export type { TraceOptions, TracePacket, TraceVerdict } from '../trace.js';
/** A matched rule; chain is a chain of the table, or "listener <key>" for the relay. */
export type { TraceStep };
/** A candidate endpoint; chain is "listener <key>", the listener whose relay picks it. */
export type { TraceCandidate };
export type { TraceResult };

/** What the tracer reads: the Fake satisfies it. */
export interface RuleSource {
  /** The redirect table. */
  readonly nft: TableSource;
  listenerOn(protocol: string, port: number): FakeListener | undefined;
}

/** Where the table's chains sit on the hook path (rules.ts: their hooks and priorities). */
export const USERSPACE_HOOKS: HookChains = {
  preDnat: [CHAINS.filterOutput, null],
  dnat: [CHAINS.portalsHost, CHAINS.portalsContainer],
  output: null,
  input: CHAINS.filterInput,
  forward: CHAINS.filterForward,
  postrouting: null,
};

const VERDICTS: ReadonlySet<string> = new Set(['DROP', 'REJECT', 'ACCEPT']);

/**
 * Trace one new connection's first packet. `localIPs` are the node's
 * addresses (loopback is always local).
 */
export function trace(
  src: RuleSource,
  packet: TracePacket,
  localIPs: readonly string[],
  opts: TraceOptions = {},
): TraceResult {
  const table = traceTable(src.nft, packet, localIPs, { ...opts, hooks: USERSPACE_HOOKS });
  // The table's only DNAT is a redirect to a listener's port on the node: not an endpoint.
  const walk = {
    outputs: table.output.split(', ').filter((o) => VERDICTS.has(o)),
    masq: false,
    matched: [...table.matched],
    steps: [...table.steps],
    candidates: [] as TraceCandidate[],
    notUnderstood: table.notUnderstood,
  };
  const redirect = table.candidates[0];
  if (table.verdict !== 'DNAT' || redirect === undefined) return traceResult(walk);
  const protocol = packet.protocol ?? 'TCP';
  const port = Number(/:(\d+)$/.exec(redirect.endpoint)![1]);
  const l = src.listenerOn(protocol, port);
  if (!l) {
    // Nothing listens there: the kernel answers with a TCP reset or an ICMP port unreachable.
    walk.matched.push(`no listener: ${protocol.toLowerCase()} port ${port}`);
    walk.outputs.push('REJECT');
    return traceResult(walk);
  }
  const chain = `listener ${l.key}`;
  const rule = `${l.protocol.toLowerCase()} port ${l.port}`;
  walk.matched.push(`${chain}: ${rule}`);
  walk.steps.push({ chain, rule, comment: null, depth: 0, probability: 1 });
  const p = l.endpoints.length > 0 ? 1 / l.endpoints.length : 0;
  for (const endpoint of l.endpoints) {
    walk.candidates.push({ endpoint, probability: p, chain });
    walk.outputs.push(endpoint);
  }
  walk.masq = l.endpoints.length > 0;
  return traceResult(walk);
}
