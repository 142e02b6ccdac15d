// trace: IPVS mode's packet tracer, over a Fake (or the live state read into
// one). It follows a new connection's first packet along the kernel's path:
//
//   remote source:      nat PREROUTING -> filter INPUT -> IPVS (LOCAL_IN, after
//                       filter) -> nat POSTROUTING
//   node-local source:  nat OUTPUT -> IPVS (LOCAL_OUT, right after nat) ->
//                       filter OUTPUT (sees the IPVS-forwarded packet: -m ipvs
//                       matches there) -> nat POSTROUTING
//
// IPVS only takes packets to this node's addresses (kube-ipvs0 holds every
// Service address); other destinations are forwarded untouched. A virtual
// server whose real servers all have weight 0 (or none) answers ICMP port
// unreachable (ip_vs_leave), which a client sees as a refused connection:
// the trace reports REJECT. A packet to a kube-ipvs0 address that matches no
// virtual server is handled by KUBE-IPVS-FILTER (REJECT for new connections
// to ports that are not Services).
//
// Every real server of weight > 0 is a candidate (with its share of the
// weights); masquerade is decided per candidate in POSTROUTING (the mark set
// by KUBE-MARK-MASQ, or the KUBE-LOOP-BACK hairpin set), and the result is
// true when any candidate is masqueraded. `-m set` rules are evaluated
// against the Fake's sets, marks are tracked, `-m physdev` sees no bridge,
// conntrack state is NEW. Strict/lenient as TraceOptions in ../trace.ts.
import { cidrContains, isLoopback, parseCIDR, parseIP } from '../../core/ip.js';
import type { Protocol } from '../../core/types.js';
import { verdictOf, type TraceOptions, type TracePacket, type TraceResultOf } from '../trace.js';
import type { IptablesTable } from '../iptables/fake.js';
import { flagValue, tokenize } from '../iptables/tokens.js';
import type { IpsetType } from './ipsets.js';
import { realServerKey, virtualServerKey, type RealServerStatus, type VirtualServer } from './objects.js';
import { ProxyError } from '../../core/errors.js';

/** What the tracer reads: the Fake, or the live state loaded into one. */
export interface RuleSource {
  rules(table: IptablesTable, chain: string): readonly string[];
  members(set: string): ReadonlySet<string> | undefined;
  setType(set: string): IpsetType | undefined;
  listServices(): VirtualServer[];
  listDests(vs: Pick<VirtualServer, 'protocol' | 'address' | 'port'>): RealServerStatus[];
  dummyAddresses(): string[];
}

/** One rule the packet matched, or the IPVS lookup. */
export interface TraceStep {
  /** "nat/KUBE-SERVICES", "filter/INPUT", or "ipvs". */
  readonly where: string;
  /** The rule text after `-A CHAIN `, or the virtual server for "ipvs". */
  readonly rule: string;
  readonly comment: string | null;
  readonly target: string | null;
  readonly depth: number;
}

export interface TraceCandidate {
  readonly endpoint: string;
  /** weight / sum of weights: the share of new connections a weighted scheduler gives it. */
  readonly probability: number;
  readonly weight: number;
  /** virtualServerKey of the virtual server that chose it. */
  readonly virtualServer: string;
  readonly masq: boolean;
}

export type { TraceOptions, TracePacket, TraceVerdict } from '../trace.js';
export type TraceResult = TraceResultOf<TraceStep, TraceCandidate>;

interface Pkt {
  src: string;
  dst: string;
  port: number;
  protocol: Protocol;
  iif?: string;
  /** Set once IPVS forwarded the packet: the virtual server it came through. */
  ipvs?: VirtualServer;
}

type Verdict = 'continue' | 'return' | 'terminal';

class NotUnderstood extends ProxyError {
  constructor(what: string) {
    super('KPT_TRACE_FAILED', what);
  }
}

const VALUE_FLAGS = new Set(['--comment', '-m', '--xor-mark', '--or-mark', '--set-xmark', '--reject-with', '-j', '-g']);
const NO_VALUE_FLAGS = new Set(['--random-fully', '--random']);

class Tracer {
  mark = 0;
  outputs: string[] = [];
  matched: string[] = [];
  steps: TraceStep[] = [];
  notUnderstood: string[] = [];
  private readonly local: Set<string>;

  constructor(
    private readonly src: RuleSource,
    localIPs: readonly string[],
    private readonly strict: boolean,
  ) {
    this.local = new Set([...localIPs, ...src.dummyAddresses()].map((a) => parseIP(a)?.text ?? a));
  }

  isLocal(ip: string): boolean {
    const p = parseIP(ip);
    return p !== null && (isLoopback(p) || this.local.has(p.text));
  }

  runChain(table: IptablesTable, chain: string, pkt: Pkt, depth = 0): Verdict {
    if (depth > 32) throw new ProxyError('KPT_TRACE_FAILED', `tracer: jump loop at ${table}/${chain}`);
    for (const rule of this.src.rules(table, chain)) {
      const tokens = tokenize(rule);
      if (!tokens) throw new ProxyError('KPT_TRACE_FAILED', `tracer: cannot tokenize ${rule}`);
      let ok: boolean;
      try {
        ok = this.matches(tokens, pkt);
      } catch (e) {
        if (this.strict || !(e instanceof NotUnderstood)) throw e;
        this.notUnderstood.push(`${table}/${chain}: ${rule}`);
        continue;
      }
      if (!ok) continue;
      const target = flagValue(tokens, '-j') ?? flagValue(tokens, '-g');
      this.matched.push(`${table}/${chain}: ${rule}`);
      this.steps.push({ where: `${table}/${chain}`, rule, comment: flagValue(tokens, '--comment'), target, depth });
      const v = this.act(table, tokens, target, pkt, depth);
      if (v !== 'continue') return v;
    }
    return 'continue';
  }

  private act(table: IptablesTable, tokens: string[], target: string | null, pkt: Pkt, depth: number): Verdict {
    switch (target) {
      case null:
        return 'continue';
      case 'MARK': {
        const or = flagValue(tokens, '--or-mark');
        const xor = flagValue(tokens, '--xor-mark');
        const xmark = flagValue(tokens, '--set-xmark');
        if (or !== null) this.mark |= Number(or);
        else if (xor !== null) this.mark ^= Number(xor);
        else if (xmark !== null) {
          const [v, m] = xmark.split('/').map(Number);
          this.mark = (this.mark & ~(m ?? 0xffffffff)) ^ (v ?? 0);
        }
        return 'continue';
      }
      case 'ACCEPT':
        // nat: ends the table's traversal. filter: the verdict of this hook;
        // the packet goes on to IPVS, which may still forward it.
        if (table === 'filter') this.outputs.push('ACCEPT');
        return 'terminal';
      case 'DROP':
      case 'REJECT':
        this.outputs.push(target);
        return 'terminal';
      case 'MASQUERADE':
      case 'SNAT':
        return 'terminal';
      case 'RETURN':
        return 'return';
    }
    const v = this.runChain(table, target, pkt, depth + 1);
    if (v === 'terminal') return 'terminal';
    return tokens.includes('-g') ? 'return' : 'continue';
  }

  private matches(tokens: string[], pkt: Pkt): boolean {
    let neg = false;
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i]!;
      const val = tokens[i + 1] ?? '';
      let ok: boolean;
      switch (t) {
        case '!':
          neg = true;
          continue;
        case '-A':
          i++;
          continue;
        case '-s':
          ok = addrMatch(val, pkt.src);
          i++;
          break;
        case '-d':
          ok = addrMatch(val, pkt.dst);
          i++;
          break;
        case '-p':
          ok = val.toLowerCase() === pkt.protocol.toLowerCase();
          i++;
          break;
        case '-i':
          ok = pkt.iif !== undefined && (val.endsWith('+') ? pkt.iif.startsWith(val.slice(0, -1)) : pkt.iif === val);
          i++;
          break;
        case '--src-type':
          ok = val === 'LOCAL' && this.isLocal(pkt.src);
          i++;
          break;
        case '--dst-type':
          ok = val === 'LOCAL' && this.isLocal(pkt.dst);
          i++;
          break;
        case '--physdev-is-in':
          ok = false; // a trace has no bridge port
          break;
        case '--ctstate':
          ok = val.split(',').includes('NEW');
          i++;
          break;
        case '--mark': {
          const [v, m] = val.split('/').map(Number);
          ok = (this.mark & (m ?? 0xffffffff)) === v;
          i++;
          break;
        }
        case '--match-set':
          ok = this.setMatch(val, tokens[i + 2] ?? '', pkt);
          i += 2;
          break;
        case '--vaddr':
          ok = pkt.ipvs !== undefined && parseIP(val)?.text === pkt.ipvs.address;
          i++;
          break;
        case '--vproto':
          ok = pkt.ipvs !== undefined && val.toLowerCase() === pkt.ipvs.protocol.toLowerCase();
          i++;
          break;
        case '--vport':
          ok = pkt.ipvs !== undefined && Number(val) === pkt.ipvs.port;
          i++;
          break;
        default:
          if (VALUE_FLAGS.has(t)) {
            i++;
            continue;
          }
          if (NO_VALUE_FLAGS.has(t)) continue;
          if (this.strict)
            throw new ProxyError('KPT_TRACE_FAILED', `tracer: unknown rule option ${t} in: ${tokens.join(' ')}`);
          throw new NotUnderstood(t);
      }
      if (ok === neg) return false;
      neg = false;
    }
    return true;
  }

  /** `-m set --match-set NAME dir,dir[,dir]` against the Fake's members. */
  private setMatch(name: string, dirs: string, pkt: Pkt): boolean {
    const type = this.src.setType(name);
    const members = this.src.members(name);
    if (type === undefined || members === undefined) return false;
    const d = dirs.split(',');
    const ip = (i: number) => (d[i] === 'src' ? pkt.src : pkt.dst);
    const pp = `${pkt.protocol.toLowerCase()}:${pkt.port}`;
    const norm = (s: string) => parseIP(s)?.text ?? s;
    switch (type) {
      case 'hash:ip':
        return members.has(norm(ip(0)));
      case 'bitmap:port':
        return d[0] === 'dst' && members.has(String(pkt.port));
      case 'hash:ip,port':
        return d[1] === 'dst' && members.has(`${norm(ip(0))},${pp}`);
      case 'hash:ip,port,ip':
        return d[1] === 'dst' && members.has(`${norm(ip(0))},${pp},${norm(ip(2))}`);
      case 'hash:ip,port,net': {
        if (d[1] !== 'dst') return false;
        const prefix = `${norm(ip(0))},${pp},`;
        const who = ip(2);
        for (const m of members) {
          if (!m.startsWith(prefix)) continue;
          const net = m.slice(prefix.length);
          const c = parseCIDR(net.includes('/') ? net : `${net}/${net.includes(':') ? 128 : 32}`);
          if (c && cidrContains(c, who)) return true;
        }
        return false;
      }
    }
  }

  /** The IPVS lookup: the virtual server for the packet, if any. */
  virtualServer(pkt: Pkt): VirtualServer | undefined {
    const key = virtualServerKey({
      protocol: pkt.protocol,
      address: parseIP(pkt.dst)?.text ?? pkt.dst,
      port: pkt.port,
    });
    return this.src.listServices().find((v) => virtualServerKey(v) === key);
  }
}

function addrMatch(spec: string, ip: string): boolean {
  const c = parseCIDR(spec.includes('/') ? spec : `${spec}/${spec.includes(':') ? 128 : 32}`);
  return c !== null && cidrContains(c, ip);
}

/**
 * Trace one new connection's first packet. `localIPs` are the node's own
 * addresses; kube-ipvs0's addresses and loopback are local too.
 */
export function trace(
  source: RuleSource,
  packet: TracePacket,
  localIPs: readonly string[],
  opts: TraceOptions = {},
): TraceResult {
  const tr = new Tracer(source, localIPs, opts.strict ?? true);
  const pkt: Pkt = { ...packet, protocol: packet.protocol ?? 'TCP' };
  const srcLocal = tr.isLocal(pkt.src);
  if (srcLocal) delete pkt.iif;
  const candidates: TraceCandidate[] = [];
  const done = (): TraceResult => ({
    output: outputOf(tr.outputs, candidates),
    masq: candidates.some((c) => c.masq),
    matched: tr.matched,
    steps: tr.steps,
    verdict: verdictOf(tr.outputs, candidates.length > 0),
    candidates,
    notUnderstood: tr.notUnderstood,
  });

  tr.runChain('nat', srcLocal ? 'OUTPUT' : 'PREROUTING', pkt);
  const dstLocal = tr.isLocal(pkt.dst);
  if (!srcLocal) {
    if (!dstLocal) {
      tr.runChain('filter', 'FORWARD', pkt); // not for IPVS: forwarded as it is
      return done();
    }
    tr.runChain('filter', 'INPUT', pkt);
    if (tr.outputs.length) return done();
  }
  const vs = tr.virtualServer(pkt);
  if (!vs) {
    // Delivered to the node itself; a node-local packet still passes OUTPUT then INPUT.
    if (srcLocal) {
      tr.runChain('filter', 'OUTPUT', pkt);
      if (dstLocal && !tr.outputs.length) tr.runChain('filter', 'INPUT', pkt);
    }
    return done();
  }
  const dests = source.listDests(vs).filter((d) => d.weight > 0);
  const total = dests.reduce((n, d) => n + d.weight, 0);
  tr.matched.push(
    `ipvs: ${virtualServerKey(vs)} ${vs.scheduler}: ${dests.map((d) => realServerKey(d)).join(', ') || 'no real server'}`,
  );
  tr.steps.push({
    where: 'ipvs',
    rule: `${virtualServerKey(vs)} ${vs.scheduler}${vs.flags & 1 ? ` persistent ${vs.timeout}` : ''}`,
    comment: null,
    target: dests.length ? 'masq' : null,
    depth: 0,
  });
  if (dests.length === 0) {
    tr.outputs.push('REJECT'); // ip_vs_leave: ICMP port unreachable
    return done();
  }
  const markBefore = tr.mark;
  for (const d of dests) {
    const ep = realServerKey(d);
    const fwd: Pkt = { ...pkt, dst: d.address, port: d.port, ipvs: vs };
    tr.mark = markBefore;
    const before = tr.outputs.length;
    if (srcLocal) tr.runChain('filter', 'OUTPUT', fwd);
    const out = tr.outputs.slice(before);
    if (out.includes('DROP') || out.includes('REJECT')) continue; // refused on the way out (KUBE-IPVS-OUT-FILTER)
    const masqBefore = tr.steps.length;
    tr.runChain('nat', 'POSTROUTING', fwd);
    const masq = tr.steps.slice(masqBefore).some((s) => s.target === 'MASQUERADE');
    candidates.push({
      endpoint: ep,
      weight: d.weight,
      probability: d.weight / total,
      virtualServer: virtualServerKey(vs),
      masq,
    });
  }
  return done();
}

/** Real servers when there are any; else the first DROP/REJECT; else ACCEPT (or ""). */
function outputOf(outputs: readonly string[], candidates: readonly TraceCandidate[]): string {
  if (candidates.length > 0) return candidates.map((c) => c.endpoint).join(', ');
  return outputs.find((o) => o === 'DROP' || o === 'REJECT') ?? (outputs.includes('ACCEPT') ? 'ACCEPT' : '');
}
