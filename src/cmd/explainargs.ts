// `explain`'s command line: the usage text and the flags parsed into one of
// three requests (a packet, a Service, or saving ebpf state). Kept apart from
// explain.ts, which reads the kernel or a dump and traces.
import { parseArgs } from 'node:util';
import { ProxyError } from '../core/errors.js';
import { ipFamilyOf, normalizeIP } from '../core/ip.js';
import type { Protocol } from '../core/types.js';
import { DEFAULT_EBPF_OPTIONS } from '../dataplane/ebpf/options.js';
import { parseBindAddress } from '../platform/metricsserver.js';

export const EXPLAIN_USAGE = `Usage: kube-proxy-ts explain --src IP --dst IP --port N [flags]

       kube-proxy-ts explain --service NS/NAME [flags]

       kube-proxy-ts explain --save FILE [--ebpf-pin-path PATH]

Walk one new connection's first packet through the kube-proxy rules the kernel
holds now (or a saved dump of them) and print every rule it matches and what
happens to it. With --service, list every address of the Service this node
captures and what a connection to each does, from an off-node client and from
the node itself (ipvs and userspace: the running proxy names the Service's
addresses, asked at --address; their kernel state has no Service names).

Flags:
  --src IP               source address of the packet (required without --service;
                         with it, the off-node client, default 203.0.113.1 / 2001:db8::1)
  --dst IP               destination address (required without --service)
  --port N               destination port (required without --service)
  --service NS/NAME      every address of this Service instead of one packet
  --protocol P           tcp, udp or sctp (default tcp)
  --mode M               iptables, nftables, ebpf, ipvs or userspace (default: detect from the kernel)
  --address HOST:PORT    userspace: the proxy's metrics address, asked which endpoints
                         each listener relays to; ipvs and userspace --service: asked
                         which addresses the Service has (default 127.0.0.1:10249)
  --netns NAME           read the rules of this network namespace (ip netns)
  --from FILE            read a saved dump instead of the kernel: iptables-save (or
                         ip6tables-save) output; \`nft list table ip kube-proxy\`
                         followed by \`nft -j list table ip kube-proxy\` (use ip6 for IPv6);
                         userspace: \`nft list ruleset\`; ipvs: the output of
                         \`ipvsadm -Sn; ipset save; iptables-save; ip -o addr\` in one file.
                         ebpf: the file \`explain --save\` wrote. Node ports need the
                         node's addresses: give --local-ip (ipvs and ebpf files have them)
  --status FILE          a saved \`kube-proxy-ts status -o json\` of the same node, instead of
                         asking the proxy: ipvs and userspace --service, userspace endpoints
  --save FILE            ebpf: write the pinned maps (and the node's interfaces and addresses)
                         to FILE for --from elsewhere; the other modes' state is saved with
                         their own tools (see --from)
  --iif IFACE            input interface of a remote packet (bridge/interface local detectors)
  --local-ip IP          a node address (repeatable; default: the addresses of the host or netns)
  --sport N              source port (ebpf Maglev services: the one endpoint this flow gets)
  --ebpf-pin-path PATH   where the ebpf mode pinned its maps (default /sys/fs/bpf/kube-proxy-ts)
  --output F             text (default) or json
`;

export interface ExplainRequest {
  readonly kind: 'packet';
  readonly src: string;
  readonly dst: string;
  readonly port: number;
  readonly protocol: Protocol;
  readonly mode: 'iptables' | 'nftables' | 'ebpf' | 'ipvs' | 'userspace' | null;
  readonly netns: string | null;
  readonly iif: string | null;
  readonly localIPs: readonly string[] | null;
  readonly output: 'text' | 'json';
  readonly sport: number | null;
  readonly pinRoot: string;
  /** userspace: the proxy's metrics address, where it tells which endpoints each listener relays to. */
  readonly address: string;
  /** A dump file to read instead of the kernel (--from). */
  readonly from: string | null;
  /** A saved status document to read instead of asking the proxy (--status). */
  readonly statusFile: string | null;
}

/** `explain --service NS/NAME`: the shared flags, a Service instead of a packet. */
export interface ServiceRequest {
  readonly kind: 'service';
  readonly service: string;
  /** The off-node client (--src), or null for the family's default. */
  readonly src: string | null;
  readonly mode: ExplainRequest['mode'];
  readonly netns: string | null;
  readonly localIPs: readonly string[] | null;
  readonly output: 'text' | 'json';
  readonly from: string | null;
  readonly statusFile: string | null;
  readonly address: string;
  readonly pinRoot: string;
}

/** `explain --save FILE`: ebpf mode's maps to a file `--from` reads. */
export interface SaveRequest {
  readonly kind: 'save';
  readonly file: string;
  readonly mode: ExplainRequest['mode'];
  readonly netns: string | null;
  readonly pinRoot: string;
}

const bad = (msg: string): never => {
  throw new ProxyError('KPT_FLAG_INVALID', msg);
};

export function parseExplainArgs(argv: readonly string[]): ExplainRequest | ServiceRequest | SaveRequest | 'help' {
  const { values } = parseArgs({
    args: [...argv],
    allowPositionals: false,
    strict: true,
    options: {
      src: { type: 'string' },
      dst: { type: 'string' },
      port: { type: 'string' },
      service: { type: 'string' },
      protocol: { type: 'string' },
      mode: { type: 'string' },
      netns: { type: 'string' },
      from: { type: 'string' },
      status: { type: 'string' },
      save: { type: 'string' },
      iif: { type: 'string' },
      'local-ip': { type: 'string', multiple: true },
      sport: { type: 'string' },
      'ebpf-pin-path': { type: 'string' },
      address: { type: 'string' },
      output: { type: 'string', short: 'o' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  const mode = values.mode ?? null;
  if (
    mode !== null &&
    mode !== 'iptables' &&
    mode !== 'nftables' &&
    mode !== 'ebpf' &&
    mode !== 'ipvs' &&
    mode !== 'userspace'
  )
    bad(`--mode: iptables, nftables, ebpf, ipvs or userspace, not ${mode}`);
  const address = values.address ?? '127.0.0.1:10249';
  const hp = parseBindAddress(address);
  if (!hp || hp.port === 0) bad(`--address: HOST:PORT, not ${address}`);
  const output = values.output ?? 'text';
  if (output !== 'text' && output !== 'json') bad(`--output: text or json, not ${output}`);
  const locals = (values['local-ip'] ?? []).map((ip) => normalizeIP(ip) ?? bad(`--local-ip: not an IP address: ${ip}`));
  const from = values.from ?? null;
  if (from !== null && values.netns !== undefined) bad('--from and --netns: one source of rules, not both');
  if (values.save !== undefined) {
    for (const f of ['src', 'dst', 'port', 'service', 'from'] as const)
      if (values[f] !== undefined) bad(`--save writes the live state to a file; --${f} does not go with it`);
    return {
      kind: 'save',
      file: values.save,
      mode: mode as ExplainRequest['mode'],
      netns: values.netns ?? null,
      pinRoot: values['ebpf-pin-path'] ?? DEFAULT_EBPF_OPTIONS.pinRoot,
    };
  }
  const shared = {
    netns: values.netns ?? null,
    localIPs: locals.length > 0 ? locals : null,
    output: output as 'text' | 'json',
    from,
    statusFile: values.status ?? null,
    address,
    pinRoot: values['ebpf-pin-path'] ?? DEFAULT_EBPF_OPTIONS.pinRoot,
  };
  if (values.service !== undefined) {
    if (!/^[a-z0-9][-a-z0-9.]*\/[a-z0-9][-a-z0-9.]*$/.test(values.service))
      bad(`--service: NAMESPACE/NAME, not ${values.service}`);
    for (const f of ['dst', 'port', 'protocol', 'sport', 'iif'] as const)
      if (values[f] !== undefined) bad(`--${f} describes one packet; --service traces every address of the Service`);
    const src =
      values.src === undefined ? null : (normalizeIP(values.src) ?? bad(`--src: not an IP address: ${values.src}`));
    return { kind: 'service', service: values.service, src, mode: mode as ServiceRequest['mode'], ...shared };
  }
  const src = normalizeIP(values.src) ?? bad(`--src: not an IP address: ${values.src ?? '(missing)'}`);
  const dst = normalizeIP(values.dst) ?? bad(`--dst: not an IP address: ${values.dst ?? '(missing)'}`);
  if (ipFamilyOf(src) !== ipFamilyOf(dst)) bad('--src and --dst must be of the same IP family');
  const port = Number(values.port);
  if (!/^\d+$/.test(values.port ?? '') || port < 1 || port > 65535)
    bad(`--port: not a port: ${values.port ?? '(missing)'}`);
  const proto = (values.protocol ?? 'tcp').toUpperCase();
  if (proto !== 'TCP' && proto !== 'UDP' && proto !== 'SCTP')
    bad(`--protocol: tcp, udp or sctp, not ${values.protocol}`);
  const sport = values.sport === undefined ? null : Number(values.sport);
  if (sport !== null && (!/^\d+$/.test(values.sport ?? '') || sport < 1 || sport > 65535))
    bad(`--sport: not a port: ${values.sport}`);
  return {
    kind: 'packet',
    src,
    dst,
    port,
    protocol: proto as Protocol,
    mode: mode as ExplainRequest['mode'],
    iif: values.iif ?? null,
    sport,
    ...shared,
  };
}
