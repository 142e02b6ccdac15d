// userspace side of `explain`: the `kube-proxy-userspace` table (read from
// the kernel with `nft list table`, or from a saved listing) is loaded into
// an nftables Fake of that table (../dataplane/nftables/listing.ts), and the
// packet is walked with the mode's tracer to the listener it is redirected
// to. Which endpoints that listener's relay picks
// from lives only inside the proxy process: it is asked for them through its
// status document (`kube-proxy-ts status -o json`, i.e. /statusz on the
// metrics address), and the listener port is matched to the Service address
// that the table sends there. Without the proxy the walk still ends at the
// listener, and a note says the endpoints are unknown.

import { CANARY_SERVICE_PORT_KEY } from '../../../core/canary.js';
import { ProxyError } from '../../../core/errors.js';
import { joinHostPort } from '../../../core/ip.js';
import type { IPFamily } from '../../../core/types.js';
import type { Fake as NftFake } from '../../../dataplane/nftables/fake.js';
import { loadNftTable, parseNftListing, tableBlock } from '../../../dataplane/nftables/listing.js';
import { nftFamily, type NftFamily } from '../../../dataplane/nftables/names.js';
import {
  NODEPORT_PORTALS,
  SERVICE_PORTALS,
  TABLE_NAME,
  trace,
  type FakeListener,
} from '../../../dataplane/userspace/index.js';
import type { TracePacket } from '../../../dataplane/trace.js';
import type { StatusDoc } from '../../../engine/statusview.js';
import { summarize, type Explanation } from '../../explainview.js';

/** The userspace table of an nft text listing (`nft list table` or `nft list ruleset`) in a Fake, or null. */
export function userspaceTableFromListing(text: string, fam: NftFamily): NftFake | null {
  const block = tableBlock(text, fam, TABLE_NAME);
  if (block === null) return null;
  const listing = parseNftListing(block, true);
  return loadNftTable(fam, listing, listing.elements!, TABLE_NAME);
}

/**
 * The listeners the table redirects to, with the endpoints the proxy reports
 * for the Service address behind each (internal traffic for a cluster IP,
 * external for node ports, external and load-balancer IPs).
 */
export function listenersFrom(table: NftFake, status: StatusDoc | null, family: IPFamily): Map<string, FakeListener> {
  const byPort = new Map<string, FakeListener>();
  const canary = status?.families.find((f) => f.family === family)?.canary;
  const portals: Array<{ map: string; address: (key: readonly string[]) => string }> = [
    { map: SERVICE_PORTALS, address: ([ip, , port]) => joinHostPort(ip!, Number(port)) },
    { map: NODEPORT_PORTALS, address: ([, port]) => `*:${port}` },
  ];
  for (const { map, address } of portals)
    for (const { key: fields, value } of table.sets.get(map)?.elements.values() ?? []) {
      const protocol = (map === SERVICE_PORTALS ? fields[1] : fields[0])!.toUpperCase() as 'TCP' | 'UDP';
      const port = Number(value?.[0]);
      const id = `${protocol}/${port}`;
      if (byPort.has(id)) continue;
      const addr = address(fields);
      const sp = status?.servicePorts.find((s) => s.family === family && s.addresses.some((a) => a.address === addr));
      if (!sp && canary?.endpoint && canary.service === addr) {
        // The status document lists the proxy's own canary under its family, not among the service ports.
        byPort.set(id, { key: `${CANARY_SERVICE_PORT_KEY} cluster`, protocol, port, endpoints: [canary.endpoint] });
        continue;
      }
      const kind = sp?.addresses.find((a) => a.address === addr)?.traffic;
      const endpoints = sp?.traffic.find((x) => x.traffic === kind)?.endpoints ?? [];
      byPort.set(id, { key: sp ? `${sp.servicePort} ${kind}` : addr, protocol, port, endpoints });
    }
  return byPort;
}

/** Walk one packet through a userspace table listing; `status` is the proxy's status document, if reachable. */
export function explainUserspaceListing(
  listing: string,
  family: IPFamily,
  packet: TracePacket,
  localIPs: readonly string[],
  status: StatusDoc | null,
  statusError: string | null,
): Explanation {
  const fam = nftFamily(family);
  const table = userspaceTableFromListing(listing, fam);
  if (table === null) throw new ProxyError('KPT_NOT_FOUND', `no "table ${fam} ${TABLE_NAME}" in the nft listing`);
  const listeners = listenersFrom(table, status, family);
  const src = { nft: table, listenerOn: (protocol: string, port: number) => listeners.get(`${protocol}/${port}`) };
  const r = trace(src, packet, localIPs, { strict: false });
  const listenerStep = r.steps.find((s) => s.chain.startsWith('listener '));
  const service =
    listenerStep && / (internal|external)$/.test(listenerStep.chain)
      ? listenerStep.chain.slice('listener '.length).replace(/ (internal|external)$/, '')
      : null;
  const candidates = r.candidates.map((c) => ({ endpoint: c.endpoint, probability: c.probability }));
  const notes: string[] = [];
  if (listenerStep && candidates.length === 0)
    notes.push(
      status === null
        ? `the endpoints of this listener are known only to the proxy process, which could not be asked: ${statusError ?? 'no status'}`
        : 'the proxy reports no endpoints for the Service address behind this listener',
    );
  const verdict = listenerStep && candidates.length > 0 ? 'DNAT' : r.verdict;
  return {
    mode: 'userspace',
    packet: { src: packet.src, dst: packet.dst, port: packet.port, protocol: packet.protocol ?? 'TCP' },
    service,
    verdict,
    candidates,
    masquerade: r.masq,
    steps: r.steps.map((s) => ({
      where: s.chain,
      rule: s.rule,
      comment: s.comment,
      depth: s.depth,
      probability: s.probability,
    })),
    notUnderstood: r.notUnderstood,
    summary: listenerStep
      ? relaySummary(service, listenerStep.rule, candidates)
      : summarize(service, r.verdict, candidates, r.masq),
    ...(notes.length > 0 ? { notes } : {}),
  };
}

/** A relay takes endpoints in turn (round robin), and the endpoint sees the node as the client. */
function relaySummary(
  service: string | null,
  listener: string,
  candidates: ReadonlyArray<{ endpoint: string }>,
): string {
  const who = `${service ?? 'the packet'}: redirected to the proxy's listener (${listener})`;
  if (candidates.length === 0) return `${who}; its endpoints are unknown here`;
  const eps = candidates.map((c) => c.endpoint).join(', ');
  const to = candidates.length === 1 ? eps : `one of ${candidates.length} endpoints in turn: ${eps}`;
  return `${who}, which connects to ${to}; the endpoint sees the node's address`;
}
