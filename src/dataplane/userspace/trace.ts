// trace: the userspace mode's packet tracer, over a Fake (the redirect table
// and the listener table). It follows a new connection's first packet along
// the kernel's hook path through the `kube-proxy-userspace` table:
//   remote source: nat prerouting (portals-container, then nodeports-container
//     for local destinations), then filter input (local destination, which
//     a redirect makes it) or filter forward;
//   node-local source: filter output (priority -110, before nat), nat output
//     (portals-host, nodeports-host), then filter input for local
//     destinations.
// A packet redirected to a listener's port is relayed by that listener: the
// result lists every endpoint its relay may choose (round-robin, so each with
// the same chance) and masq is true, because the relay opens a new
// connection from the node, so no endpoint ever sees the client's address.
// Refusals come from the no-endpoint vmaps: drop, or goto reject-chain.
// Strict and lenient modes: see TraceOptions in ../trace.ts. Pure.

import { cidrContains, isLoopback, parseCIDR, parseIP } from '../../core/ip.js';
import {
  isLocalAddress,
  traceResult,
  type ChainTraceCandidate,
  type ChainTraceStep,
  type TraceOptions,
  type TracePacket,
  type TraceResultOf,
} from '../trace.js';
import type { FakeChain, FakeListener, FakeMap } from './fake.js';
import { ProxyError } from '../../core/errors.js';

export type { TraceOptions, TracePacket, TraceVerdict } from '../trace.js';

/** A matched rule; chain is a chain of the table, or "listener <key>" for the relay. */
export type TraceStep = ChainTraceStep;
/** A candidate endpoint; chain is "listener <key>", the listener whose relay picks it. */
export type TraceCandidate = ChainTraceCandidate;

export type TraceResult = TraceResultOf<TraceStep, TraceCandidate>;

/** What the tracer reads: the Fake satisfies it. */
export interface RuleSource {
  readonly chains: ReadonlyMap<string, FakeChain>;
  readonly maps: ReadonlyMap<string, FakeMap>;
  listenerOn(protocol: string, port: number): FakeListener | undefined;
}

class NotUnderstood extends ProxyError {
  constructor(what: string) {
    super('KPT_TRACE_FAILED', what);
  }
}

interface Pkt {
  src: string;
  dst: string;
  port: number;
  proto: string;
}

type Outcome =
  { kind: 'none' } | { kind: 'stop'; verdict: 'DROP' | 'REJECT' } | { kind: 'nat'; dst: string; port: number };

class Tracer {
  readonly outputs: string[] = [];
  readonly matched: string[] = [];
  readonly steps: TraceStep[] = [];
  readonly candidates: TraceCandidate[] = [];
  readonly notUnderstood: string[] = [];
  masq = false;

  constructor(
    private readonly src: RuleSource,
    private readonly localIPs: readonly string[],
    private readonly strict: boolean,
  ) {}

  isLocal(ip: string): boolean {
    return isLocalAddress(ip, this.localIPs);
  }

  /** The address a redirect rewrites the destination to: the node's first non-loopback address of the family. */
  primaryAddress(like: string): string {
    const fam = parseIP(like)?.family;
    return this.localIPs.find((l) => parseIP(l)?.family === fam && !isLoopback(parseIP(l)!)) ?? like;
  }

  /** Run a chain; the first rule with an outcome ends it. */
  run(chain: string, pkt: Pkt, depth = 0): Outcome {
    const c = this.src.chains.get(chain);
    if (!c) return { kind: 'none' };
    for (const rule of c.rules) {
      let o: Outcome | 'nomatch';
      try {
        o = this.rule(rule, pkt, depth);
      } catch (e) {
        if (!(e instanceof NotUnderstood) || this.strict) throw e;
        this.notUnderstood.push(`${chain}: ${rule}`);
        continue;
      }
      if (o === 'nomatch') continue;
      this.matched.push(`${chain}: ${rule}`);
      this.steps.push({ chain, rule, comment: null, depth, probability: 1 });
      if (o.kind !== 'none') return o;
    }
    return { kind: 'none' };
  }

  /** One rule: its matches left to right, then its statement. */
  private rule(rule: string, pkt: Pkt, depth: number): Outcome | 'nomatch' {
    let rest = rule;
    const take = (re: RegExp): RegExpExecArray | null => {
      const m = re.exec(rest);
      if (m) rest = rest.slice(m[0].length).trimStart();
      return m;
    };
    for (;;) {
      let m: RegExpExecArray | null;
      if ((m = take(/^meta l4proto \{ ([a-z, ]+) \}/))) {
        if (!m[1]!.split(', ').includes(pkt.proto)) return 'nomatch';
      } else if (take(/^fib daddr type local/)) {
        if (!this.isLocal(pkt.dst)) return 'nomatch';
      } else if ((m = take(/^ip6? daddr (!= )?(?!\. )(@\S+|\S+)(?= )/))) {
        const inside = m[2]!.startsWith('@') ? this.inSet(m[2]!.slice(1), pkt.dst) : inCIDR(m[2]!, pkt.dst);
        if (inside === (m[1] !== undefined)) return 'nomatch';
      } else break;
    }
    return this.statement(rest, pkt, depth);
  }

  private statement(s: string, pkt: Pkt, depth: number): Outcome | 'nomatch' {
    const key3 = `${pkt.dst} . ${pkt.proto} . ${pkt.port}`;
    const key2 = `${pkt.proto} . ${pkt.port}`;
    let m: RegExpExecArray | null;
    if ((m = /^(redirect to :|dnat to ip6? saddr :) (ip6? daddr \. )?meta l4proto \. th dport map @(\S+)$/.exec(s))) {
      const port = this.lookup(m[3]!, m[2] ? key3 : key2);
      if (port === undefined) return 'nomatch';
      return { kind: 'nat', dst: m[1]!.startsWith('redirect') ? this.primaryAddress(pkt.dst) : pkt.src, port: +port };
    }
    if ((m = /^(ip6? daddr \. )?meta l4proto \. th dport vmap @(\S+)$/.exec(s))) {
      const v = this.lookup(m[2]!, m[1] ? key3 : key2);
      return v === undefined ? 'nomatch' : this.verdict(v, pkt, depth);
    }
    if ((m = /^(jump|goto) (\S+)$/.exec(s))) return this.verdict(s, pkt, depth);
    if (s === 'reject') return { kind: 'stop', verdict: 'REJECT' };
    if (s === 'drop') return { kind: 'stop', verdict: 'DROP' };
    throw new NotUnderstood(s);
  }

  private verdict(v: string, pkt: Pkt, depth: number): Outcome {
    if (v === 'drop') return { kind: 'stop', verdict: 'DROP' };
    if (v === 'accept') return { kind: 'none' };
    const m = /^(jump|goto) (\S+)$/.exec(v);
    if (!m) throw new NotUnderstood(v);
    return this.run(m[2]!, pkt, depth + 1);
  }

  private lookup(map: string, key: string): string | undefined {
    return this.src.maps.get(map)?.elements.get(key);
  }

  private inSet(set: string, ip: string): boolean {
    const s = this.src.maps.get(set);
    if (!s) return false;
    for (const k of s.elements.keys()) if (k.includes('/') ? inCIDR(k, ip) : parseIP(k)?.text === ip) return true;
    return false;
  }

  /** Hand the packet to the listener on its (new) port: every endpoint of its relay is a candidate. */
  relay(pkt: Pkt): void {
    const l = this.src.listenerOn(pkt.proto.toUpperCase(), pkt.port);
    if (!l) {
      // Nothing listens there: the kernel answers with a TCP reset or an ICMP port unreachable.
      this.matched.push(`no listener: ${pkt.proto} port ${pkt.port}`);
      this.outputs.push('REJECT');
      return;
    }
    const p = l.endpoints.length > 0 ? 1 / l.endpoints.length : 0;
    const chain = `listener ${l.key}`;
    this.matched.push(`${chain}: ${l.protocol.toLowerCase()} port ${l.port}`);
    this.steps.push({
      chain,
      rule: `${l.protocol.toLowerCase()} port ${l.port}`,
      comment: null,
      depth: 0,
      probability: 1,
    });
    for (const endpoint of l.endpoints) {
      this.candidates.push({ endpoint, probability: p, chain });
      this.outputs.push(endpoint);
    }
    this.masq = l.endpoints.length > 0;
  }
}

function inCIDR(cidr: string, ip: string): boolean {
  const c = parseCIDR(cidr.includes('/') ? cidr : `${cidr}/${cidr.includes(':') ? 128 : 32}`);
  return c !== null && cidrContains(c, ip);
}

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
  const tr = new Tracer(src, localIPs, opts.strict ?? true);
  const pkt: Pkt = {
    src: packet.src,
    dst: packet.dst,
    port: packet.port,
    proto: (packet.protocol ?? 'TCP').toLowerCase(),
  };
  const srcLocal = tr.isLocal(pkt.src);
  const stop = (o: Outcome): boolean => {
    if (o.kind === 'stop') tr.outputs.push(o.verdict);
    return o.kind === 'stop';
  };
  let nat: Outcome;
  if (srcLocal) {
    if (stop(tr.run('filter-output', pkt))) return traceResult(tr);
    nat = tr.run('portals-host', pkt);
  } else {
    nat = tr.run('portals-container', pkt);
  }
  if (nat.kind === 'nat') {
    pkt.dst = nat.dst;
    pkt.port = nat.port;
  }
  const hook = tr.isLocal(pkt.dst) ? 'filter-input' : srcLocal ? null : 'filter-forward';
  if (hook !== null && stop(tr.run(hook, pkt))) return traceResult(tr);
  if (nat.kind === 'nat') tr.relay(pkt);
  return traceResult(tr);
}
