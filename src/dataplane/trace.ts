// What every mode's packet tracer (src/dataplane/<mode>/trace.ts) takes and
// reports, so `explain`, the packet-flow table runner and the tests read one
// shape. See docs/architecture.md.

import { isLoopback, parseIP } from '../core/ip.js';
import { ProxyError } from '../core/errors.js';
import { splitHostPort } from '../core/config/hostport.js';
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

/** Every mode's `trace` (docs/architecture.md, the shape of a mode). */
export type TraceFunction<Source, Result, Options extends TraceOptions = TraceOptions> = (
  source: Source,
  packet: TracePacket,
  localIPs: readonly string[],
  opts?: Options,
) => Result;

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
  /** The result's output where it is not `outputs` joined (IPVS: the real servers, else the refusal). */
  readonly output?: string;
}

/** The result every mode's trace() returns, from what it collected. */
export function traceResult<Step, Candidate>(w: TraceWalk<Step, Candidate>): TraceResultOf<Step, Candidate> {
  return {
    output: w.output ?? w.outputs.join(', '),
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

/** The packet as a walk carries it on: a DNAT rewrites its destination. */
export interface WalkedPacket {
  src: string;
  dst: string;
  port: number;
  protocol: Protocol;
  iif?: string;
}

/**
 * Lenient mode only: the rule being read holds something the tracer does not
 * know. TraceCollector.readRule catches it; strict mode throws a plain
 * KPT_TRACE_FAILED ProxyError instead, which nothing catches.
 */
export class NotUnderstood extends ProxyError {
  constructor(what: string) {
    super('KPT_TRACE_FAILED', what);
    this.name = 'NotUnderstood';
  }
}

/** Deeper jumps than this are a loop: the kernel refuses loops, but a dump loaded into a Fake is not checked. */
const MAX_JUMP_DEPTH = 32;

/**
 * What the rule-walking tracers share: what a walk collects (turned into the
 * result by result()), which addresses are the node's, how the first packet
 * starts, and how a rule that cannot be read is handled in strict and
 * lenient mode (TraceOptions). A mode's tracer extends it with its walk.
 */
export class TraceCollector<Step, Candidate> implements TraceWalk<Step, Candidate> {
  readonly outputs: string[] = [];
  masq = false;
  readonly matched: string[] = [];
  readonly steps: Step[] = [];
  readonly candidates: Candidate[] = [];
  readonly notUnderstood: string[] = [];
  readonly strict: boolean;
  /** nat rewrote the destination: conntrack's DNAT status holds from then on. */
  dnat = false;
  /** The packet's mark, as the rules on the way set it. */
  mark = 0;
  /** The node's addresses, normalised once (IPVS mode passes every Service address too). */
  private readonly local: ReadonlySet<string>;

  constructor(localIPs: readonly string[], opts: TraceOptions) {
    this.strict = opts.strict ?? true;
    this.local = new Set(localIPs.flatMap((l) => parseIP(l)?.text ?? []));
  }

  /** As isLocalAddress. */
  isLocal(ip: string): boolean {
    const p = parseIP(ip);
    return p !== null && (isLoopback(p) || this.local.has(p.text));
  }

  /**
   * The first packet of the connection as the walk starts it, and whether
   * the node sends it: a node-local source has no input interface.
   */
  start(packet: TracePacket): { pkt: WalkedPacket; srcLocal: boolean } {
    const pkt: WalkedPacket = { ...packet, protocol: packet.protocol ?? 'TCP' };
    const srcLocal = this.isLocal(pkt.src);
    if (srcLocal) delete pkt.iif;
    return { pkt, srcLocal };
  }

  /**
   * nat gave the packet a new destination, `endpoint` ("ip:port", "[ip]:port",
   * or an address alone, which keeps the port): the later hooks see it.
   */
  rewriteDestination(pkt: WalkedPacket, endpoint: string): void {
    const hp = splitHostPort(endpoint);
    pkt.dst = hp?.host ?? endpoint;
    if (hp) pkt.port = Number(hp.port);
    this.dnat = true;
  }

  /** The rule being read holds something this tracer does not know (see NotUnderstood). */
  fail(msg: string): never {
    throw this.strict ? new ProxyError('KPT_TRACE_FAILED', `tracer: ${msg}`) : new NotUnderstood(msg);
  }

  /** Throws when a jump to `where` at `depth` goes deeper than any real rule set does. */
  enter(depth: number, where: string): void {
    if (depth > MAX_JUMP_DEPTH) throw new ProxyError('KPT_TRACE_FAILED', `tracer: jump loop at ${where}`);
  }

  /** A rule the packet matched: "where: rule" in `matched`, and its step. */
  record(where: string, rule: string, step: Step): void {
    this.matched.push(`${where}: ${rule}`);
    this.steps.push(step);
  }

  /**
   * Reads one rule of `where` with `read`. When the rule cannot be read
   * (lenient mode), what reading it collected is undone, it is listed in
   * `notUnderstood` and it counts as not matching: `skipped` is returned.
   */
  readRule<T>(where: string, rule: string, read: () => T, skipped: T): T {
    const undo = this.checkpoint();
    try {
      return read();
    } catch (e) {
      if (this.strict || !(e instanceof NotUnderstood)) throw e;
      undo();
      this.notUnderstood.push(`${where}: ${rule}`);
      return skipped;
    }
  }

  /** Undoes, when called, what was collected and changed since. */
  private checkpoint(): () => void {
    const at = {
      outputs: this.outputs.length,
      matched: this.matched.length,
      steps: this.steps.length,
      candidates: this.candidates.length,
      masq: this.masq,
      mark: this.mark,
    };
    return () => {
      this.outputs.length = at.outputs;
      this.matched.length = at.matched;
      this.steps.length = at.steps;
      this.candidates.length = at.candidates;
      this.masq = at.masq;
      this.mark = at.mark;
    };
  }

  result(): TraceResultOf<Step, Candidate> {
    return traceResult(this);
  }
}
