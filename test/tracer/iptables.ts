// Packet tracer over a FakeIptables, after upstream's iptablesTracer
// (pkg/proxy/iptables/proxier_test.go, reference 5.2), but walking the real
// hook path from the built-in chains instead of calling kube-proxy's chains
// directly, so the jump rules are exercised too:
//   nat PREROUTING (remote source) or nat OUTPUT (node-local source, like
//   upstream's --src-type LOCAL), then the DNAT rewrites the destination, then
//   filter OUTPUT (local source) and/or INPUT (local destination) or FORWARD.
// Like upstream: `-m recent --rcheck` and `-m mark` never match, probability
// rules fall through so every endpoint is collected ("ep1, ep2"), and
// KUBE-MARK-MASQ (a MARK --or-mark) sets masq. Conntrack state is NEW, plus
// DNAT once nat rewrote the destination. Unknown options throw: the tracer
// must understand every rule the renderer writes.

import { cidrContains, isLoopback, parseCIDR, parseIP } from '../../src/core/ip.js';
import type { Protocol } from '../../src/core/types.js';
import type { FakeIptables, IptablesTable } from '../../src/dataplane/iptables/fake.js';
import { tokenize } from '../../src/dataplane/iptables/tokens.js';

export interface TracePacket {
  readonly src: string;
  readonly dst: string;
  readonly port: number;
  readonly protocol?: Protocol;
  /** Input interface, for the bridge/prefix local detectors (remote sources only). */
  readonly iif?: string;
}

export interface TraceResult {
  /** "" | "ip:port, ip:port" | "REJECT" | "DROP" | "ACCEPT" (joined in rule order). */
  readonly output: string;
  readonly masq: boolean;
  /** Rules that matched, as "table/chain: rule". */
  readonly matched: readonly string[];
}

type Verdict = 'continue' | 'return' | 'terminal';

const VALUE_FLAGS = new Set(['--comment', '--nfacct-name', '--name', '--seconds', '--mode', '--to-destination',
  '--or-mark', '--xor-mark', '-j', '-g', '-m', '--probability', '--mark']);
const NO_VALUE_FLAGS = new Set(['--set', '--reap', '--rcheck', '--random-fully', '--random']);

class Tracer {
  outputs: string[] = [];
  masq = false;
  dnat = false;
  matched: string[] = [];

  constructor(private readonly fake: FakeIptables, private readonly localIPs: readonly string[]) {}

  isLocal(ip: string): boolean {
    const p = parseIP(ip);
    if (!p) return false;
    return isLoopback(p) || this.localIPs.some((l) => parseIP(l)?.text === p.text);
  }

  runChain(table: IptablesTable, chain: string, pkt: Required<Omit<TracePacket, 'iif'>> & { iif?: string }, depth = 0): Verdict {
    if (depth > 32) throw new Error(`tracer: jump loop at ${table}/${chain}`);
    for (const rule of this.fake.rules(table, chain)) {
      const tokens = tokenize(rule);
      if (!tokens) throw new Error(`tracer: cannot tokenize ${rule}`);
      if (!this.matches(tokens, pkt)) continue;
      this.matched.push(`${table}/${chain}: ${rule}`);
      const v = this.act(table, tokens, pkt, depth);
      if (v !== 'continue') return v;
    }
    return 'continue';
  }

  private act(table: IptablesTable, tokens: string[], pkt: Required<Omit<TracePacket, 'iif'>> & { iif?: string }, depth: number): Verdict {
    const ji = tokens.findIndex((t) => t === '-j' || t === '-g');
    if (ji < 0) return 'continue';
    const target = tokens[ji + 1]!;
    switch (target) {
      case 'MARK':
        if (tokens.includes('--or-mark')) this.masq = true;
        return 'continue';
      case 'DNAT':
        this.outputs.push(tokens[tokens.indexOf('--to-destination') + 1]!);
        return 'terminal';
      case 'ACCEPT': case 'DROP': case 'REJECT':
        this.outputs.push(target);
        return 'terminal';
      case 'RETURN':
        return 'return';
      case 'MASQUERADE': case 'SNAT':
        return 'continue';
    }
    const v = this.runChain(table, target, pkt, depth + 1);
    if (v === 'terminal' && !tokens.includes('--probability')) return 'terminal';
    if (tokens[ji] === '-g') return 'return';
    return 'continue';
  }

  private matches(tokens: string[], pkt: Required<Omit<TracePacket, 'iif'>> & { iif?: string }): boolean {
    let neg = false;
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i]!;
      const val = tokens[i + 1] ?? '';
      let ok: boolean | null = null;
      switch (t) {
        case '!': neg = true; continue;
        case '-A': case '-I': i++; continue;
        case '-s': ok = addrMatch(val, pkt.src); i++; break;
        case '-d': ok = addrMatch(val, pkt.dst); i++; break;
        case '-p': ok = val.toLowerCase() === pkt.protocol.toLowerCase(); i++; break;
        case '--dport': ok = Number(val) === pkt.port; i++; break;
        case '--src-type': ok = val === 'LOCAL' ? this.isLocal(pkt.src) : false; i++; break;
        case '--dst-type': ok = val === 'LOCAL' ? this.isLocal(pkt.dst) : false; i++; break;
        case '-i': ok = ifaceMatch(val, pkt.iif); i++; break;
        case '--ctstate': {
          const states = new Set(this.dnat ? ['NEW', 'DNAT'] : ['NEW']);
          ok = val.split(',').some((s) => states.has(s));
          i++;
          break;
        }
        default:
          if (t === '-m' && (val === 'mark')) return false; // upstream: mark matches never match
          if (t === '--rcheck') return false; // no affinity state in a trace
          if (VALUE_FLAGS.has(t)) { i++; continue; }
          if (NO_VALUE_FLAGS.has(t)) continue;
          throw new Error(`tracer: unknown rule option ${t} in: ${tokens.join(' ')}`);
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
export function tracePacket(fake: FakeIptables, packet: TracePacket, localIPs: readonly string[]): TraceResult {
  const tr = new Tracer(fake, localIPs);
  const pkt = { ...packet, protocol: packet.protocol ?? 'TCP' };
  const srcLocal = tr.isLocal(pkt.src);
  if (srcLocal) delete (pkt as { iif?: string }).iif;
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
  return { output: tr.outputs.join(', '), masq: tr.masq, matched: tr.matched };
}

/**
 * Upstream sortIPTablesRules (the normaliser of assertIPTablesRulesEqual):
 * per table, chain lines then rules grouped by chain; KUBE-NODEPORTS and
 * KUBE-SERVICES first, other chains alphabetically; rule order inside a chain
 * is kept; `-X <chain>` lines come last, sorted.
 */
export function sortRestoreText(text: string): string {
  const first = ['KUBE-NODEPORTS', 'KUBE-SERVICES'];
  const order = (a: string, b: string) => {
    const ia = first.indexOf(a), ib = first.indexOf(b);
    if (ia >= 0 || ib >= 0) return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib);
    return a < b ? -1 : a > b ? 1 : 0;
  };
  let out = '';
  for (const table of text.split('COMMIT\n').filter((t) => t.trim() !== '')) {
    const lines = table.split('\n').filter((l) => l !== '');
    const header = lines.filter((l) => l.startsWith('*'));
    const chains = lines.filter((l) => l.startsWith(':')).map((l) => l.slice(1).split(' ')[0]!);
    const byChain = new Map<string, string[]>();
    const deletes = lines.filter((x) => x.startsWith('-X ')).sort();
    for (const l of lines.filter((x) => x.startsWith('-A '))) {
      const c = l.split(' ')[1]!;
      byChain.set(c, [...(byChain.get(c) ?? []), l]);
    }
    out += header.join('\n') + '\n';
    out += [...chains].sort(order).map((c) => `:${c} - [0:0]\n`).join('');
    out += [...byChain.keys()].sort(order).map((c) => byChain.get(c)!.join('\n') + '\n').join('');
    out += deletes.map((l) => l + '\n').join('');
    out += 'COMMIT\n';
  }
  return out;
}
