// nftables side of `explain`: read the live kube-proxy table (`nft list
// table` for chains and rules, `nft -j list table` for the sets' and maps'
// elements), load it into the nftables Fake (listing.ts) and walk the
// packet with the pure tracer (src/dataplane/nftables/trace.ts), lenient
// about rules it cannot read.
import type { IPFamily } from '../core/types.js';
import { loadNftTable, parseElementsJSON, parseNftListing } from '../dataplane/nftables/listing.js';
import { nftFamily, TABLE_NAME } from '../dataplane/nftables/names.js';
import type { Fake } from '../dataplane/nftables/fake.js';
import { trace } from '../dataplane/nftables/trace.js';
import type { CommandRunner } from '../platform/exec.js';
import type { ExplainRequest } from './explain.js';
import { serviceFromComment, summarize, type Explanation } from './explainview.js';

/** The live kube-proxy table of one family as a Fake. */
export async function readLiveNftTable(run: CommandRunner, family: IPFamily): Promise<Fake> {
  const fam = nftFamily(family);
  const text = (await run('nft', ['list', 'table', fam, TABLE_NAME])).stdout;
  const json = (await run('nft', ['-j', 'list', 'table', fam, TABLE_NAME])).stdout;
  return loadNftTable(fam, parseNftListing(text), parseElementsJSON(json, TABLE_NAME));
}

/** "ns/name:port" from a chain name such as service-KU4RYVEW-ns1/s0/tcp/http. */
function serviceFromChain(chain: string): string | null {
  const m = /^(?:service|external|local|firewall)-[A-Z0-9]{8}-([^/]+)\/([^/]+)\/[a-z]+\/(.*)$/.exec(chain);
  return m ? `${m[1]}/${m[2]}:${m[3]}` : null;
}

export async function explainNftables(
  run: CommandRunner,
  req: ExplainRequest,
  family: IPFamily,
  localIPs: readonly string[],
): Promise<Explanation> {
  const fake = await readLiveNftTable(run, family);
  const r = trace(
    fake,
    { src: req.src, dst: req.dst, port: req.port, protocol: req.protocol, ...(req.iif ? { iif: req.iif } : {}) },
    localIPs,
    { strict: false },
  );
  const service =
    r.steps.map((s) => serviceFromChain(s.chain) ?? serviceFromComment(s.comment)).find((x) => x !== null) ?? null;
  const candidates = r.candidates.map((c) => ({ endpoint: c.endpoint, probability: c.probability }));
  return {
    mode: 'nftables',
    packet: { src: req.src, dst: req.dst, port: req.port, protocol: req.protocol },
    service,
    verdict: r.verdict,
    candidates,
    masquerade: r.masq && r.verdict === 'DNAT',
    steps: r.steps.map((s) => ({
      where: s.chain,
      rule: s.comment === null ? s.rule : `${s.rule} comment "${s.comment}"`,
      comment: s.comment,
      depth: s.depth,
      probability: s.probability,
    })),
    notUnderstood: r.notUnderstood,
    summary: summarize(service, r.verdict, candidates, r.masq),
  };
}
