// How we hand a restore input to iptables-restore without paying iptables-nft's
// quadratic cache-request cost. Measured facts (bench/README.md, iptables 1.8.9
// nf_tables backend):
//
// * In --noflush mode iptables-nft fetches only the chains the input names. For
//   every command it records the command's chain and jump target in
//   nft_cache_level_set() -> cache_chain_list_insert(), a SORTED LINKED LIST
//   walked with strcmp from the head. That costs O(rules x chains): 60k chains
//   and 170k rules (10k Services x 5 endpoints) spend minutes in strcmp
//   (the perf profile is under iptables-sync in bench/README.md).
// * A command that names no chain sets cache_req.all_chains, after which
//   cache_chain_list_insert is never called again for that table section and
//   the whole table is fetched instead. `-S` (list rules of every chain in
//   the table) is such a command and changes nothing: it only prints. Placed
//   first in the `*nat` section, it turns the restore linear. Its price is
//   fetching (and printing, which we discard) every rule already in the
//   table, so it only pays when the input names many chains.
//
// The result is byte-for-byte the same ruleset (checked by the kernel test
// and the benchmark); no rule we do not own is read-modified-written.

/**
 * Fetching (and printing) one existing nat rule costs about as much as this
 * many steps of iptables-nft's sorted-list walk, as calibrated under
 * iptables-sync in bench/README.md. Biased towards the plain path, which is
 * what upstream does.
 */
export const WHOLE_TABLE_COST_FACTOR = 1500;

/** Counts of the nat section that drive the cost model. */
export interface NatInputShape {
  /** `-A`/`-X` lines in the nat section. */
  readonly commands: number;
  /** Distinct chain names the section mentions (declared or jumped to), approximated. */
  readonly chainNames: number;
  /** Rules expected in the nat table (what the full fetch must read). */
  readonly tableRules: number;
}

/**
 * True when requesting the whole-table cache is cheaper than iptables-nft's
 * per-chain list: commands x chainNames / 2 strcmp steps against roughly
 * tableRules x WHOLE_TABLE_COST_FACTOR / 2 (the halves cancel).
 */
export function wholeTableCachePays(s: NatInputShape): boolean {
  return s.commands * s.chainNames > s.tableRules * WHOLE_TABLE_COST_FACTOR;
}

/**
 * Insert the no-op `-S` after the `*nat` header (and after any other table
 * header listed) so that iptables-nft requests the whole table's cache.
 * Returns the text unchanged when the header is missing.
 */
export function withWholeTableCache(text: string, tables: readonly string[] = ['nat']): string {
  return insertAfterHeaders([text], Object.fromEntries(tables.map((t) => [t, ['-S']]))).join('');
}

/**
 * The restore input as pieces (whole-line text in order, as the renderer
 * built it), with `lines` inserted right after the header of each named
 * table section (`*nat` -> ['-S', ':KUBE-PROXY-CANARY - [0:0]']); a table
 * has one section, so only its first header counts. A header counts only at
 * the start of a line. Only the piece holding a header is split; the big
 * per-service pieces are passed through untouched, so the input is never
 * joined into one string (that would copy the whole ruleset once more per
 * step), and once every header is found the rest is not searched (at 10k
 * Services searching all of it held the event loop for 40-70 ms).
 */
export function insertAfterHeaders(
  parts: readonly string[],
  lines: Readonly<Partial<Record<string, readonly string[]>>>,
): string[] {
  const out: string[] = [];
  let atLineStart = true;
  const wanted = new Map<string, string>();
  for (const [table, add] of Object.entries(lines)) if (add && add.length > 0) wanted.set(table, add.join('\n') + '\n');
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    if (wanted.size === 0) {
      out.push(part);
      continue;
    }
    const cuts: Array<{ at: number; text: string }> = [];
    for (const [table, text] of wanted) {
      const header = `*${table}\n`;
      const at = atLineStart && part.startsWith(header) ? 0 : part.indexOf(`\n${header}`) + 1 || -1;
      if (at >= 0) {
        cuts.push({ at: at + header.length, text });
        wanted.delete(table);
      }
    }
    if (cuts.length === 0) out.push(part);
    else {
      cuts.sort((a, b) => a.at - b.at);
      let from = 0;
      for (const c of cuts) {
        out.push(part.slice(from, c.at), c.text);
        from = c.at;
      }
      out.push(part.slice(from));
    }
    if (part.length > 0) atLineStart = part.endsWith('\n');
  }
  return out;
}

/** Total length of the pieces (for logs and the cost of a restore). */
export function partsLength(parts: readonly string[]): number {
  let n = 0;
  for (const p of parts) n += p.length;
  return n;
}

/** True when `iptables --version` names the nf_tables backend (where the quirk lives). */
export function isNftBackend(version: string): boolean {
  return /\(nf_tables\)/.test(version);
}
