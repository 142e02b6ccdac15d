// trace: the nftables mode's packet tracer, over a kube-proxy table (the
// Fake, or a table read back from the kernel into one, listing.ts). Its idea
// comes from upstream's nftablesTracer (pkg/proxy/nftables/helpers_test.go);
// it also knows what our renderer writes beyond upstream (inline `mark set
// mark or`, `dnat ... to numgen ... map`, the lean `numgen random mod K 0`
// cascade, the hairpin set), and like the iptables tracer it walks the real
// hook path:
//   filter pre-DNAT (prerouting, or output for a node-local source), nat
//   prerouting/output (DNAT rewrites destination IP and port), then filter
//   output (local source) and/or input (local destination) or forward, then
//   nat postrouting for masquerade (mark bit, or the hairpin-connections set).
// Every numgen branch is followed, so each endpoint is collected with its
// probability. Affinity sets are dynamic and empty in a trace, so affinity
// checks never match (as upstream's tracer). Every matched rule becomes a
// step. Strict and lenient modes: see TraceOptions in ../trace.ts. Pure.
//
// The userspace mode's table (`kube-proxy-userspace`) is walked by this
// tracer too: `hooks` names the base chains each step of the hook path runs
// (its filter chains sit before nat output), and it also reads `redirect to
// : <map>`, `dnat to ip saddr : <map>` (the port from a named map), `meta
// l4proto { tcp, udp }` and address sets holding prefixes.

import {
  TraceCollector,
  type ChainTraceCandidate,
  type ChainTraceStep,
  type TraceFunction,
  type TraceOptions,
  type TraceResultOf,
  type WalkedPacket,
} from '../trace.js';
import { cidrContains, isLoopback, joinHostPort, parseCIDR, parseIP } from '../../core/ip.js';
import { ProxyError } from '../../core/errors.js';
import { jhashBytes, reciprocalScale } from '../maglev.js';

export type { TraceOptions, TracePacket, TraceVerdict } from '../trace.js';

/** A matched rule; comment is the rule's trailing `comment "..."`. */
export type TraceStep = ChainTraceStep;
export type TraceCandidate = ChainTraceCandidate;

export type TraceResult = TraceResultOf<TraceStep, TraceCandidate>;

/** What the tracer reads: the Fake satisfies it. */
export interface RuleSource {
  readonly chains: ReadonlyMap<
    string,
    { readonly rules: ReadonlyArray<{ readonly rule: string; readonly comment?: string }> }
  >;
  readonly sets: ReadonlyMap<
    string,
    { readonly elements: ReadonlyMap<string, { readonly value?: readonly string[]; readonly comment?: string }> }
  >;
}

/**
 * The base chains the walk runs at each step of the hook path, by name; null
 * where the table has none. Each pair is [local source, remote source].
 */
export interface HookChains {
  /** filter chains that run before DNAT (output or prerouting, at a priority below nat's). */
  readonly preDnat: readonly [string | null, string | null];
  readonly dnat: readonly [string | null, string | null];
  /** filter after DNAT: output (local sources), input (local destinations), forward (the rest). */
  readonly output: string | null;
  readonly input: string | null;
  readonly forward: string | null;
  readonly postrouting: string | null;
}

/** The kube-proxy table's chains (static.ts). */
export const KUBE_PROXY_HOOKS: HookChains = {
  preDnat: ['filter-output-pre-dnat', 'filter-prerouting-pre-dnat'],
  dnat: ['nat-output', 'nat-prerouting'],
  output: 'filter-output',
  input: 'filter-input',
  forward: 'filter-forward',
  postrouting: 'nat-postrouting',
};

export interface NftTraceOptions extends TraceOptions {
  /** Which chains run where (default KUBE_PROXY_HOOKS). */
  readonly hooks?: HookChains;
  /** The client's source port: a Maglev choice (`jhash ip saddr . th sport`) then gives its one endpoint. */
  readonly sport?: number;
}

type Verdict = 'continue' | 'return' | 'terminal';
type Pkt = WalkedPacket;

class Tracer extends TraceCollector<TraceStep, TraceCandidate> {
  /** Rule.comment of the rule being read (the renderer may keep it apart from the text). */
  private comment: string | null = null;

  private readonly sport: number | undefined;

  constructor(
    private readonly src: RuleSource,
    private readonly localIPs: readonly string[],
    opts: NftTraceOptions,
  ) {
    super(localIPs, opts);
    this.sport = opts.sport;
  }

  runChain(chain: string, pkt: Pkt, depth = 0, reach = 1): Verdict {
    this.enter(depth, chain);
    const c = this.src.chains.get(chain);
    if (!c) {
      if (this.strict) throw new ProxyError('KPT_TRACE_FAILED', `tracer: no chain ${chain}`);
      this.notUnderstood.push(`${chain}: (no such chain)`);
      return 'continue';
    }
    const remaining = { p: reach };
    for (const r of c.rules) {
      const read = () => {
        this.comment = r.comment ?? null;
        return this.runRule(chain, r.rule, pkt, depth, remaining);
      };
      const v = this.readRule(chain, r.rule, read, 'continue');
      if (v !== 'continue') return v;
    }
    return 'continue';
  }

  private field(name: string, pkt: Pkt): string {
    switch (name) {
      case 'ip daddr':
      case 'ip6 daddr':
        return pkt.dst;
      case 'ip saddr':
      case 'ip6 saddr':
        return pkt.src;
      case 'meta l4proto':
        return pkt.protocol.toLowerCase();
      case 'th dport':
        return String(pkt.port);
      default:
        return this.fail(`unknown field ${name}`);
    }
  }

  private lookup(set: string, key: string): string[] | null {
    const s = this.src.sets.get(set);
    if (!s) return this.fail(`no set ${set}`);
    const e = s.elements.get(key);
    if (e?.comment !== undefined) this.comment ??= e.comment; // e.g. "ns1/s2:http" on a no-endpoint element
    return e ? [...(e.value ?? [])] : null;
  }

  /** Follow a verdict such as "goto X", "jump X", "drop", taken with probability p. */
  private verdict(v: string, chain: string, pkt: Pkt, depth: number, p: number): Verdict {
    const [word, target] = v.trim().split(/\s+/);
    switch (word) {
      case 'goto':
        return this.runChain(target!, pkt, depth + 1, p) === 'terminal' ? 'terminal' : 'return';
      case 'jump':
        return this.runChain(target!, pkt, depth + 1, p) === 'terminal' ? 'terminal' : 'continue';
      case 'drop':
      case 'reject':
      case 'accept':
        this.outputs.push(word.toUpperCase());
        return 'terminal';
      case 'return':
        return 'return';
      default:
        return this.fail(`unknown verdict ${v} in ${chain}`);
    }
  }

  /** `matched` as the test tracer always had it (a rule may appear twice); steps once per rule. */
  private recordRule(chain: string, rule: string, depth: number, p: number): void {
    const last = this.steps[this.steps.length - 1];
    if (last && last.chain === chain && last.rule === rule && last.depth === depth) {
      this.matched.push(`${chain}: ${rule}`);
      return;
    }
    const m = /\scomment\s+"((?:[^"\\]|\\.)*)"\s*$/.exec(rule);
    this.record(chain, rule, { chain, rule, comment: this.comment ?? (m ? m[1]! : null), depth, probability: p });
  }

  private runRule(chain: string, rule: string, pkt: Pkt, depth: number, remaining: { p: number }): Verdict {
    const t = tokens(rule);
    let i = 0;
    const next = () => t[i++];
    const peek = (o = 0) => t[i + o];
    let p = remaining.p;
    let probabilistic = false;
    const record = () => this.recordRule(chain, rule, depth, p);
    while (i < t.length) {
      const tok = next()!;
      if (tok === 'ct') {
        const what = next();
        const val = next();
        if (what === 'state' && val === 'new') continue;
        if (what === 'status' && val === 'dnat') {
          if (!this.dnat) return 'continue';
          continue;
        }
        this.fail(`ct ${what} ${val}`);
      }
      if ((tok === 'ip' || tok === 'ip6' || tok === 'meta' || tok === 'th') && peek(1) === '.') {
        // Concatenation: fields joined by '.', then "vmap @map" or "@set".
        const fields = [`${tok} ${next()}`];
        while (peek() === '.') {
          next();
          fields.push(`${next()} ${next()}`);
        }
        const key = fields.map((f) => this.field(f, pkt)).join(' . ');
        const op = next();
        if (op === 'vmap') {
          const value = this.lookup(next()!.slice(1), key);
          if (value === null) return 'continue';
          record();
          return this.verdict(value.join(' '), chain, pkt, depth, p);
        }
        if (op?.startsWith('@')) {
          if (this.lookup(op.slice(1), key) === null) return 'continue';
          continue;
        }
        this.fail(`concatenation followed by ${op} in ${rule}`);
      }
      if ((tok === 'ip' || tok === 'ip6') && (peek() === 'daddr' || peek() === 'saddr')) {
        const addr = this.field(`${tok} ${next()}`, pkt);
        let neg = false;
        if (peek() === '!=') {
          next();
          neg = true;
        }
        const v = next()!;
        let hit: boolean;
        if (v.startsWith('@')) hit = this.inAddrSet(v.slice(1), addr);
        else if (v === '{') {
          const items: string[] = [];
          while (peek() !== '}' && peek() !== undefined) items.push(...next()!.split(',').filter(Boolean));
          next();
          hit = items.some((x) => this.addrMatches(x, addr));
        } else hit = this.addrMatches(v, addr);
        if (hit === neg) return 'continue';
        continue;
      }
      if (tok === 'meta' && peek() === 'l4proto' && peek(1) === '{') {
        // meta l4proto { tcp, udp }
        const items: string[] = [];
        i += 2;
        while (peek() !== '}' && peek() !== undefined) items.push(...next()!.split(',').filter(Boolean));
        next();
        if (!items.includes(this.field('meta l4proto', pkt))) return 'continue';
        continue;
      }
      if (tok === 'meta' && peek() === 'l4proto') {
        next();
        if (next() !== pkt.protocol.toLowerCase()) return 'continue';
        continue;
      }
      if (tok === 'fib') {
        const which = next();
        next();
        const type = next();
        if (type !== 'local') this.fail(`fib type ${type}`);
        if (!this.isLocal(which === 'daddr' ? pkt.dst : pkt.src)) return 'continue';
        continue;
      }
      if (tok === 'iifname') {
        let neg = false;
        if (peek() === '!=') {
          next();
          neg = true;
        }
        const raw = next()!;
        const spec = raw.startsWith('"') ? (JSON.parse(raw) as string) : raw;
        const hit =
          pkt.iif !== undefined && (spec.endsWith('*') ? pkt.iif.startsWith(spec.slice(0, -1)) : pkt.iif === spec);
        if (hit === neg) return 'continue';
        continue;
      }
      if (tok === 'mark' && peek() === 'and') {
        next();
        const m = Number(next());
        const op = next();
        const v = Number(next());
        if (op !== '!=' && op !== '==') this.fail(`mark op ${op}`);
        if (((this.mark & m) !== v) !== (op === '!=')) return 'continue';
        continue;
      }
      if (tok === 'mark' && peek() === 'set') {
        next();
        next();
        const op = next();
        const m = Number(next());
        this.mark = op === 'or' ? this.mark | m : this.mark ^ m;
        continue;
      }
      if (tok === 'update' || tok === 'counter') {
        record();
        if (tok === 'update') {
          while (i < t.length && next() !== '}') {
            /* skip "@set { ip saddr }" */
          }
        }
        continue;
      }
      if (tok === 'numgen' && peek(3) !== 'vmap' && peek(3) !== undefined) {
        // "numgen random mod K V": a probabilistic match (the 'lean' layout's
        // cascade), true for 1/K of the packets that get here. Like upstream's
        // iptables tracer with --probability, take the branch AND fall
        // through, so every endpoint is collected.
        const k = Number(peek(2));
        i += 4;
        p = remaining.p / k;
        remaining.p -= p;
        probabilistic = true;
        continue;
      }
      if (tok === 'redirect' || (tok === 'dnat' && peek() === 'to' && peek(2) === 'saddr')) {
        // The port comes from a map: no element for the packet, no match.
        const to = this.natFromMap(t.slice(i - 1), pkt);
        if (to === null) return 'continue';
        record();
        this.outputs.push(to);
        this.candidates.push({ endpoint: to, probability: p, chain });
        return 'terminal';
      }
      record();
      const v = this.statement(tok, t.slice(i - 1), chain, rule, pkt, depth, p);
      return probabilistic ? 'continue' : v;
    }
    record();
    return 'continue';
  }

  private statement(
    tok: string,
    rest: string[],
    chain: string,
    rule: string,
    pkt: Pkt,
    depth: number,
    p: number,
  ): Verdict {
    if (tok === 'numgen' || tok === 'jhash') return this.numgen(rest, chain, pkt, depth, p);
    if (tok === 'dnat') return this.dnatTo(rest, rule, chain, pkt, p);
    if (tok === 'masquerade') {
      this.masq = true;
      return 'terminal';
    }
    if (!['goto', 'jump', 'drop', 'reject', 'accept', 'return'].includes(tok))
      this.fail(`unknown statement ${tok} in ${rule}`);
    return this.verdict(`${tok} ${rest[1] ?? ''}`, chain, pkt, depth, p);
  }

  /**
   * PICK vmap { 0 : goto a , 1 : goto b }: the entry a jhash of this packet
   * selects when the tracer can compute it, else every entry (each target
   * once, with the share of entries it holds).
   */
  private numgen(t: string[], chain: string, pkt: Pkt, depth: number, p: number): Verdict {
    let result: Verdict = 'continue';
    for (const [v, share] of this.picked(t, pkt))
      if (this.verdict(v, chain, pkt, depth, p * share) === 'terminal') result = 'terminal';
    return result;
  }

  /**
   * The values of `PICK map|vmap { K : V , ... }` this packet may get, with
   * their chance. PICK is `numgen random|inc mod N` (every entry; the tracer
   * does not know inc's counter) or `jhash FAM saddr [. th sport] mod N seed
   * S`, which the tracer computes as the kernel does (src/dataplane/maglev.ts)
   * from the source address, and the source port when given.
   */
  private picked(t: string[], pkt: Pkt): Array<[string, number]> {
    const entries = braceBody(t)
      .split(',')
      .map((e) => [e.slice(0, e.indexOf(' : ')).trim(), e.slice(e.indexOf(' : ') + 3).trim()] as const);
    const at = t.indexOf('jhash');
    if (at >= 0) {
      const sport = t[at + 3] === '.';
      const mod = Number(t[t.indexOf('mod', at) + 1]);
      const seed = Number(t[t.indexOf('seed', at) + 1]);
      const addr = parseIP(pkt.src);
      if (!(mod > 0) || !Number.isInteger(seed) || !addr) this.fail(`jhash over ${pkt.src}: ${t.join(' ')}`);
      if (!sport || this.sport !== undefined) {
        const port = this.sport ?? 0;
        const data = sport ? [...addr!.bytes, port >> 8, port & 0xff, 0, 0] : [...addr!.bytes];
        const key = String(reciprocalScale(jhashBytes(Uint8Array.from(data), seed), mod));
        return entries.filter(([k]) => k === key).map(([, v]) => [v, 1]);
      }
    }
    const share = new Map<string, number>();
    for (const [, v] of entries) share.set(v, (share.get(v) ?? 0) + 1 / entries.length);
    return [...share];
  }

  /** dnat to IP:port, or dnat ip addr . port to PICK map { 0 : IP . port , ... }. */
  private dnatTo(t: string[], rule: string, chain: string, pkt: Pkt, p: number): Verdict {
    if (t[1] === 'to' && t[2] !== 'numgen') {
      this.outputs.push(t[2]!);
      this.candidates.push({ endpoint: t[2]!, probability: p, chain });
      return 'terminal';
    }
    const named = t[t.length - 2] === 'map' && t[t.length - 1]!.startsWith('@');
    if (t.includes('numgen') && named) return this.dnatNamedMap(t, chain, p);
    if (t.includes('numgen') || t.includes('jhash')) {
      for (const [value, share] of this.picked(t, pkt)) {
        // "IP . port" (IPv6 addresses contain ':' themselves).
        const [ip, port] = value.split(' . ').map((x) => x.trim());
        const ep = joinHostPort(ip!, Number(port));
        this.outputs.push(ep);
        this.candidates.push({ endpoint: ep, probability: p * share, chain });
      }
      return 'terminal';
    }
    return this.fail(`unknown dnat ${rule}`);
  }

  /**
   * dnat ip addr . port to numgen random mod M map @m, m holding "lo-hi" :
   * "IP . port" intervals (the 'maps' layout): each endpoint is a candidate
   * with probability (hi-lo+1)/M. The intervals must partition 0..M-1
   * exactly; a gap would let some packets through un-DNATed.
   */
  private dnatNamedMap(t: string[], chain: string, p: number): Verdict {
    const mod = Number(t[t.indexOf('mod') + 1]);
    const name = t[t.length - 1]!.slice(1);
    const s = this.src.sets.get(name);
    if (!s || !(mod > 0)) return this.fail(`dnat through missing map ${name}`);
    const ranges: Array<[number, number, string]> = [];
    for (const [key, e] of s.elements) {
      const m = /^(\d+)-(\d+)$/.exec(key) ?? /^(\d+)()$/.exec(key);
      const [ip, port] = (e.value ?? [])
        .join(' . ')
        .split(' . ')
        .map((x) => x.trim());
      if (!m || ip === undefined || port === undefined) return this.fail(`bad element ${key} of ${name}`);
      const lo = Number(m[1]);
      ranges.push([lo, m[2] === '' ? lo : Number(m[2]), joinHostPort(ip, Number(port))]);
    }
    ranges.sort((a, b) => a[0] - b[0]);
    let next = 0;
    for (const [lo, hi, ep] of ranges) {
      if (lo !== next || hi < lo) return this.fail(`map ${name} does not partition 0..${mod - 1} (at ${lo})`);
      next = hi + 1;
      this.outputs.push(ep);
      this.candidates.push({ endpoint: ep, probability: (p * (hi - lo + 1)) / mod, chain });
    }
    if (next !== mod) return this.fail(`map ${name} does not partition 0..${mod - 1} (ends at ${next - 1})`);
    return 'terminal';
  }

  /**
   * `redirect to : KEY map @m` (to the node: loopback for the node's own
   * packets, else its first address of the family, standing for the incoming
   * interface's) or `dnat to ip saddr : KEY map @m` (back to the sender);
   * KEY is fields joined by '.'. The destination, or null when @m has no
   * element for the packet.
   */
  private natFromMap(t: string[], pkt: Pkt): string | null {
    const colon = t.indexOf(':');
    const map = t[t.length - 1]!;
    if (colon < 0 || t[t.length - 2] !== 'map' || !map.startsWith('@')) return this.fail(`unknown nat ${t.join(' ')}`);
    const fields: string[] = [];
    for (let k = colon + 1; k < t.length - 2; k += 3) fields.push(`${t[k]} ${t[k + 1]}`);
    const port = this.lookup(map.slice(1), fields.map((f) => this.field(f, pkt)).join(' . '));
    if (port === null) return null;
    let host: string;
    if (t[0] === 'dnat') host = this.field(`${t[2]} saddr`, pkt);
    else if (this.isLocal(pkt.src)) host = parseIP(pkt.dst)?.family === 'IPv6' ? '::1' : '127.0.0.1';
    else {
      const fam = parseIP(pkt.dst)?.family;
      host = this.localIPs.find((l) => parseIP(l)?.family === fam && !isLoopback(parseIP(l)!)) ?? pkt.dst;
    }
    return joinHostPort(host, Number(port.join(' . ')));
  }

  /** An address in a set: an element equal to it, or a prefix holding it (an interval set). */
  private inAddrSet(set: string, addr: string): boolean {
    if (this.lookup(set, addr) !== null) return true;
    for (const key of this.src.sets.get(set)!.elements.keys())
      if (key.includes('/') && this.addrMatches(key, addr)) return true;
    return false;
  }

  private addrMatches(spec: string, addr: string): boolean {
    if (spec.includes('/')) {
      const c = parseCIDR(spec);
      return c ? cidrContains(c, addr) : this.fail(`bad CIDR ${spec}`);
    }
    const p = parseIP(spec);
    return p ? p.text === parseIP(addr)?.text : this.fail(`bad address ${spec}`);
  }
}

function braceBody(t: string[]): string {
  const open = t.indexOf('{');
  const close = t.lastIndexOf('}');
  return t.slice(open + 1, close).join(' ');
}

/** Whitespace tokens with a trailing `comment "..."` removed. */
function tokens(rule: string): string[] {
  const stripped = rule.replace(/\s+comment\s+"(?:[^"\\]|\\.)*"\s*$/, '');
  return stripped.split(/\s+/).filter(Boolean);
}

/**
 * Trace one new connection's first packet. `localIPs` are the node's
 * addresses (loopback is always local).
 */
export const trace: TraceFunction<RuleSource, TraceResult, NftTraceOptions> = (src, packet, localIPs, opts = {}) => {
  const hooks = opts.hooks ?? KUBE_PROXY_HOOKS;
  const tr = new Tracer(src, localIPs, opts);
  const { pkt, srcLocal } = tr.start(packet);
  const side = srcLocal ? 0 : 1;
  const preDnat = hooks.preDnat[side];
  if (preDnat !== null && tr.runChain(preDnat, pkt) === 'terminal') return tr.result();
  const dnat = hooks.dnat[side];
  if (dnat !== null) tr.runChain(dnat, pkt);
  const first = tr.candidates[0];
  if (first) tr.rewriteDestination(pkt, first.endpoint);
  const dstLocal = tr.isLocal(pkt.dst);
  const filters = srcLocal
    ? [hooks.output, ...(dstLocal ? [hooks.input] : [])]
    : [dstLocal ? hooks.input : hooks.forward];
  for (const hook of filters) {
    if (hook !== null && tr.runChain(hook, pkt) === 'terminal') return tr.result();
  }
  if (hooks.postrouting !== null) tr.runChain(hooks.postrouting, pkt);
  return tr.result();
};
