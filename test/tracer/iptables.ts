// Packet tracer over a FakeIptables for the tests: a thin wrapper of the pure
// tracer in src/dataplane/iptables/trace.ts (which see for the hook path and
// the upstream iptablesTracer rules it follows), always strict: an unknown
// rule option throws, the tracer must understand every rule the renderer
// writes. Also upstream's sortIPTablesRules for golden comparisons.

import type { FakeIptables } from '../../src/dataplane/iptables/fake.js';
import { tracePacket as traceRules, type TracePacket } from '../../src/dataplane/iptables/trace.js';

export type { TracePacket };

/** What the tests compare (the full result also has steps, verdict and candidates). */
export interface TraceResult {
  /** "" | "ip:port, ip:port" | "REJECT" | "DROP" | "ACCEPT" (joined in rule order). */
  readonly output: string;
  readonly masq: boolean;
  /** Rules that matched, as "table/chain: rule". */
  readonly matched: readonly string[];
}

/**
 * Trace one new connection's first packet. `localIPs` are the node's
 * addresses (loopback is always local).
 */
export function tracePacket(fake: FakeIptables, packet: TracePacket, localIPs: readonly string[]): TraceResult {
  const r = traceRules(fake, packet, localIPs, { strict: true });
  return { output: r.output, masq: r.masq, matched: r.matched };
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
    const ia = first.indexOf(a),
      ib = first.indexOf(b);
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
    out += [...chains]
      .sort(order)
      .map((c) => `:${c} - [0:0]\n`)
      .join('');
    out += [...byChain.keys()]
      .sort(order)
      .map((c) => byChain.get(c)!.join('\n') + '\n')
      .join('');
    out += deletes.map((l) => l + '\n').join('');
    out += 'COMMIT\n';
  }
  return out;
}
