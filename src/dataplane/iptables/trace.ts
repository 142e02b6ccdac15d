// trace: the iptables mode's packet tracer, over a Fake (or an iptables-save
// dump loaded into one). It follows the idea of upstream's iptablesTracer
// (pkg/proxy/iptables/proxier_test.go) but starts from the built-in chains,
// so our jump rules are exercised as well:
//   nat PREROUTING (remote source) or nat OUTPUT (node-local source, like
//   upstream's --src-type LOCAL), then the DNAT rewrites the destination, then
//   filter OUTPUT (local source) and/or INPUT (local destination) or FORWARD.
// As upstream: `-m recent --rcheck` and `-m mark` never match, probability
// rules fall through so every endpoint is collected ("ep1, ep2"), and
// KUBE-MARK-MASQ (MARK --or-mark, or --set-xmark V/V as iptables-save prints
// it) sets masq. Conntrack state is NEW, plus DNAT once nat rewrote the
// destination.
//
// Each matched rule becomes a TraceStep carrying the probability of reaching
// it (the product of the `--probability` choices on the way), so `explain`
// can show each candidate endpoint's chance. Strict and lenient modes: see
// TraceOptions in ../trace.ts.
//
// Pure: no I/O; the rule source is anything with rules(table, chain).

import { isLocalAddress, traceResult, type TraceOptions, type TracePacket, type TraceResultOf } from '../trace.js';
import { cidrContains, parseCIDR, parseIP } from '../../core/ip.js';
import type { Protocol } from '../../core/types.js';
import type { IptablesTable } from './fake.js';
import { flagValue, tokenize } from './tokens.js';
import { ProxyError } from '../../core/errors.js';

/** One rule the packet matched, in the order it was matched. */
export interface TraceStep {
  readonly table: IptablesTable;
  readonly chain: string;
  /** The rule text after `-A CHAIN `. */
  readonly rule: string;
  /** The `-m comment --comment` text (upstream puts the Service name there), or null. */
  readonly comment: string | null;
  /** -j/-g target, or null for a rule without one. */
  readonly target: string | null;
  /** Jump depth below the built-in chain (0 = a rule of the built-in chain). */
  readonly depth: number;
  /** Probability that a packet takes this rule (random endpoint choices on the way). */
  readonly probability: number;
}

/** A DNAT destination the packet may get, with its chance. */
export interface TraceCandidate {
  readonly endpoint: string;
  readonly probability: number;
  /** The chain holding the DNAT rule (KUBE-SEP-...). */
  readonly chain: string;
  readonly comment: string | null;
}

export type { TraceOptions, TracePacket, TraceVerdict } from '../trace.js';
export type TraceResult = TraceResultOf<TraceStep, TraceCandidate>;

export interface RuleSource {
  rules(table: IptablesTable, chain: string): readonly string[];
}

type Verdict = 'continue' | 'return' | 'terminal';
type Pkt = { src: string; dst: string; port: number; protocol: Protocol; iif?: string };

const VALUE_FLAGS = new Set([
  '--comment',
  '--nfacct-name',
  '--name',
  '--seconds',
  '--mode',
  '--to-destination',
  '--or-mark',
  '--xor-mark',
  '--set-xmark',
  '-j',
  '-g',
  '-m',
  '--probability',
  '--mark',
  '--mask',
  '--reject-with',
]);
const NO_VALUE_FLAGS = new Set(['--set', '--reap', '--rcheck', '--random-fully', '--random', '--rsource']);

class NotUnderstood extends ProxyError {
  constructor(what: string) {
    super('KPT_TRACE_FAILED', what);
  }
}

class Tracer {
  outputs: string[] = [];
  masq = false;
  dnat = false;
  matched: string[] = [];
  steps: TraceStep[] = [];
  candidates: TraceCandidate[] = [];
  notUnderstood: string[] = [];

  constructor(
    private readonly src: RuleSource,
    private readonly localIPs: readonly string[],
    private readonly strict: boolean,
  ) {}

  isLocal(ip: string): boolean {
    return isLocalAddress(ip, this.localIPs);
  }

  /** Walk a chain reached with probability `reach`. */
  runChain(table: IptablesTable, chain: string, pkt: Pkt, depth = 0, reach = 1): Verdict {
    if (depth > 32) throw new ProxyError('KPT_TRACE_FAILED', `tracer: jump loop at ${table}/${chain}`);
    let remaining = reach;
    for (const rule of this.src.rules(table, chain)) {
      const tokens = tokenize(rule);
      if (!tokens) throw new ProxyError('KPT_TRACE_FAILED', `tracer: cannot tokenize ${rule}`);
      if (!this.matchesOrSkip(table, chain, rule, tokens, pkt)) continue;
      const p = flagValue(tokens, '--probability');
      const taken = p === null ? remaining : remaining * Number(p);
      if (p !== null) remaining -= taken;
      this.matched.push(`${table}/${chain}: ${rule}`);
      const target = flagValue(tokens, '-j') ?? flagValue(tokens, '-g');
      this.steps.push({
        table,
        chain,
        rule,
        comment: flagValue(tokens, '--comment'),
        target,
        depth,
        probability: taken,
      });
      const v = this.act(table, chain, tokens, pkt, depth, taken);
      if (v !== 'continue') return v;
    }
    return 'continue';
  }

  private matchesOrSkip(table: IptablesTable, chain: string, rule: string, tokens: string[], pkt: Pkt): boolean {
    try {
      return this.matches(tokens, pkt);
    } catch (e) {
      if (this.strict || !(e instanceof NotUnderstood)) throw e;
      this.notUnderstood.push(`${table}/${chain}: ${rule}`);
      return false;
    }
  }

  private act(table: IptablesTable, chain: string, tokens: string[], pkt: Pkt, depth: number, taken: number): Verdict {
    const ji = tokens.findIndex((t) => t === '-j' || t === '-g');
    if (ji < 0) return 'continue';
    const target = tokens[ji + 1]!;
    switch (target) {
      case 'MARK':
        if (tokens.includes('--or-mark') || isOrXmark(flagValue(tokens, '--set-xmark'))) this.masq = true;
        return 'continue';
      case 'DNAT': {
        const endpoint = flagValue(tokens, '--to-destination')!;
        this.outputs.push(endpoint);
        this.candidates.push({ endpoint, probability: taken, chain, comment: flagValue(tokens, '--comment') });
        return 'terminal';
      }
      case 'ACCEPT':
      case 'DROP':
      case 'REJECT':
        this.outputs.push(target);
        return 'terminal';
      case 'RETURN':
        return 'return';
      case 'MASQUERADE':
      case 'SNAT':
        return 'continue';
    }
    // Other targets are chains (an extension target we do not know, e.g. LOG
    // in a foreign rule, has no rules here and so does nothing).
    const v = this.runChain(table, target, pkt, depth + 1, taken);
    if (v === 'terminal' && !tokens.includes('--probability')) return 'terminal';
    if (tokens[ji] === '-g') return 'return';
    return 'continue';
  }

  private matches(tokens: string[], pkt: Pkt): boolean {
    let neg = false;
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i]!;
      const val = tokens[i + 1] ?? '';
      let ok: boolean | null = null;
      switch (t) {
        case '!':
          neg = true;
          continue;
        case '-A':
        case '-I':
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
        case '--dport':
          ok = Number(val) === pkt.port;
          i++;
          break;
        case '--src-type':
          ok = val === 'LOCAL' ? this.isLocal(pkt.src) : false;
          i++;
          break;
        case '--dst-type':
          ok = val === 'LOCAL' ? this.isLocal(pkt.dst) : false;
          i++;
          break;
        case '-i':
          ok = ifaceMatch(val, pkt.iif);
          i++;
          break;
        case '--ctstate': {
          const states = new Set(this.dnat ? ['NEW', 'DNAT'] : ['NEW']);
          ok = val.split(',').some((s) => states.has(s));
          i++;
          break;
        }
        default:
          if (t === '-m' && val === 'mark') return false; // upstream: mark matches never match
          if (t === '--rcheck') return false; // no affinity state in a trace
          if (VALUE_FLAGS.has(t)) {
            i++;
            continue;
          }
          if (NO_VALUE_FLAGS.has(t)) continue;
          if (this.strict)
            throw new ProxyError('KPT_TRACE_FAILED', `tracer: unknown rule option ${t} in: ${tokens.join(' ')}`);
          throw new NotUnderstood(t);
      }
      if (ok === neg) return false; // the option failed (or matched under "!")
      neg = false;
    }
    return true;
  }
}

/** `--set-xmark V/M` with V == M != 0 sets bits V: what iptables-save prints for --or-mark. */
function isOrXmark(v: string | null): boolean {
  if (v === null) return false;
  const [value, mask] = v.split('/');
  return mask !== undefined && Number(value) !== 0 && Number(value) === Number(mask);
}

function addrMatch(spec: string, ip: string): boolean {
  if (spec.includes('/')) {
    const c = parseCIDR(spec);
    return c !== null && cidrContains(c, ip);
  }
  const a = parseIP(spec);
  return a !== null && a.text === parseIP(ip)?.text;
}

function ifaceMatch(spec: string, iif: string | undefined): boolean {
  if (iif === undefined) return false;
  return spec.endsWith('+') ? iif.startsWith(spec.slice(0, -1)) : iif === spec;
}

function hostOf(endpoint: string): string {
  if (endpoint.startsWith('[')) return endpoint.slice(1, endpoint.indexOf(']'));
  return endpoint.slice(0, endpoint.lastIndexOf(':'));
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
  const pkt: Pkt = { ...packet, protocol: packet.protocol ?? 'TCP' };
  const srcLocal = tr.isLocal(pkt.src);
  if (srcLocal) delete pkt.iif;
  tr.runChain('nat', srcLocal ? 'OUTPUT' : 'PREROUTING', pkt);
  if (tr.outputs.length > 0) {
    pkt.dst = hostOf(tr.outputs[0]!);
    tr.dnat = true;
  }
  const dstLocal = tr.isLocal(pkt.dst);
  const hooks = srcLocal ? ['OUTPUT', ...(dstLocal ? ['INPUT'] : [])] : [dstLocal ? 'INPUT' : 'FORWARD'];
  for (const hook of hooks) {
    const before = tr.outputs.length;
    tr.runChain('filter', hook, pkt);
    const last = tr.outputs[tr.outputs.length - 1];
    if (tr.outputs.length > before && (last === 'DROP' || last === 'REJECT')) break;
  }
  return traceResult(tr);
}
