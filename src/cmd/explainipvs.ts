// IPVS side of `explain`: the live IPVS table, kube-ipvs0, our ipsets and
// the rules, read into the IPVS Fake (ipvslive.ts), and the packet walked
// with the IPVS tracer (src/dataplane/ipvs/trace.ts), lenient about rules it
// cannot read. A candidate's probability is its share of the weights: what a
// weighted scheduler gives it over many connections.
import type { IPFamily } from '../core/types.js';
import { trace } from '../dataplane/ipvs/trace.js';
import type { CommandRunner } from '../platform/exec.js';
import type { ExplainRequest } from './explain.js';
import { summarize, type Explanation } from './explainview.js';
import { readLiveIpvs } from './ipvslive.js';

/** "ns/name:port" is not in IPVS's tables; the set comments name no Service either. */
export async function explainIpvs(
  run: CommandRunner,
  req: ExplainRequest,
  family: IPFamily,
  localIPs: readonly string[],
): Promise<Explanation> {
  const { fake } = await readLiveIpvs(run, req.netns, family);
  const r = trace(
    fake,
    { src: req.src, dst: req.dst, port: req.port, protocol: req.protocol, ...(req.iif ? { iif: req.iif } : {}) },
    localIPs,
    { strict: false },
  );
  const vs = r.candidates[0]?.virtualServer ?? r.steps.find((s) => s.where === 'ipvs')?.rule.split(' ')[0] ?? null;
  const candidates = r.candidates.map((c) => ({ endpoint: c.endpoint, probability: c.probability }));
  const summary = summarize(vs === null ? null : `virtual server ${vs}`, r.verdict, candidates, r.masq);
  return {
    mode: 'ipvs',
    packet: { src: req.src, dst: req.dst, port: req.port, protocol: req.protocol },
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
