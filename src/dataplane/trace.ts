// What every mode's packet tracer (src/dataplane/<mode>/trace.ts) takes and
// reports, so `explain`, the packet-flow table runner and the tests read one
// shape. See docs/architecture.md.

import type { Protocol } from '../core/types.js';

/** The first packet of a new connection, as a tracer follows it. */
export interface TracePacket {
  readonly src: string;
  readonly dst: string;
  readonly port: number;
  /** Default TCP. */
  readonly protocol?: Protocol;
  /** Input interface, for the bridge/prefix local detectors (remote sources only). */
  readonly iif?: string;
}

export interface TraceOptions {
  /**
   * Throw on a rule the tracer does not understand (default true: the tests,
   * where the tracer must understand every rule its renderer writes). False
   * (`explain` on a live kernel that may hold other tools' rules) treats such
   * a rule as not matching and lists it in `notUnderstood`.
   */
  readonly strict?: boolean;
}

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
