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
import type { LbAlgorithm } from '../core/lbalgorithm.js';
import { Fake as IptablesFake } from '../dataplane/iptables/fake.js';
import { trace as traceIptables } from '../dataplane/iptables/trace.js';
import { loadNftTable, parseElementsJSON, parseNftListing, tableBlock } from '../dataplane/nftables/listing.js';
import { nftFamily, TABLE_NAME } from '../dataplane/nftables/names.js';
import type { Fake as NftFake } from '../dataplane/nftables/fake.js';
import { trace as traceNftables } from '../dataplane/nftables/trace.js';
import type { TracePacket } from '../dataplane/trace.js';
import type { CommandRunner } from '../platform/exec.js';
import { serviceFromComment, summarize, type Explanation } from './explainview.js';

/** The live iptables rules of one family. */
export async function readIptablesRules(run: CommandRunner, family: IPFamily): Promise<IptablesFake> {
  const save = await run(family === 'IPv4' ? 'iptables-save' : 'ip6tables-save', []);
  return iptablesFromSave(save.stdout);
}

/** The live nftables kube-proxy table of one family. */
export async function readNftablesRules(run: CommandRunner, family: IPFamily): Promise<NftFake> {
  const fam = nftFamily(family);
  const text = (await run('nft', ['list', 'table', fam, TABLE_NAME])).stdout;
  const json = (await run('nft', ['-j', 'list', 'table', fam, TABLE_NAME])).stdout;
  return loadNftTable(fam, parseNftListing(text), parseElementsJSON(json, TABLE_NAME));
}

/** iptables-save output without the "[packets:bytes] " that `iptables-save -c` puts before rules. */
export function withoutCounters(save: string): string {
  return save.replace(/^\[\d+:\d+\]\s+(?=-A )/gm, '');
}

export function iptablesFromSave(text: string): IptablesFake {
  const fake = new IptablesFake();
  fake.load(withoutCounters(text));
  return fake;
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

/** The nftables rules of a dump file (its text, its name for messages) for the packet's family. */
export function nftablesFromDump(text: string, family: IPFamily, file: string): NftFake {
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
  return loadNftTable(fam, parseNftListing(block), elements);
}

/** "ns/name:port" from a chain name such as service-KU4RYVEW-ns1/s0/tcp/http. */
export function serviceFromChain(chain: string): string | null {
  const m = /^(?:service|external|local|firewall)-[A-Z0-9]{8}-([^/]+)\/([^/]+)\/[a-z]+\/(.*)$/.exec(chain);
  if (!m) return null;
  return m[3] === '' ? `${m[1]}/${m[2]}` : `${m[1]}/${m[2]}:${m[3]}`;
}

/** Walk one packet through iptables rules. */
export function traceIptablesRules(fake: IptablesFake, packet: TracePacket, localIPs: readonly string[]): Explanation {
  const r = traceIptables(fake, packet, localIPs, { strict: false });
  // iptables steps are table/chain, with the comment as a rule option.
  const steps = r.steps.map((s) => ({
    where: `${s.table}/${s.chain}`,
    rule: s.rule,
    comment: s.comment,
    depth: s.depth,
    probability: s.probability,
    service: serviceFromComment(s.comment),
  }));
  return ruleExplanation('iptables', packet, r, steps);
}

/** Walk one packet through the nftables kube-proxy table. */
export function traceNftablesRules(fake: NftFake, packet: TracePacket, localIPs: readonly string[]): Explanation {
  const r = traceNftables(fake, packet, localIPs, { strict: false });
  // nftables steps name their chain, which names the service.
  const steps = r.steps.map((s) => ({
    where: s.chain,
    rule: s.comment === null ? s.rule : `${s.rule} comment "${s.comment}"`,
    comment: s.comment,
    depth: s.depth,
    probability: s.probability,
    service: serviceFromChain(s.chain) ?? serviceFromComment(s.comment),
  }));
  return ruleExplanation('nftables', packet, r, steps);
}

interface RuleStep {
  readonly where: string;
  readonly rule: string;
  readonly comment: string | null;
  readonly depth: number;
  readonly probability: number;
  readonly service: string | null;
}

function ruleExplanation(
  mode: 'iptables' | 'nftables',
  packet: TracePacket,
  r: {
    verdict: Explanation['verdict'];
    masq: boolean;
    notUnderstood: Explanation['notUnderstood'];
    candidates: ReadonlyArray<{ endpoint: string; probability: number }>;
  },
  steps: readonly RuleStep[],
): Explanation {
  const service = steps.map((s) => s.service).find((x) => x !== null) ?? null;
  const candidates = r.candidates.map((c) => ({ endpoint: c.endpoint, probability: c.probability }));
  const algorithm = mode === 'nftables' ? steps.map((s) => nftAlgorithm(s.rule)).find((a) => a !== null) : undefined;
  return {
    mode,
    packet: { src: packet.src, dst: packet.dst, port: packet.port, protocol: packet.protocol ?? 'TCP' },
    service,
    verdict: r.verdict,
    candidates,
    masquerade: r.masq && r.verdict === 'DNAT',
    steps: steps.map(({ service: _s, ...step }) => step),
    notUnderstood: r.notUnderstood,
    summary: summarize(service, r.verdict, candidates, r.masq, algorithm ?? 'random'),
    ...(algorithm ? { algorithm } : {}),
  };
}

/** The choice an nftables endpoint rule makes, when it is not upstream's numgen random (serviceport.ts). */
function nftAlgorithm(rule: string): LbAlgorithm | null {
  if (/\bnumgen inc mod /.test(rule)) return 'round-robin';
  if (/\bjhash ip6? saddr \. th sport mod /.test(rule)) return 'maglev';
  if (/\bjhash ip6? saddr mod /.test(rule)) return 'source-hash';
  return null;
}
