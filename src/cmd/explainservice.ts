// `explain --service NS/NAME`: every address of one Service that the rules
// on this node capture (cluster IP, external IPs, load-balancer IPs, node
// ports), found in the rules themselves, and what each does to a new
// connection from an off-node client and from the node itself, each traced
// like a single `explain` packet. The rules are the only source: a Service
// the rules do not mention (not served by this proxy, headless,
// ExternalName, or unknown) is reported as such.

import { ProxyError } from '../core/errors.js';
import { ipFamilyOf, isLoopback, normalizeIP } from '../core/ip.js';
import type { IPFamily, Protocol } from '../core/types.js';
import * as N from '../dataplane/nftables/names.js';
import { flagValue, tokenize } from '../dataplane/iptables/tokens.js';
import { serviceFromChain, traceRules, type LoadedRules } from './explainrules.js';
import { serviceFromComment, type ExplainCandidate, type ExplainVerdict } from './explainview.js';

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
  readonly mode: 'iptables' | 'nftables';
  readonly service: string;
  readonly addresses: ReadonlyArray<ServiceAddress & { readonly views: readonly AddressView[] }>;
  /** Why some address was not traced (e.g. a node port without a known node address). */
  readonly notes: readonly string[];
}

const ofService = (spn: string | null, service: string) =>
  spn !== null && (spn === service || spn.startsWith(`${service}:`));

const PROTOCOLS: Record<string, Protocol> = { tcp: 'TCP', udp: 'UDP', sctp: 'SCTP' };

function iptablesAddresses(rules: LoadedRules & { mode: 'iptables' }, service: string): ServiceAddress[] {
  const out: ServiceAddress[] = [];
  const chains: Array<['nat' | 'filter', string]> = [
    ['nat', 'KUBE-SERVICES'],
    ['nat', 'KUBE-NODEPORTS'],
    ['filter', 'KUBE-SERVICES'],
    ['filter', 'KUBE-EXTERNAL-SERVICES'],
  ];
  for (const [table, chain] of chains)
    for (const rule of rules.fake.rules(table, chain)) {
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
  return out;
}

function nftablesAddresses(rules: LoadedRules & { mode: 'nftables' }, service: string): ServiceAddress[] {
  const sets = rules.fake.sets;
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
  return out;
}

/** The Service's addresses in the rules, one entry per address, port and protocol. */
export function serviceAddresses(rules: LoadedRules, service: string): ServiceAddress[] {
  const found = rules.mode === 'iptables' ? iptablesAddresses(rules, service) : nftablesAddresses(rules, service);
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

export function explainService(
  rules: LoadedRules,
  service: string,
  family: IPFamily,
  localIPs: readonly string[],
  remoteClient: string,
): ServiceExplanation {
  const nodeIP = localIPs.find((ip) => ipFamilyOf(ip) === family && !isLoopback(ip)) ?? null;
  const notes: string[] = [];
  const addresses = serviceAddresses(rules, service)
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
        const e = traceRules(rules, { src, dst, port: a.port, protocol: a.protocol }, localIPs);
        const summary =
          e.service !== null && e.summary.startsWith(`${e.service}: `)
            ? e.summary.slice(e.service.length + 2)
            : e.summary;
        return { client, src, dst, verdict: e.verdict, candidates: e.candidates, masquerade: e.masquerade, summary };
      });
      return { ...a, views };
    });
  if (addresses.length === 0)
    throw new ProxyError(
      'KPT_NOT_FOUND',
      `no ${family} rules for Service ${service} on this node (unknown, headless, ExternalName, or not served by this proxy)`,
    );
  return { mode: rules.mode, service, addresses, notes };
}

export function serviceExplanationText(s: ServiceExplanation): string {
  const lines = [`Service ${s.service} on this node (${s.mode} rules)`];
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
