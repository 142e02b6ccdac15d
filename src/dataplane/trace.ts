// What both modes' packet tracers (iptables/trace.ts, nftables/trace.ts)
// report, so `explain` and the tests read one shape.

/** DROP/REJECT win over DNAT, DNAT over ACCEPT; NONE = no rule took the packet. */
export type TraceVerdict = 'DNAT' | 'REJECT' | 'DROP' | 'ACCEPT' | 'NONE';

export interface TraceResultOf<Step, Candidate> {
  /** "" | "ip:port, ip:port" | "REJECT" | "DROP" | "ACCEPT" (joined in rule order). */
  readonly output: string;
  readonly masq: boolean;
  /** Rules that matched, as "<where>: rule" (iptables "table/chain", nftables "chain"). */
  readonly matched: readonly string[];
  readonly steps: readonly Step[];
  readonly verdict: TraceVerdict;
  readonly candidates: readonly Candidate[];
  /** Lenient mode only: rules skipped because they were not understood, as in `matched`. */
  readonly notUnderstood: readonly string[];
}

/** The verdict of a trace's terminal outputs: DROP/REJECT win over DNAT, DNAT over ACCEPT. */
export function verdictOf(outputs: readonly string[], dnat: boolean): TraceVerdict {
  for (const v of ['DROP', 'REJECT'] as const) if (outputs.includes(v)) return v;
  if (dnat) return 'DNAT';
  return outputs.includes('ACCEPT') ? 'ACCEPT' : 'NONE';
}
