// userspace side of `explain`: the `kube-proxy-userspace` table (read from
// the kernel with `nft list table`, or from a saved listing) is loaded into
// the userspace Fake, and the packet is walked with the mode's tracer to the
// listener it is redirected to. Which endpoints that listener's relay picks
// from lives only inside the proxy process: it is asked for them through its
// status document (`kube-proxy-ts status -o json`, i.e. /statusz on the
// metrics address), and the listener port is matched to the Service address
// that the table sends there. Without the proxy the walk still ends at the
// listener, and a note says the endpoints are unknown.

import { ProxyError } from '../core/errors.js';
import { joinHostPort } from '../core/ip.js';
import type { IPFamily } from '../core/types.js';
import { Fake, TABLE_NAME, trace, type FakeListener, type RuleSource } from '../dataplane/userspace/index.js';
import type { TracePacket } from '../dataplane/trace.js';
import type { StatusDoc } from '../engine/statusview.js';
import { PRIORITIES } from '../dataplane/nftables/listing.js';
import { summarize, type Explanation } from './explainview.js';

/** The userspace table block of an nft text listing (`nft list table` or `nft list ruleset`), or null. */
export function userspaceTableBlock(text: string, fam: 'ip' | 'ip6'): string | null {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.trim() === `table ${fam} ${TABLE_NAME} {`);
  if (start < 0) return null;
  const end = lines.findIndex((l, i) => i > start && l === '}');
  return end < 0 ? null : lines.slice(start + 1, end).join('\n');
}

/**
 * The `nft -f` script that rebuilds a listed userspace table (the Fake's
 * input): nft prints `redirect to :ip daddr ...` and `dnat to ip saddr:ip
 * daddr ...` where the renderer writes spaces, and named priorities.
 */
export function userspaceScriptFromListing(block: string, fam: 'ip' | 'ip6'): string {
  const t = `${fam} ${TABLE_NAME}`;
  const head: string[] = [];
  const chains: string[] = [];
  const maps: string[] = [];
  const rules: string[] = [];
  const elements: string[] = [];
  let tableComment = '';
  let cur: { kind: 'chain' | 'map' | 'set'; name: string; props: string[]; elems: string } | null = null;
  let inElements = false;
  const bad = (line: string): never => {
    throw new ProxyError('KPT_INPUT_INVALID', `nft listing of ${TABLE_NAME}: unexpected line: ${line}`);
  };
  for (const raw of block.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    if (cur === null) {
      const m = /^(chain|map|set) (\S+) \{$/.exec(line);
      if (m) cur = { kind: m[1] as 'chain', name: m[2]!, props: [], elems: '' };
      else if (line.startsWith('comment ')) tableComment = line.slice(8);
      else bad(line);
      continue;
    }
    if (inElements) {
      cur.elems += ` ${line}`;
      inElements = !line.endsWith('}');
      continue;
    }
    if (line === '}') {
      if (cur.kind === 'chain') {
        const base = cur.props[0];
        chains.push(`add chain ${t} ${cur.name}${base === undefined ? '' : ` { ${base} ; }`}`);
      } else {
        maps.push(`add ${cur.kind} ${t} ${cur.name} { ${cur.props.join(' ; ')} ; }`);
        const els = cur.elems.trim().replace(/^\{\s*|\s*\}$/g, '');
        if (els !== '') elements.push(`add element ${t} ${cur.name} { ${els} }`);
      }
      cur = null;
      continue;
    }
    if (cur.kind !== 'chain') {
      if (line.startsWith('elements = ')) {
        cur.elems = line.slice('elements = '.length);
        inElements = !line.endsWith('}');
      } else cur.props.push(line);
      continue;
    }
    const base = /^type (\S+) hook (\S+) priority ([^;]+);/.exec(line);
    if (base) {
      const p = PRIORITIES[base[3]!.trim()] ?? Number(base[3]);
      cur.props.push(`type ${base[1]} hook ${base[2]} priority ${p}`);
      continue;
    }
    const rule = line.replace(/redirect to :(?=\S)/, 'redirect to : ').replace(/(dnat to ip6? saddr):(?=\S)/, '$1 : ');
    rules.push(`add rule ${t} ${cur.name} ${rule}`);
  }
  if (cur !== null) bad(`unterminated ${cur.kind} ${cur.name}`);
  head.push(`add table ${t}${tableComment === '' ? '' : ` { comment ${tableComment} ; }`}`);
  return [...head, ...chains, ...maps, ...rules, ...elements].join('\n') + '\n';
}

/**
 * The listeners the table redirects to, with the endpoints the proxy reports
 * for the Service address behind each (internal traffic for a cluster IP,
 * external for node ports, external and load-balancer IPs).
 */
export function listenersFrom(fake: Fake, status: StatusDoc | null, family: IPFamily): Map<string, FakeListener> {
  const byPort = new Map<string, FakeListener>();
  const portals: Array<{ map: string; address: (key: string[]) => string }> = [
    { map: 'service-portals', address: ([ip, , port]) => joinHostPort(ip!, Number(port)) },
    { map: 'nodeport-portals', address: ([, port]) => `*:${port}` },
  ];
  for (const { map, address } of portals)
    for (const [key, value] of fake.maps.get(map)?.elements ?? []) {
      const fields = key.split(' . ');
      const protocol = (map === 'service-portals' ? fields[1] : fields[0])!.toUpperCase() as 'TCP' | 'UDP';
      const port = Number(value);
      const id = `${protocol}/${port}`;
      if (byPort.has(id)) continue;
      const addr = address(fields);
      const sp = status?.servicePorts.find((s) => s.family === family && s.addresses.some((a) => a.address === addr));
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
  const fam = family === 'IPv4' ? 'ip' : 'ip6';
  const block = userspaceTableBlock(listing, fam);
  if (block === null) throw new ProxyError('KPT_NOT_FOUND', `no "table ${fam} ${TABLE_NAME}" in the nft listing`);
  const fake = new Fake(fam);
  fake.run(userspaceScriptFromListing(block, fam));
  const listeners = listenersFrom(fake, status, family);
  const src: RuleSource = {
    chains: fake.chains,
    maps: fake.maps,
    listenerOn: (protocol, port) => listeners.get(`${protocol}/${port}`),
  };
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
