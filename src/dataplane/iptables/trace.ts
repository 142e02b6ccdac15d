// trace: the iptables mode's packet tracer, over a Fake (or an iptables-save
// dump loaded into one). It follows the idea of upstream's iptablesTracer
// (pkg/proxy/iptables/proxier_test.go) but starts from the built-in chains,
// so our jump rules are exercised as well:
//   nat PREROUTING (remote source) or nat OUTPUT (node-local source, like
//   upstream's --src-type LOCAL), then the DNAT rewrites the destination, then
//   filter OUTPUT (local source) and/or INPUT (local destination) or FORWARD.
// The chains are walked by IptablesWalk (walk.ts, which says how rules
// match): as upstream, `-m mark` never matches, probability rules fall
// through so every endpoint is collected ("ep1, ep2"), and KUBE-MARK-MASQ
// sets masq. Conntrack state is NEW, plus DNAT once nat rewrote the
// destination.
//
// Each matched rule becomes a TraceStep carrying the probability of reaching
// it (the product of the `--probability` choices on the way), so `explain`
// can show each candidate endpoint's chance. Strict and lenient modes: see
// TraceOptions in ../trace.ts.
//
// Pure: no I/O; the rule source is anything with rules(table, chain).

import type { TraceFunction, TraceResultOf } from '../trace.js';
import { IptablesWalk, type ChainSource, type DnatCandidate, type RuleStep } from './walk.js';

/** One rule the packet matched, in the order it was matched. */
export type TraceStep = RuleStep;
/** A DNAT destination the packet may get, with its chance. */
export type TraceCandidate = DnatCandidate;

export type { TraceOptions, TracePacket, TraceVerdict } from '../trace.js';
export type TraceResult = TraceResultOf<TraceStep, TraceCandidate>;

export type RuleSource = ChainSource;

/**
 * Trace one new connection's first packet. `localIPs` are the node's
 * addresses (loopback is always local).
 */
export const trace: TraceFunction<RuleSource, TraceResult> = (src, packet, localIPs, opts = {}) => {
  const tr = new IptablesWalk<TraceStep>(src, localIPs, opts, { marks: 'never', step: (s) => s });
  const { pkt, srcLocal } = tr.start(packet);
  tr.run('nat', srcLocal ? 'OUTPUT' : 'PREROUTING', pkt);
  const first = tr.candidates[0];
  if (first) tr.rewriteDestination(pkt, first.endpoint);
  const dstLocal = tr.isLocal(pkt.dst);
  const hooks = srcLocal ? ['OUTPUT', ...(dstLocal ? ['INPUT'] : [])] : [dstLocal ? 'INPUT' : 'FORWARD'];
  for (const hook of hooks) {
    const before = tr.outputs.length;
    tr.run('filter', hook, pkt);
    const last = tr.outputs[tr.outputs.length - 1];
    if (tr.outputs.length > before && (last === 'DROP' || last === 'REJECT')) break;
  }
  return tr.result();
};
