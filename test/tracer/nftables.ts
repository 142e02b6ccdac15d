// Packet tracer over the nftables Fake, after upstream's nftablesTracer
// (pkg/proxy/nftables/helpers_test.go, reference 5.2), extended for the newest
// design (inline `mark set mark or`, `dnat ... to numgen ... map`, hairpin
// set) and walking the real hook path like test/tracer/iptables.ts:
//   filter pre-DNAT (prerouting, or output for a node-local source), nat
//   prerouting/output (DNAT rewrites destination IP and port), then filter
//   output (local source) and/or input (local destination) or forward, then
//   nat postrouting for masquerade (mark bit, or the hairpin-connections set).
// numgen maps are followed for every entry so all endpoints are collected;
// affinity sets are empty (dynamic), so affinity checks never match, as
// upstream. Unknown syntax throws: the tracer must understand every rule the
// renderer writes.
import { cidrContains, isLoopback, joinHostPort, parseCIDR, parseIP } from '../../src/core/ip.js';
import type { Protocol } from '../../src/core/types.js';
import type { Fake } from '../../src/dataplane/nftables/fake.js';

export interface TracePacket {
  readonly src: string;
  readonly dst: string;
  readonly port: number;
  readonly protocol?: Protocol;
  /** Input interface, for the bridge/prefix local detectors (remote sources only). */
  readonly iif?: string;
}

export interface TraceResult {
  /** "" | "ip:port, ip:port" | "REJECT" | "DROP" | "ACCEPT" (joined in order). */
  readonly output: string;
  readonly masq: boolean;
  /** Rules that matched, as "chain: rule". */
  readonly matched: readonly string[];
}

type Verdict = 'continue' | 'return' | 'terminal';
interface Pkt { src: string; dst: string; port: number; proto: string; iif: string | undefined }

class Tracer {
  outputs: string[] = [];
  mark = 0;
  masq = false;
  dnat = false;
  matched: string[] = [];

  constructor(private readonly fake: Fake, private readonly localIPs: readonly string[]) {}

  isLocal(ip: string): boolean {
    const p = parseIP(ip);
    if (!p) return false;
    return isLoopback(p) || this.localIPs.some((l) => parseIP(l)?.text === p.text);
  }

  runChain(chain: string, pkt: Pkt, depth = 0): Verdict {
    if (depth > 32) throw new Error(`tracer: jump loop at ${chain}`);
    const c = this.fake.chains.get(chain);
    if (!c) throw new Error(`tracer: no chain ${chain}`);
    for (const r of c.rules) {
      const v = this.runRule(chain, r.rule, pkt, depth);
      if (v !== 'continue') return v;
    }
    return 'continue';
  }

  private field(name: string, pkt: Pkt): string {
    switch (name) {
      case 'ip daddr': case 'ip6 daddr': return pkt.dst;
      case 'ip saddr': case 'ip6 saddr': return pkt.src;
      case 'meta l4proto': return pkt.proto;
      case 'th dport': return String(pkt.port);
      default: throw new Error(`tracer: unknown field ${name}`);
    }
  }

  private lookup(set: string, key: string): string[] | null {
    const s = this.fake.sets.get(set);
    if (!s) throw new Error(`tracer: no set ${set}`);
    const e = s.elements.get(key);
    return e ? [...(e.value ?? [])] : null;
  }

  /** Follow a verdict such as "goto X", "jump X", "drop". */
  private verdict(v: string, chain: string, pkt: Pkt, depth: number): Verdict {
    const [word, target] = v.trim().split(/\s+/);
    switch (word) {
      case 'goto': {
        const r = this.runChain(target!, pkt, depth + 1);
        return r === 'terminal' ? 'terminal' : 'return';
      }
      case 'jump': {
        const r = this.runChain(target!, pkt, depth + 1);
        return r === 'terminal' ? 'terminal' : 'continue';
      }
      case 'drop': case 'reject': case 'accept':
        this.outputs.push(word.toUpperCase());
        return 'terminal';
      case 'return': return 'return';
      default: throw new Error(`tracer: unknown verdict ${v} in ${chain}`);
    }
  }

  private runRule(chain: string, rule: string, pkt: Pkt, depth: number): Verdict {
    const t = tokens(rule);
    let i = 0;
    const next = () => t[i++];
    const peek = (o = 0) => t[i + o];
    const record = () => this.matched.push(`${chain}: ${rule}`);
    let probabilistic = false;
    while (i < t.length) {
      const tok = next()!;
      if (tok === 'ct') {
        const what = next(); const val = next();
        if (what === 'state' && val === 'new') continue;
        if (what === 'status' && val === 'dnat') { if (!this.dnat) return 'continue'; continue; }
        throw new Error(`tracer: ct ${what} ${val}`);
      }
      if ((tok === 'ip' || tok === 'ip6' || tok === 'meta' || tok === 'th') && peek(1) === '.') {
        // Concatenation: fields joined by '.', then "vmap @map" or "@set".
        const fields = [`${tok} ${next()}`];
        while (peek() === '.') { next(); fields.push(`${next()} ${next()}`); }
        const key = fields.map((f) => this.field(f, pkt)).join(' . ');
        const op = next();
        if (op === 'vmap') {
          const value = this.lookup(next()!.slice(1), key);
          if (value === null) return 'continue';
          record();
          return this.verdict(value.join(' '), chain, pkt, depth);
        }
        if (op?.startsWith('@')) { if (this.lookup(op.slice(1), key) === null) return 'continue'; continue; }
        throw new Error(`tracer: concatenation followed by ${op} in ${rule}`);
      }
      if ((tok === 'ip' || tok === 'ip6') && (peek() === 'daddr' || peek() === 'saddr')) {
        const addr = this.field(`${tok} ${next()}`, pkt);
        let neg = false;
        if (peek() === '!=') { next(); neg = true; }
        const v = next()!;
        let hit: boolean;
        if (v.startsWith('@')) hit = this.lookup(v.slice(1), addr) !== null;
        else if (v === '{') {
          const items: string[] = [];
          while (peek() !== '}') items.push(...next()!.split(',').filter(Boolean));
          next();
          hit = items.some((x) => addrMatches(x, addr));
        } else hit = addrMatches(v, addr);
        if (hit === neg) return 'continue';
        continue;
      }
      if (tok === 'meta' && peek() === 'l4proto') { next(); if (next() !== pkt.proto) return 'continue'; continue; }
      if (tok === 'fib') {
        const which = next(); next(); const type = next();
        if (type !== 'local') throw new Error(`tracer: fib type ${type}`);
        if (!this.isLocal(which === 'daddr' ? pkt.dst : pkt.src)) return 'continue';
        continue;
      }
      if (tok === 'iifname') {
        let neg = false;
        if (peek() === '!=') { next(); neg = true; }
        const spec = JSON.parse(next()!) as string;
        const hit = pkt.iif !== undefined && (spec.endsWith('*') ? pkt.iif.startsWith(spec.slice(0, -1)) : pkt.iif === spec);
        if (hit === neg) return 'continue';
        continue;
      }
      if (tok === 'mark' && peek() === 'and') {
        next(); const m = Number(next()); const op = next(); const v = Number(next());
        if (op !== '!=' && op !== '==') throw new Error(`tracer: mark op ${op}`);
        if (((this.mark & m) !== v) !== (op === '!=')) return 'continue';
        continue;
      }
      if (tok === 'mark' && peek() === 'set') {
        next(); next(); const op = next(); const m = Number(next());
        this.mark = op === 'or' ? this.mark | m : this.mark ^ m;
        continue;
      }
      if (tok === 'update' || tok === 'counter') {
        record();
        if (tok === 'update') { while (next() !== '}') { /* skip "@set { ip saddr }" */ } }
        continue;
      }
      if (tok === 'numgen' && peek(3) !== 'vmap' && peek(3) !== undefined) {
        // "numgen random mod K V": a probabilistic match (the 'lean' layout's
        // cascade). Like upstream's iptables tracer with --probability, take
        // the branch AND fall through, so every endpoint is collected.
        i += 4;
        probabilistic = true;
        continue;
      }
      record();
      const v = this.statement(tok, t.slice(i - 1), chain, rule, pkt, depth);
      return probabilistic ? 'continue' : v;
    }
    record();
    return 'continue';
  }

  private statement(tok: string, rest: string[], chain: string, rule: string, pkt: Pkt, depth: number): Verdict {
    if (tok === 'numgen') return this.numgen(rest, chain, pkt, depth);
    if (tok === 'dnat') return this.dnatTo(rest, rule);
    if (tok === 'masquerade') { this.masq = true; return 'terminal'; }
    return this.verdict(`${tok} ${rest[1] ?? ''}`, chain, pkt, depth);
  }

  /** numgen random mod N vmap { 0 : goto a , 1 : goto b }: follow every entry. */
  private numgen(t: string[], chain: string, pkt: Pkt, depth: number): Verdict {
    const body = braceBody(t);
    let result: Verdict = 'continue';
    for (const entry of body.split(',')) {
      const v = entry.slice(entry.indexOf(' : ') + 3);
      const r = this.verdict(v, chain, pkt, depth);
      if (r === 'terminal') result = 'terminal';
    }
    return result;
  }

  /** dnat to IP:port, or dnat ip addr . port to numgen random mod N map { 0 : IP . port , ... }. */
  private dnatTo(t: string[], rule: string): Verdict {
    if (t[1] === 'to' && t[2] !== 'numgen') {
      this.outputs.push(t[2]!);
      return 'terminal';
    }
    if (t.includes('numgen') && t[t.length - 2] === 'map' && t[t.length - 1]!.startsWith('@')) {
      return this.dnatNamedMap(t);
    }
    if (t.includes('numgen')) {
      for (const entry of braceBody(t).split(',')) {
        // "0 : IP . port" (IPv6 addresses contain ':' themselves).
        const [ip, port] = entry.slice(entry.indexOf(' : ') + 3).split(' . ').map((x) => x.trim());
        this.outputs.push(joinHostPort(ip!, Number(port)));
      }
      return 'terminal';
    }
    throw new Error(`tracer: unknown dnat ${rule}`);
  }

  /**
   * dnat ... to numgen random mod M map @m ('maps' layout): every endpoint of
   * the interval map; the intervals must partition 0..M-1 exactly.
   */
  private dnatNamedMap(t: string[]): Verdict {
    const mod = Number(t[t.indexOf('mod') + 1]);
    const name = t[t.length - 1]!.slice(1);
    const ranges = this.fake.listElements(name).map((e) => {
      const [lo, hi] = e.key[0]!.split('-').map(Number);
      return { lo: lo!, hi: hi ?? lo!, ep: joinHostPort(e.value![0]!, Number(e.value![1])) };
    }).sort((a, b) => a.lo - b.lo);
    let next = 0;
    for (const r of ranges) {
      if (r.lo !== next || r.hi < r.lo) throw new Error(`tracer: map ${name} does not partition 0..${mod - 1} at ${r.lo}`);
      next = r.hi + 1;
      this.outputs.push(r.ep);
    }
    if (next !== mod) throw new Error(`tracer: map ${name} ends at ${next - 1}, not ${mod - 1}`);
    return 'terminal';
  }
}

function braceBody(t: string[]): string {
  const open = t.indexOf('{');
  const close = t.lastIndexOf('}');
  return t.slice(open + 1, close).join(' ');
}

function addrMatches(spec: string, addr: string): boolean {
  if (spec.includes('/')) {
    const c = parseCIDR(spec);
    if (!c) throw new Error(`tracer: bad CIDR ${spec}`);
    return cidrContains(c, addr);
  }
  const p = parseIP(spec);
  if (!p) throw new Error(`tracer: bad address ${spec}`);
  return p.text === parseIP(addr)?.text;
}

/** Whitespace tokens with a trailing `comment "..."` removed. */
function tokens(rule: string): string[] {
  const stripped = rule.replace(/\s+comment\s+"(?:[^"\\]|\\.)*"\s*$/, '');
  return stripped.split(/\s+/).filter(Boolean);
}

function hostPort(ep: string): { host: string; port: number } {
  if (ep.startsWith('[')) return { host: ep.slice(1, ep.indexOf(']')), port: Number(ep.slice(ep.indexOf(']') + 2)) };
  const i = ep.lastIndexOf(':');
  return { host: ep.slice(0, i), port: Number(ep.slice(i + 1)) };
}

/**
 * Trace one new connection's first packet. `localIPs` are the node's
 * addresses (loopback is always local).
 */
export function tracePacket(fake: Fake, packet: TracePacket, localIPs: readonly string[]): TraceResult {
  const tr = new Tracer(fake, localIPs);
  const pkt: Pkt = { src: packet.src, dst: packet.dst, port: packet.port, proto: (packet.protocol ?? 'TCP').toLowerCase(), iif: packet.iif };
  const srcLocal = tr.isLocal(pkt.src);
  if (srcLocal) pkt.iif = undefined;
  const finish = (): TraceResult => ({ output: tr.outputs.join(', '), masq: tr.masq, matched: tr.matched });

  if (tr.runChain(srcLocal ? 'filter-output-pre-dnat' : 'filter-prerouting-pre-dnat', pkt) === 'terminal') return finish();
  tr.runChain(srcLocal ? 'nat-output' : 'nat-prerouting', pkt);
  if (tr.outputs.length > 0) {
    const { host, port } = hostPort(tr.outputs[0]!);
    pkt.dst = host;
    pkt.port = port;
    tr.dnat = true;
  }
  const dstLocal = tr.isLocal(pkt.dst);
  const hooks = srcLocal ? ['filter-output', ...(dstLocal ? ['filter-input'] : [])] : [dstLocal ? 'filter-input' : 'filter-forward'];
  for (const hook of hooks) {
    if (tr.runChain(hook, pkt) === 'terminal') return finish();
  }
  tr.runChain('nat-postrouting', pkt);
  return finish();
}
