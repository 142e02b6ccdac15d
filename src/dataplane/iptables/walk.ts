// walk: the iptables rule walker of both modes that write iptables rules:
// this mode's tracer (trace.ts) and IPVS mode's (../ipvs/trace.ts), which
// walks the rules it keeps beside its virtual servers. IptablesWalk.run
// walks one chain of a rule source as netfilter does: rules in order, -j
// into a chain and back, -g without coming back, RETURN, and the terminal
// targets (DNAT, ACCEPT, DROP, REJECT, MASQUERADE, SNAT), and reports each
// matched rule as a step. What a mode needs beyond plain iptables (IPVS:
// `-m set` against its ipsets, `-m ipvs`) it passes as a match hook.
//
// Matching, as upstream's iptablesTracer (pkg/proxy/iptables/proxier_test.go):
// `-m recent --rcheck` never matches (a trace has no affinity state),
// probability rules fall through so every endpoint is collected (each step
// carries the chance of reaching it), conntrack state is NEW, plus DNAT once
// the caller says nat rewrote the destination, and `-m physdev` sees no
// bridge port. A MARK that sets bits (KUBE-MARK-MASQ: --or-mark, or
// --set-xmark V/V as iptables-save prints it) sets `masq`; the mark itself is
// tracked too, for the modes that read it back (IptablesWalkOptions.marks).
// Pure.

import { TraceCollector, type TraceOptions, type WalkedPacket } from '../trace.js';
import { cidrContains, parseCIDR, parseIP } from '../../core/ip.js';
import type { IptablesTable } from './fake.js';
import { flagValue, tokenize } from './tokens.js';

/** One rule the packet matched, in the order it was matched. */
export interface RuleStep {
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
export interface DnatCandidate {
  readonly endpoint: string;
  readonly probability: number;
  /** The chain holding the DNAT rule (KUBE-SEP-...). */
  readonly chain: string;
  readonly comment: string | null;
}

/** What the walker reads: the iptables Fake, or anything holding one. */
export interface ChainSource {
  rules(table: IptablesTable, chain: string): readonly string[];
}

/** How a chain walk ended: on to the next rule, back to the caller's chain, or a verdict. */
export type WalkVerdict = 'continue' | 'return' | 'terminal';

/** A match option a mode reads itself: whether it matched, and how many values after it were its own. */
export interface HookedMatch {
  readonly ok: boolean;
  readonly values: number;
}

export interface IptablesWalkOptions<Step, P extends WalkedPacket> {
  /**
   * How `-m mark --mark` reads. 'never': it does not match, as in upstream's
   * tracer (the iptables mode's mark checks sit in POSTROUTING, which its
   * trace does not walk, and KUBE-MARK-MASQ only says "masquerade").
   * 'tracked': against the mark the MARK rules on the way set (IPVS mode,
   * whose POSTROUTING decides masquerade per real server).
   */
  readonly marks: 'never' | 'tracked';
  /** A matched rule as the mode reports it. */
  readonly step: (s: RuleStep) => Step;
  /** Options the walker does not know; undefined for one the mode does not know either. */
  readonly match?: (option: string, tokens: readonly string[], i: number, pkt: P) => HookedMatch | undefined;
}

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
  '--mask',
  '--reject-with',
]);
const NO_VALUE_FLAGS = new Set(['--set', '--reap', '--random-fully', '--random', '--rsource']);

/** A walk through iptables chains; what it collects is in the TraceCollector fields. */
export class IptablesWalk<Step, P extends WalkedPacket = WalkedPacket> extends TraceCollector<Step, DnatCandidate> {
  constructor(
    private readonly src: ChainSource,
    localIPs: readonly string[],
    opts: TraceOptions,
    private readonly how: IptablesWalkOptions<Step, P>,
  ) {
    super(localIPs, opts);
  }

  /** Walk `table`/`chain`, reached with probability `reach`, `depth` jumps below a built-in chain. */
  run(table: IptablesTable, chain: string, pkt: P, depth = 0, reach = 1): WalkVerdict {
    const where = `${table}/${chain}`;
    this.enter(depth, where);
    let remaining = reach;
    for (const rule of this.src.rules(table, chain)) {
      const tokens = this.readRule(where, rule, () => this.matching(rule, pkt), null);
      if (tokens === null) continue;
      const p = flagValue(tokens, '--probability');
      const taken = p === null ? remaining : remaining * Number(p);
      if (p !== null) remaining -= taken;
      const target = flagValue(tokens, '-j') ?? flagValue(tokens, '-g');
      const comment = flagValue(tokens, '--comment');
      this.record(where, rule, this.how.step({ table, chain, rule, comment, target, depth, probability: taken }));
      const v = this.act(table, chain, tokens, pkt, depth, taken);
      if (v !== 'continue') return v;
    }
    return 'continue';
  }

  private act(
    table: IptablesTable,
    chain: string,
    tokens: string[],
    pkt: P,
    depth: number,
    taken: number,
  ): WalkVerdict {
    const ji = tokens.findIndex((t) => t === '-j' || t === '-g');
    if (ji < 0) return 'continue';
    const target = tokens[ji + 1]!;
    switch (target) {
      case 'MARK':
        this.setMark(tokens);
        return 'continue';
      case 'DNAT': {
        const endpoint = flagValue(tokens, '--to-destination')!;
        this.outputs.push(endpoint);
        this.candidates.push({ endpoint, probability: taken, chain, comment: flagValue(tokens, '--comment') });
        return 'terminal';
      }
      case 'ACCEPT':
        // In nat it only ends the table's traversal; in filter it is the hook's verdict.
        if (table !== 'nat') this.outputs.push(target);
        return 'terminal';
      case 'DROP':
      case 'REJECT':
        this.outputs.push(target);
        return 'terminal';
      case 'RETURN':
        return 'return';
      case 'MASQUERADE':
      case 'SNAT':
        return 'terminal';
    }
    // Other targets are chains (an extension target we do not know, e.g. LOG
    // in a foreign rule, has no rules here and so does nothing).
    const v = this.run(table, target, pkt, depth + 1, taken);
    if (v === 'terminal' && !tokens.includes('--probability')) return 'terminal';
    if (tokens[ji] === '-g') return 'return';
    return 'continue';
  }

  private setMark(tokens: string[]): void {
    const or = flagValue(tokens, '--or-mark');
    const xor = flagValue(tokens, '--xor-mark');
    const xmark = flagValue(tokens, '--set-xmark');
    if (or !== null) {
      this.mark |= Number(or);
      this.masq = true;
    } else if (xor !== null) this.mark ^= Number(xor);
    else if (xmark !== null) {
      const [v, m] = xmark.split('/').map(Number);
      this.mark = (this.mark & ~(m ?? 0xffffffff)) ^ (v ?? 0);
      // V/V with V != 0 sets bits V: what iptables-save prints for --or-mark.
      if (m !== undefined && v !== 0 && v === m) this.masq = true;
    }
  }

  /** The rule's tokens when the packet matches it, else null. */
  private matching(rule: string, pkt: P): string[] | null {
    const tokens = tokenize(rule);
    if (!tokens) return this.fail(`cannot tokenize ${rule}`);
    return this.matches(tokens, pkt) ? tokens : null;
  }

  private matches(tokens: string[], pkt: P): boolean {
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
          ok = val === 'LOCAL' && this.isLocal(pkt.src);
          i++;
          break;
        case '--dst-type':
          ok = val === 'LOCAL' && this.isLocal(pkt.dst);
          i++;
          break;
        case '-i':
          ok = pkt.iif !== undefined && (val.endsWith('+') ? pkt.iif.startsWith(val.slice(0, -1)) : pkt.iif === val);
          i++;
          break;
        case '--ctstate': {
          const states = new Set(this.dnat ? ['NEW', 'DNAT'] : ['NEW']);
          ok = val.split(',').some((s) => states.has(s));
          i++;
          break;
        }
        case '--mark': {
          if (this.how.marks === 'never') return false;
          const [v, m] = val.split('/').map(Number);
          ok = (this.mark & (m ?? 0xffffffff)) === v;
          i++;
          break;
        }
        case '--rcheck':
          return false; // no affinity state in a trace
        case '--physdev-is-in':
          ok = false; // a trace has no bridge port
          break;
        default: {
          if (VALUE_FLAGS.has(t)) {
            i++;
            continue;
          }
          if (NO_VALUE_FLAGS.has(t)) continue;
          const hooked = this.how.match?.(t, tokens, i, pkt);
          if (hooked === undefined) return this.fail(`unknown rule option ${t} in: ${tokens.join(' ')}`);
          ok = hooked.ok;
          i += hooked.values;
        }
      }
      if (ok === neg) return false; // the option failed (or matched under "!")
      neg = false;
    }
    return true;
  }
}

function addrMatch(spec: string, ip: string): boolean {
  if (spec.includes('/')) {
    const c = parseCIDR(spec);
    return c !== null && cidrContains(c, ip);
  }
  const a = parseIP(spec);
  return a !== null && a.text === parseIP(ip)?.text;
}
