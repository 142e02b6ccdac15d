// sortRestoreText: the normaliser upstream's iptables tests compare restore
// payloads with (sortIPTablesRules, used by assertIPTablesRulesEqual in
// pkg/proxy/iptables/proxier_test.go), so our goldens can be written in the
// same order as upstream's expectations. Test-only.

/**
 * Per table: chain lines, then rules grouped by chain; KUBE-NODEPORTS and
 * KUBE-SERVICES first, other chains alphabetically; rule order inside a
 * chain is kept; `-X <chain>` lines come last, sorted.
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
