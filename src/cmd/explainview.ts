// The mode-neutral result of `kube-proxy-ts explain` and its text form. The
// mode tracers (src/dataplane/<mode>/trace.ts) are turned into one
// Explanation so the text and JSON outputs look the same for every mode.

import type { LbAlgorithm } from '../core/lbalgorithm.js';
import type { Protocol } from '../core/types.js';

export interface ExplainStep {
  /** "nat/KUBE-SERVICES" (iptables table/chain) or "service-ips" (nftables chain). */
  readonly where: string;
  readonly rule: string;
  readonly comment: string | null;
  readonly depth: number;
  readonly probability: number;
}

export interface ExplainCandidate {
  readonly endpoint: string;
  readonly probability: number;
}

export type ExplainVerdict = 'DNAT' | 'REJECT' | 'DROP' | 'ACCEPT' | 'NONE';

export interface Explanation {
  readonly mode: 'iptables' | 'nftables' | 'ebpf' | 'ipvs' | 'userspace';
  readonly packet: { readonly src: string; readonly dst: string; readonly port: number; readonly protocol: Protocol };
  /** The Service port the rules name (from the first service rule's comment), or null. */
  readonly service: string | null;
  readonly verdict: ExplainVerdict;
  readonly candidates: readonly ExplainCandidate[];
  readonly masquerade: boolean;
  readonly steps: readonly ExplainStep[];
  /** Rules skipped because the tracer cannot evaluate them (other tools' rules). */
  readonly notUnderstood: readonly string[];
  /** One line: what happens to the packet. */
  readonly summary: string;
  /** What the tool could not find out (e.g. userspace endpoints without the proxy). */
  readonly notes?: readonly string[];
  /** How the endpoint is chosen, when not at random (the annotation kube-proxy-ts/lb-algorithm). */
  readonly algorithm?: LbAlgorithm;
}

/** How each algorithm picks, for the summary. */
const HOW: Readonly<Record<LbAlgorithm, string>> = {
  random: 'at random',
  'round-robin': 'in turn (round-robin)',
  maglev: 'by the client address and port (maglev)',
  'source-hash': 'by the client address (source-hash)',
};

/** "ns/name:port" from a kube-proxy rule comment such as "ns1/s0:http cluster IP". */
export function serviceFromComment(comment: string | null): string | null {
  const m =
    comment === null ? null : /^([a-z0-9][-a-z0-9.]*\/[a-z0-9][-a-z0-9.]*(?::[-a-z0-9]*)?)(?:\s|$)/.exec(comment);
  return m ? m[1]! : null;
}

const pct = (p: number) => `${(p * 100).toFixed(1).replace(/\.0$/, '')}%`;

export function summarize(
  service: string | null,
  verdict: ExplainVerdict,
  candidates: readonly ExplainCandidate[],
  masq: boolean,
  algorithm: LbAlgorithm = 'random',
): string {
  const who = service ?? 'the packet';
  switch (verdict) {
    case 'NONE':
      return 'not a service address: no kube-proxy rule matched this packet';
    case 'REJECT':
      return `${who}: REJECT (the service has no usable endpoints or the traffic is not allowed)`;
    case 'DROP':
      return `${who}: DROP`;
    case 'ACCEPT':
      return `${who}: ACCEPT (no DNAT)`;
    case 'DNAT': {
      const eps = candidates
        .map((c) => (candidates.length > 1 ? `${c.endpoint} (${pct(c.probability)})` : c.endpoint))
        .join(', ');
      const one =
        candidates.length > 1
          ? `DNAT to one of ${candidates.length} endpoints ${HOW[algorithm]}: ${eps}`
          : `DNAT to ${eps}${algorithm === 'random' ? '' : ` (${algorithm})`}`;
      return `${who}: ${one}; ${masq ? 'masqueraded (SNAT to the node address)' : 'not masqueraded'}`;
    }
  }
}

export function explanationText(e: Explanation): string {
  const p = e.packet;
  const lines = [`Packet ${p.protocol} ${p.src} -> ${p.dst}:${p.port} (mode ${e.mode})`, ''];
  lines.push('Rules matched, in order:');
  if (e.steps.length === 0) lines.push('  (none)');
  for (const s of e.steps) {
    const prob = s.probability < 1 - 1e-9 ? ` [p=${pct(s.probability)}]` : '';
    lines.push(`${'  '.repeat(s.depth + 1)}${s.where}: ${s.rule}${prob}`);
  }
  if (e.notUnderstood.length > 0) {
    lines.push('', 'Rules skipped (options this tool cannot evaluate; assumed not to match):');
    for (const r of e.notUnderstood) lines.push(`  ${r}`);
  }
  lines.push('', `Service:    ${e.service ?? '-'}`);
  lines.push(`Verdict:    ${e.verdict}`);
  if (e.algorithm) lines.push(`Balancing:  ${e.algorithm}`);
  for (const c of e.candidates) lines.push(`  endpoint ${c.endpoint}  probability ${pct(c.probability)}`);
  lines.push(`Masquerade: ${e.masquerade ? 'yes' : 'no'}`);
  lines.push('', e.summary);
  for (const n of e.notes ?? []) lines.push(`note: ${n}`);
  return lines.join('\n') + '\n';
}
