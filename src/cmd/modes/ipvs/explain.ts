// IPVS side of `explain`: the live IPVS table, kube-ipvs0, our ipsets and
// the rules, read into the IPVS Fake (live.ts), and the packet walked
// with the IPVS tracer (src/dataplane/ipvs/trace.ts), lenient about rules it
// cannot read. A candidate's probability is its share of the weights: what a
// weighted scheduler gives it over many connections.
import type { Fake } from '../../../dataplane/ipvs/fake.js';
import { trace } from '../../../dataplane/ipvs/trace.js';
import type { TracePacket } from '../../../dataplane/trace.js';
import { summarize, type Explanation } from '../../explainview.js';

/**
 * Walk one packet through IPVS state held in the Fake (read live, or from a
 * saved bundle). "ns/name:port" is not in IPVS's tables and the set entries
 * name no Service either: the virtual server stands for it.
 */
export function explainIpvsFake(fake: Fake, packet: TracePacket, localIPs: readonly string[]): Explanation {
  const r = trace(fake, packet, localIPs, { strict: false });
  const vs = r.candidates[0]?.virtualServer ?? r.steps.find((s) => s.where === 'ipvs')?.rule.split(' ')[0] ?? null;
  // Sorted: the kernel lists real servers in no order a reader relies on (ipvsadm and netlink differ).
  const candidates = r.candidates
    .map((c) => ({ endpoint: c.endpoint, probability: c.probability }))
    .sort((a, b) => a.endpoint.localeCompare(b.endpoint, 'en', { numeric: true }));
  const summary = summarize(vs === null ? null : `virtual server ${vs}`, r.verdict, candidates, r.masq);
  return {
    mode: 'ipvs',
    packet: { src: packet.src, dst: packet.dst, port: packet.port, protocol: packet.protocol ?? 'TCP' },
    service: vs,
    verdict: r.verdict,
    candidates,
    masquerade: r.masq && r.verdict === 'DNAT',
    steps: r.steps.map((s) => ({ where: s.where, rule: s.rule, comment: s.comment, depth: s.depth, probability: 1 })),
    notUnderstood: r.notUnderstood,
    // The scheduler picks, not chance: say so instead of "at random".
    summary: summary.replace(
      'at random',
      `by the ${r.steps.find((s) => s.where === 'ipvs')?.rule.split(' ')[1] ?? ''} scheduler`,
    ),
  };
}
