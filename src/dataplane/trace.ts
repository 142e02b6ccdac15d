// What every mode's packet tracer (src/dataplane/<mode>/trace.ts) takes and
// reports, so `explain`, the packet-flow table runner and the tests read one
// shape. See docs/architecture.md.

import { isLoopback, parseIP } from '../core/ip.js';
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

/** A matched rule of a mode whose rules live in named chains (nftables, userspace). */
export interface ChainTraceStep {
  readonly chain: string;
  readonly rule: string;
  /** The rule's comment, or null. */
  readonly comment: string | null;
  /** Jump depth below the hook's chain (0 = a rule of that chain). */
  readonly depth: number;
  /** Probability that a packet takes this rule (random endpoint choices on the way). */
  readonly probability: number;
}

/** A DNAT destination the packet may get, with its chance and where it was chosen. */
export interface ChainTraceCandidate {
  readonly endpoint: string;
  readonly probability: number;
  readonly chain: string;
}

/** What a tracer collected while it walked: turned into its result by traceResult(). */
export interface TraceWalk<Step, Candidate> {
  readonly outputs: readonly string[];
  readonly masq: boolean;
  readonly matched: readonly string[];
  readonly steps: readonly Step[];
  readonly candidates: readonly Candidate[];
  readonly notUnderstood: readonly string[];
}

/** The result every mode's trace() returns, from what it collected. */
export function traceResult<Step, Candidate>(w: TraceWalk<Step, Candidate>): TraceResultOf<Step, Candidate> {
  return {
    output: w.outputs.join(', '),
    masq: w.masq,
    matched: w.matched,
    steps: w.steps,
    verdict: verdictOf(w.outputs, w.candidates.length > 0),
    candidates: w.candidates,
    notUnderstood: w.notUnderstood,
  };
}

/** Whether a packet to or from `ip` is the node's own: loopback, or one of `localIPs`. */
export function isLocalAddress(ip: string, localIPs: readonly string[]): boolean {
  const p = parseIP(ip);
  return p !== null && (isLoopback(p) || localIPs.some((l) => parseIP(l)?.text === p.text));
}

/** The verdict of a trace's terminal outputs: DROP/REJECT win over DNAT, DNAT over ACCEPT. */
export function verdictOf(outputs: readonly string[], dnat: boolean): TraceVerdict {
  for (const v of ['DROP', 'REJECT'] as const) if (outputs.includes(v)) return v;
  if (dnat) return 'DNAT';
  return outputs.includes('ACCEPT') ? 'ACCEPT' : 'NONE';
}
