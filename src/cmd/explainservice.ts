// `explain --service NS/NAME`: every address of one Service that this node
// captures (cluster IP, external IPs, load-balancer IPs, node ports) and
// what each does to a new connection from an off-node client and from the
// node itself, each traced like a single `explain` packet with the mode's
// tracer. Where the addresses come from (a ServiceSource per mode):
//   - iptables, nftables: the rules themselves (comments, chain names);
//   - ebpf: kpt_svc entries named by kpt_names (modes/ebpf/explain.ts);
//   - ipvs, userspace: their kernel state names no Service, so the running
//     proxy's status document says which addresses the Service has
//     (statusAddresses); each is then traced through the kernel state.
// A Service the source does not mention (not served by this proxy,
// headless, ExternalName, or unknown) is reported as such.

import { ProxyError } from '../core/errors.js';
import { ipFamilyOf, isLoopback, normalizeIP } from '../core/ip.js';
import type { IPFamily, Protocol } from '../core/types.js';
import * as N from '../dataplane/nftables/names.js';
import { flagValue, tokenize } from '../dataplane/iptables/tokens.js';
import type { Fake as IptablesFake } from '../dataplane/iptables/fake.js';
import type { Fake as NftFake } from '../dataplane/nftables/fake.js';
import { serviceFromChain } from './explainrules.js';
import type { TracePacket } from '../dataplane/trace.js';
import type { StatusDoc } from '../engine/statusview.js';
import { serviceFromComment, type ExplainCandidate, type Explanation, type ExplainVerdict } from './explainview.js';

export type AddressKind =
  'cluster IP' | 'external IP' | 'load balancer IP' | 'external or load balancer IP' | 'node port';

/** One destination of the Service the rules capture; address null = the node's addresses (a node port). */
export interface ServiceAddress {
  readonly servicePort: string;
  readonly kind: AddressKind;
  readonly address: string | null;
  readonly port: number;
  readonly protocol: Protocol;
}

/** What one client sees at one address. */
export interface AddressView {
  /** "off-node client" or "this node". */
  readonly client: string;
  readonly src: string;
  readonly dst: string;
  readonly verdict: ExplainVerdict;
  readonly candidates: readonly ExplainCandidate[];
  readonly masquerade: boolean;
  readonly summary: string;
}

export interface ServiceExplanation {
  readonly mode: Explanation['mode'];
  readonly service: string;
  readonly addresses: ReadonlyArray<ServiceAddress & { readonly views: readonly AddressView[] }>;
  /** Why some address was not traced (e.g. a node port without a known node address). */
  readonly notes: readonly string[];
}

const ofService = (spn: string | null, service: string) =>
  spn !== null && (spn === service || spn.startsWith(`${service}:`));

const PROTOCOLS: Record<string, Protocol> = { tcp: 'TCP', udp: 'UDP', sctp: 'SCTP' };

/** The Service's addresses in iptables rules (their comments), one per address, port and protocol. */
export function iptablesAddresses(fake: IptablesFake, service: string): ServiceAddress[] {
  const out: ServiceAddress[] = [];
  const chains: Array<['nat' | 'filter', string]> = [
    ['nat', 'KUBE-SERVICES'],
    ['nat', 'KUBE-NODEPORTS'],
    ['filter', 'KUBE-SERVICES'],
    ['filter', 'KUBE-EXTERNAL-SERVICES'],
  ];
  for (const [table, chain] of chains)
    for (const rule of fake.rules(table, chain)) {
      const t = tokenize(rule);
      if (t === null) continue;
      const comment = flagValue(t, '--comment');
      const spn = serviceFromComment(comment);
      if (!ofService(spn, service) || /health check node port/.test(comment ?? '')) continue;
      const protocol = PROTOCOLS[flagValue(t, '-p') ?? ''];
      const port = Number(flagValue(t, '--dport'));
      if (protocol === undefined || !(port > 0)) continue;
      const dst = flagValue(t, '-d');
      const address = dst === null ? null : normalizeIP(dst.replace(/\/(32|128)$/, ''));
      if (dst !== null && address === null) continue; // e.g. the 127.0.0.0/8 node-port counter rule
      let kind: AddressKind;
      if (address === null) kind = 'node port';
      else if (/ cluster IP$/.test(comment ?? '') || (table === 'filter' && chain === 'KUBE-SERVICES'))
        kind = 'cluster IP';
      else if (/ external IP$/.test(comment ?? '')) kind = 'external IP';
      else if (/ loadbalancer IP$/.test(comment ?? '')) kind = 'load balancer IP';
      else kind = 'external or load balancer IP';
      out.push({ servicePort: spn!, kind, address, port, protocol });
    }
  return unique(out);
}

/** The Service's addresses in the nftables table (its maps), one per address, port and protocol. */
export function nftablesAddresses(fake: NftFake, service: string): ServiceAddress[] {
  const sets = fake.sets;
  const clusterIPs = new Set([...(sets.get(N.CLUSTER_IPS_SET)?.elements.values() ?? [])].map((e) => e.key[0]));
  const spnOf = (value: readonly string[] | undefined, comment: string | undefined) =>
    serviceFromChain((value?.[0] ?? '').replace(/^goto /, '')) ?? serviceFromComment(comment ?? null);
  const out: ServiceAddress[] = [];
  for (const map of [
    N.SERVICE_IPS_MAP,
    N.NO_ENDPOINT_SERVICES_MAP,
    N.SERVICE_NODEPORTS_MAP,
    N.NO_ENDPOINT_NODEPORTS_MAP,
  ])
    for (const e of sets.get(map)?.elements.values() ?? []) {
      const spn = spnOf(e.value, e.comment);
      if (!ofService(spn, service)) continue;
      const nodePort = map === N.SERVICE_NODEPORTS_MAP || map === N.NO_ENDPOINT_NODEPORTS_MAP;
      const [address, proto, port] = nodePort
        ? [null, e.key[0], e.key[1]]
        : [normalizeIP(e.key[0]), e.key[1], e.key[2]];
      const protocol = PROTOCOLS[proto ?? ''];
      if (protocol === undefined || !(Number(port) > 0) || (!nodePort && address === null)) continue;
      const kind: AddressKind = nodePort
        ? 'node port'
        : clusterIPs.has(address!)
          ? 'cluster IP'
          : 'external or load balancer IP';
      out.push({ servicePort: spn!, kind, address, port: Number(port), protocol });
    }
  return unique(out);
}

function unique(found: readonly ServiceAddress[]): ServiceAddress[] {
  const seen = new Map<string, ServiceAddress>();
  for (const a of found) {
    const k = `${a.address ?? '*'}|${a.port}|${a.protocol}`;
    const prev = seen.get(k);
    // A precise kind (from a nat rule's comment) wins over the filter rules' guess.
    if (prev === undefined || (prev.kind === 'external or load balancer IP' && a.kind !== prev.kind)) seen.set(k, a);
  }
  return [...seen.values()];
}

/** An off-node client address of the family (documentation ranges) when --src is not given. */
export const DEFAULT_REMOTE_CLIENT: Record<IPFamily, string> = { IPv4: '203.0.113.1', IPv6: '2001:db8::1' };

/** What `--service` needs of a mode: the Service's addresses, and its tracer for one packet. */
export interface ServiceSource {
  readonly mode: Explanation['mode'];
  addresses(service: string, family: IPFamily): ServiceAddress[];
  trace(packet: TracePacket, localIPs: readonly string[]): Explanation;
}

const STATUS_KINDS: Record<string, AddressKind> = {
  ClusterIP: 'cluster IP',
  NodePort: 'node port',
  ExternalIP: 'external IP',
  LoadBalancer: 'load balancer IP',
};

/** The Service's addresses of one family as the running proxy reports them (its status document). */
export function statusAddresses(status: StatusDoc, service: string, family: IPFamily): ServiceAddress[] {
  const out: ServiceAddress[] = [];
  for (const sp of status.servicePorts) {
    if (sp.family !== family || `${sp.namespace}/${sp.name}` !== service) continue;
    const protocol = PROTOCOLS[sp.protocol.toLowerCase()];
    if (protocol === undefined) continue;
    for (const a of sp.addresses) {
      const m = /^\[?([^\]]*?)\]?:(\d+)$/.exec(a.address);
      const kind = STATUS_KINDS[a.kind];
      if (!m || kind === undefined) continue;
      const address = m[1] === '*' ? null : normalizeIP(m[1]);
      if (m[1] !== '*' && address === null) continue;
      out.push({ servicePort: sp.servicePort, kind, address, port: Number(m[2]), protocol });
    }
  }
  return unique(out);
}

export function explainService(
  source: ServiceSource,
  service: string,
  family: IPFamily,
  localIPs: readonly string[],
  remoteClient: string,
): ServiceExplanation {
  const nodeIP = localIPs.find((ip) => ipFamilyOf(ip) === family && !isLoopback(ip)) ?? null;
  const notes: string[] = [];
  const addresses = source
    .addresses(service, family)
    .filter((a) => a.address === null || ipFamilyOf(a.address) === family)
    .map((a) => {
      const dst = a.address ?? nodeIP;
      if (dst === null) {
        notes.push(`node port ${a.port}/${a.protocol}: no node address known to trace it with (pass --local-ip)`);
        return { ...a, views: [] };
      }
      const clients: Array<[string, string]> = [['off-node client', remoteClient]];
      if (nodeIP !== null) clients.push(['this node', nodeIP]);
      const views = clients.map(([client, src]): AddressView => {
        const e = source.trace({ src, dst, port: a.port, protocol: a.protocol }, localIPs);
        // The heading names the Service port already (ipvs names its virtual server instead).
        const prefix = [`${e.service}: `, `virtual server ${e.service}: `].find((p) => e.summary.startsWith(p));
        const summary = e.service !== null && prefix !== undefined ? e.summary.slice(prefix.length) : e.summary;
        return { client, src, dst, verdict: e.verdict, candidates: e.candidates, masquerade: e.masquerade, summary };
      });
      return { ...a, views };
    });
  if (addresses.length === 0)
    throw new ProxyError(
      'KPT_NOT_FOUND',
      `no ${family} rules for Service ${service} on this node (unknown, headless, ExternalName, or not served by this proxy)`,
    );
  return { mode: source.mode, service, addresses, notes };
}

const STATE_NOUN: Record<Explanation['mode'], string> = {
  iptables: 'rules',
  nftables: 'rules',
  ebpf: 'maps',
  ipvs: 'virtual servers and rules',
  userspace: 'redirect table and listeners',
};

export function serviceExplanationText(s: ServiceExplanation): string {
  const lines = [`Service ${s.service} on this node (${s.mode} ${STATE_NOUN[s.mode]})`];
  for (const a of s.addresses) {
    const where =
      a.address === null
        ? `<node address>:${a.port}`
        : `${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`;
    lines.push('', `${a.servicePort}  ${a.kind}  ${where}/${a.protocol}`);
    const width = Math.max(0, ...a.views.map((v) => `${v.client} ${v.src}`.length));
    for (const v of a.views) lines.push(`  from ${`${v.client} ${v.src}`.padEnd(width)}  ${v.summary}`);
  }
  if (s.notes.length > 0) lines.push('', ...s.notes.map((n) => `note: ${n}`));
  return lines.join('\n') + '\n';
}
