// The rules `explain` walks, for the two modes whose state is a ruleset:
// read from the kernel (iptables-save, `nft list table`) or from a saved dump
// (`explain --from FILE`: what a support engineer gets from a broken node),
// loaded into the mode's Fake, then traced with the mode's pure tracer,
// lenient about rules it cannot read.
//
// A dump file holds one of:
//   - `iptables-save` or `ip6tables-save` output (with or without -c
//     counters; one family per file);
//   - the nftables kube-proxy table: `nft list table ip kube-proxy` (or
//     `nft list ruleset`; only the kube-proxy table of the packet's family is
//     read) followed by the same command with -j, whose JSON carries the set
//     and map elements the text form prints in a shape we do not parse.
// Pure apart from the kernel reads.

import { ProxyError } from '../core/errors.js';
import type { IPFamily } from '../core/types.js';
import { Fake as IptablesFake } from '../dataplane/iptables/fake.js';
import { trace as traceIptables } from '../dataplane/iptables/trace.js';
import { loadNftTable, parseElementsJSON, parseNftListing, tableBlock } from '../dataplane/nftables/listing.js';
import { nftFamily, TABLE_NAME } from '../dataplane/nftables/names.js';
import type { Fake as NftFake } from '../dataplane/nftables/fake.js';
import { trace as traceNftables } from '../dataplane/nftables/trace.js';
import type { TracePacket } from '../dataplane/trace.js';
import type { CommandRunner } from '../platform/exec.js';
import { serviceFromComment, summarize, type Explanation } from './explainview.js';

/** A ruleset loaded for tracing. */
export type LoadedRules =
  { readonly mode: 'iptables'; readonly fake: IptablesFake } | { readonly mode: 'nftables'; readonly fake: NftFake };

/** The live rules of `mode` for one family. */
export async function readKernelRules(
  run: CommandRunner,
  mode: 'iptables' | 'nftables',
  family: IPFamily,
): Promise<LoadedRules> {
  if (mode === 'iptables') {
    const save = await run(family === 'IPv4' ? 'iptables-save' : 'ip6tables-save', []);
    return { mode, fake: iptablesFromSave(save.stdout) };
  }
  const fam = nftFamily(family);
  const text = (await run('nft', ['list', 'table', fam, TABLE_NAME])).stdout;
  const json = (await run('nft', ['-j', 'list', 'table', fam, TABLE_NAME])).stdout;
  return { mode, fake: loadNftTable(fam, parseNftListing(text), parseElementsJSON(json, TABLE_NAME)) };
}

/** iptables-save output without the "[packets:bytes] " that `iptables-save -c` puts before rules. */
export function withoutCounters(save: string): string {
  return save.replace(/^\[\d+:\d+\]\s+(?=-A )/gm, '');
}

function iptablesFromSave(text: string): IptablesFake {
  const fake = new IptablesFake();
  fake.load(withoutCounters(text));
  return fake;
}

/** Which mode a dump file is, or null when it is neither. */
export function dumpMode(text: string): 'iptables' | 'nftables' | null {
  if (/^\*(nat|filter|mangle|raw)\s*$/m.test(text)) return 'iptables';
  if (/^table ip6? kube-proxy \{/m.test(text)) return 'nftables';
  return null;
}

/** The set and map elements of one family's kube-proxy table from the dump's `nft -j` lines. */
function nftDumpElements(text: string, fam: string, file: string) {
  const items: unknown[] = [];
  let sawJSON = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith('{"nftables"')) continue;
    sawJSON = true;
    let doc: { nftables?: unknown[] };
    try {
      doc = JSON.parse(line) as { nftables?: unknown[] };
    } catch (err) {
      throw new ProxyError('KPT_INPUT_INVALID', `${file}: a line of nft -j output is not JSON: ${String(err)}`);
    }
    for (const it of doc.nftables ?? []) {
      const o = it as { set?: { family?: string }; map?: { family?: string } };
      const s = o.set ?? o.map;
      if (s === undefined || s.family === fam) items.push(it);
    }
  }
  return { sawJSON, elements: parseElementsJSON(JSON.stringify({ nftables: items }), TABLE_NAME) };
}

/** The rules of a dump file (its text, its name for messages) for the packet's family. */
export function rulesFromDump(text: string, family: IPFamily, file: string): LoadedRules {
  const mode = dumpMode(text);
  if (mode === null)
    throw new ProxyError(
      'KPT_INPUT_INVALID',
      `${file}: neither iptables-save output nor an nft listing of the kube-proxy table`,
    );
  if (mode === 'iptables') return { mode, fake: iptablesFromSave(text) };
  const fam = nftFamily(family);
  const block = tableBlock(text, fam);
  if (block === null)
    throw new ProxyError('KPT_INPUT_INVALID', `${file}: no "table ${fam} ${TABLE_NAME}" in the nft listing`);
  const { sawJSON, elements } = nftDumpElements(text, fam, file);
  if (!sawJSON)
    throw new ProxyError(
      'KPT_INPUT_INVALID',
      `${file}: the set and map elements are missing: append the output of nft -j list table ${fam} ${TABLE_NAME}`,
    );
  return { mode, fake: loadNftTable(fam, parseNftListing(block), elements) };
}

/** "ns/name:port" from a chain name such as service-KU4RYVEW-ns1/s0/tcp/http. */
export function serviceFromChain(chain: string): string | null {
  const m = /^(?:service|external|local|firewall)-[A-Z0-9]{8}-([^/]+)\/([^/]+)\/[a-z]+\/(.*)$/.exec(chain);
  if (!m) return null;
  return m[3] === '' ? `${m[1]}/${m[2]}` : `${m[1]}/${m[2]}:${m[3]}`;
}

/** Walk one packet through loaded rules. */
export function traceRules(rules: LoadedRules, packet: TracePacket, localIPs: readonly string[]): Explanation {
  const protocol = packet.protocol ?? 'TCP';
  const opts = { strict: false };
  const r =
    rules.mode === 'iptables'
      ? traceIptables(rules.fake, packet, localIPs, opts)
      : traceNftables(rules.fake, packet, localIPs, opts);
  // iptables steps are table/chain with the comment as a rule option; nftables steps name their chain.
  const steps = r.steps.map((s) => {
    const ipt = 'table' in s;
    return {
      where: ipt ? `${s.table}/${s.chain}` : s.chain,
      rule: ipt || s.comment === null ? s.rule : `${s.rule} comment "${s.comment}"`,
      comment: s.comment,
      depth: s.depth,
      probability: s.probability,
      service: (ipt ? null : serviceFromChain(s.chain)) ?? serviceFromComment(s.comment),
    };
  });
  const service = steps.map((s) => s.service).find((x) => x !== null) ?? null;
  const candidates = r.candidates.map((c) => ({ endpoint: c.endpoint, probability: c.probability }));
  return {
    mode: rules.mode,
    packet: { src: packet.src, dst: packet.dst, port: packet.port, protocol },
    service,
    verdict: r.verdict,
    candidates,
    masquerade: r.masq && r.verdict === 'DNAT',
    steps: steps.map(({ service: _s, ...step }) => step),
    notUnderstood: r.notUnderstood,
    summary: summarize(service, r.verdict, candidates, r.masq),
  };
}
