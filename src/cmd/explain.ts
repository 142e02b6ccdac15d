// `kube-proxy-ts explain --src IP --dst IP --port N [--protocol tcp|udp|sctp]
//   [--mode iptables|nftables|ebpf|ipvs|userspace] [--netns NAME | --from FILE] [--iif IFACE]
//   [--local-ip IP ...] [--sport N] [--ebpf-pin-path PATH] [--output text|json]`
// `kube-proxy-ts explain --service NS/NAME [--src IP] [--netns NAME | --from FILE] ...`
// Reads the LIVE state (iptables-save, the nftables kube-proxy table, the
// ebpf mode's pinned maps, the IPVS table with its ipsets and rules, or the
// userspace redirect table) of this host or of a named network namespace, or
// saved state (--from, explaindump.ts), walks one new connection's first
// packet through it with the mode's pure tracer, and prints every rule it
// matched, the verdict (DNAT candidates with probabilities, REJECT, DROP, or
// "not a service address") and whether it is masqueraded. With --service,
// every address of one Service and what it does (explainservice.ts). With
// --save, ebpf mode's maps go to a file for --from. Writes nothing to the
// kernel.
// Exit codes: 0 = explained, 2 = bad flags or the ruleset could not be read.

import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ProxyError } from '../core/errors.js';
import { ipFamilyOf, normalizeIP } from '../core/ip.js';
import type { IPFamily, Protocol } from '../core/types.js';
import { hostRunner, netnsRunner, type CommandRunner } from '../platform/exec.js';
import { ebpfServiceAddresses, explainEbpfMaps, liveIfindexOf, saveEbpfMaps, withPinnedMaps } from './explainebpf.js';
import { explainIpvsFake } from './explainipvs.js';
import { readLiveIpvs } from './ipvslive.js';
import { DEFAULT_EBPF_OPTIONS } from '../dataplane/ebpf/options.js';
import { PinnedMaps } from '../platform/ebpf/pinned.js';
import { explanationText, type Explanation } from './explainview.js';
import type { StatusDoc } from '../engine/statusview.js';
import { parseBindAddress } from '../platform/metricsserver.js';
import { TABLE_NAME as USERSPACE_TABLE } from '../dataplane/userspace/index.js';
import { explainUserspaceListing } from './explainuserspace.js';
import { readKernelRules, traceRules } from './explainrules.js';
import { explainFromDump, readDump, serviceSourceFromDump, statusFromFile, type StatusAnswer } from './explaindump.js';
import { isIpvsBundle } from './ipvslive.js';
import {
  DEFAULT_REMOTE_CLIENT,
  explainService,
  rulesSource,
  serviceExplanationText,
  statusAddresses,
  type ServiceExplanation,
  type ServiceSource,
} from './explainservice.js';

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

/** The addresses of the host or namespace (`ip -j addr`), for addrtype/fib LOCAL. */
export async function kernelLocalIPs(run: CommandRunner, family: IPFamily): Promise<string[]> {
  const out = (await run('ip', ['-j', family === 'IPv4' ? '-4' : '-6', 'addr', 'show'])).stdout;
  const links = JSON.parse(out) as Array<{ addr_info?: Array<{ local?: string }> }>;
  const ips = links
    .flatMap((l) => (l.addr_info ?? []).map((a) => normalizeIP(a.local)))
    .filter((x): x is string => x !== null);
  return [...new Set(ips)];
}

/**
 * ipvs when the nat table has IPVS mode's own chains (KUBE-NODE-PORT,
 * KUBE-LOAD-BALANCER), iptables when it has KUBE-SERVICES, else nftables when
 * the kube-proxy table exists, else ebpf when its maps are pinned under pinRoot.
 */
export async function detectMode(
  run: CommandRunner,
  family: IPFamily,
  pinRoot: string = DEFAULT_EBPF_OPTIONS.pinRoot,
): Promise<'iptables' | 'nftables' | 'ebpf' | 'ipvs' | 'userspace' | null> {
  const save = await run(family === 'IPv4' ? 'iptables-save' : 'ip6tables-save', ['-t', 'nat'], { allowFailure: true });
  if (save.code === 0 && /^:KUBE-(NODE-PORT|LOAD-BALANCER) /m.test(save.stdout)) return 'ipvs';
  if (save.code === 0 && /^:KUBE-SERVICES /m.test(save.stdout)) return 'iptables';
  const nft = await run('nft', ['list', 'table', family === 'IPv4' ? 'ip' : 'ip6', 'kube-proxy'], {
    allowFailure: true,
  });
  if (nft.code === 0) return 'nftables';
  const us = await run('nft', ['list', 'table', family === 'IPv4' ? 'ip' : 'ip6', USERSPACE_TABLE], {
    allowFailure: true,
  });
  if (us.code === 0) return 'userspace';
  return PinnedMaps.present(pinRoot) ? 'ebpf' : null;
}

/**
 * The proxy's status document, asked the way `kube-proxy-ts status` asks it,
 * through the runner (so in the --netns namespace): null and the reason when
 * it cannot be had.
 */
export async function proxyStatus(run: CommandRunner, address: string): Promise<StatusAnswer> {
  const bin = fileURLToPath(new URL('../../../bin/kube-proxy-ts', import.meta.url));
  const r = await run(process.execPath, [bin, 'status', '-o', 'json', '--address', address], { allowFailure: true });
  if (r.code !== 0) return { doc: null, error: r.stderr.trim().replace(/^Error: /, '') || `status exited ${r.code}` };
  return { doc: JSON.parse(r.stdout) as StatusDoc, error: null };
}

const NO_RULES =
  'no kube-proxy rules found (no KUBE-SERVICES chain, no kube-proxy or kube-proxy-userspace nftables table, no pinned ebpf maps); use --mode to force one';

export async function explain(req: ExplainRequest, run: CommandRunner): Promise<Explanation> {
  const family = ipFamilyOf(req.dst)!;
  const packet = {
    src: req.src,
    dst: req.dst,
    port: req.port,
    protocol: req.protocol,
    ...(req.iif ? { iif: req.iif } : {}),
  };
  if (req.from !== null) {
    const status = req.statusFile === null ? null : statusFromFile(req.statusFile);
    return explainFromDump(req.from, req.mode, family, packet, req.localIPs, status, req.sport);
  }
  const locals = req.localIPs ?? (await kernelLocalIPs(run, family));
  const mode = req.mode ?? (await detectMode(run, family, req.pinRoot));
  if (mode === null) throw new ProxyError('KPT_NOT_FOUND', NO_RULES);
  if (mode === 'ebpf') {
    const ifindexOf = await liveIfindexOf();
    return withPinnedMaps(req.pinRoot, (maps) =>
      explainEbpfMaps(maps, packet, locals, { sport: req.sport, ifindexOf }),
    );
  }
  if (mode === 'ipvs') return explainIpvsFake((await readLiveIpvs(run, req.netns, family)).fake, packet, locals);
  if (mode === 'userspace') {
    const fam = family === 'IPv4' ? 'ip' : 'ip6';
    const listing = (await run('nft', ['list', 'table', fam, USERSPACE_TABLE])).stdout;
    const st = req.statusFile === null ? await proxyStatus(run, req.address) : statusFromFile(req.statusFile);
    return explainUserspaceListing(listing, family, packet, locals, st.doc, st.error);
  }
  return traceRules(await readKernelRules(run, mode, family), packet, locals);
}

/**
 * Hand `use` the --service source of a live mode for one family (ebpf: the
 * maps stay open while it runs). `status` asks the running proxy once.
 */
async function withLiveServiceSource<T>(
  mode: NonNullable<ExplainRequest['mode']>,
  family: IPFamily,
  req: ServiceRequest,
  run: CommandRunner,
  status: () => Promise<StatusAnswer>,
  use: (source: ServiceSource) => T,
): Promise<T> {
  if (mode === 'iptables' || mode === 'nftables') return use(rulesSource(await readKernelRules(run, mode, family)));
  if (mode === 'ebpf') {
    const ifindexOf = await liveIfindexOf();
    return withPinnedMaps(req.pinRoot, (maps) =>
      use({
        mode,
        addresses: (service, fam) => ebpfServiceAddresses(maps, service, fam),
        trace: (packet, locals) => explainEbpfMaps(maps, packet, locals, { ifindexOf }),
      }),
    );
  }
  const st = await status();
  if (st.doc === null)
    throw new ProxyError(
      'KPT_NOT_FOUND',
      `${family}: ${mode} mode's kernel state names no Service, and the proxy that knows ${req.service}'s addresses could not be asked: ${st.error ?? 'no status'}`,
    );
  const doc = st.doc;
  const addresses = (service: string, fam: IPFamily) => statusAddresses(doc, service, fam);
  if (mode === 'ipvs') {
    const { fake } = await readLiveIpvs(run, req.netns, family);
    return use({ mode, addresses, trace: (packet, locals) => explainIpvsFake(fake, packet, locals) });
  }
  const listing = (await run('nft', ['list', 'table', family === 'IPv4' ? 'ip' : 'ip6', USERSPACE_TABLE])).stdout;
  return use({
    mode,
    addresses,
    trace: (packet, locals) => explainUserspaceListing(listing, family, packet, locals, doc, null),
  });
}

/**
 * `explain --service`: the family of --src, else IPv4 and then IPv6 (each
 * family whose state exists; an iptables dump is one family, told by its
 * addresses).
 */
export async function explainServiceRequest(req: ServiceRequest, run: CommandRunner): Promise<ServiceExplanation[]> {
  let families: IPFamily[] = req.src !== null ? [ipFamilyOf(req.src)!] : ['IPv4', 'IPv6'];
  if (req.from !== null && req.src === null) {
    const text = readDump(req.from);
    if (/^\*nat/m.test(text) && !isIpvsBundle(text))
      families = [/ -d [0-9a-f]*:[0-9a-f:]*(\/128)? /.test(text) ? 'IPv6' : 'IPv4'];
  }
  let asked: Promise<StatusAnswer> | null = null;
  const status = () =>
    (asked ??=
      req.statusFile === null ? proxyStatus(run, req.address) : Promise.resolve(statusFromFile(req.statusFile)));
  const out: ServiceExplanation[] = [];
  const errors: string[] = [];
  for (const family of families) {
    try {
      const client = req.src ?? DEFAULT_REMOTE_CLIENT[family];
      if (req.from !== null) {
        const saved = req.statusFile === null ? null : statusFromFile(req.statusFile);
        const dump = serviceSourceFromDump(req.from, req.mode, family, req.localIPs, saved);
        out.push(explainService(dump.source, req.service, family, dump.localIPs, client));
        continue;
      }
      const mode = req.mode ?? (await detectMode(run, family, req.pinRoot));
      if (mode === null) throw new ProxyError('KPT_NOT_FOUND', `${family}: ${NO_RULES}`);
      const locals = req.localIPs ?? (await kernelLocalIPs(run, family));
      out.push(
        await withLiveServiceSource(mode, family, req, run, status, (source) =>
          explainService(source, req.service, family, locals, client),
        ),
      );
    } catch (err) {
      errors.push(err instanceof Error ? err.message : String(err));
    }
  }
  if (out.length === 0) throw new ProxyError('KPT_NOT_FOUND', errors.join('; '));
  return out;
}

/** How to save each mode's state for --from with its own tools. */
const SAVE_WITH: Record<'iptables' | 'nftables' | 'ipvs' | 'userspace', string> = {
  iptables: 'iptables-save -c > FILE (ip6tables-save for IPv6)',
  nftables: '{ nft list table ip kube-proxy; nft -j list table ip kube-proxy; } > FILE (ip6 for IPv6)',
  ipvs: '{ ipvsadm -Sn; ipset save; iptables-save; ip -o addr; } > FILE',
  userspace: 'nft list ruleset > FILE',
};

/** `explain --save`: the pinned maps as JSON (the other modes' tools print their own state). */
export async function saveState(req: SaveRequest, run: CommandRunner): Promise<string> {
  const mode = req.mode ?? (await detectMode(run, 'IPv4', req.pinRoot));
  if (mode === null) throw new ProxyError('KPT_NOT_FOUND', NO_RULES);
  if (mode !== 'ebpf')
    throw new ProxyError(
      'KPT_FLAG_INVALID',
      `--save writes ebpf mode's maps; in ${mode} mode save the state with its own tools for --from: ${SAVE_WITH[mode]}`,
    );
  const locals = [...(await kernelLocalIPs(run, 'IPv4')), ...(await kernelLocalIPs(run, 'IPv6'))];
  return withPinnedMaps(req.pinRoot, (maps) => saveEbpfMaps(maps, locals));
}

/** Where a subcommand writes (tests capture it). */
export interface CmdIO {
  readonly out: (s: string) => void;
  readonly err: (s: string) => void;
}
export const PROCESS_IO: CmdIO = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) };

export async function runExplain(argv: string[], io: CmdIO = PROCESS_IO): Promise<number> {
  let req: ExplainRequest | ServiceRequest | SaveRequest | 'help';
  try {
    req = parseExplainArgs(argv);
  } catch (err) {
    io.err(`Error: ${err instanceof Error ? err.message : String(err)}\n\n${EXPLAIN_USAGE}`);
    return 2;
  }
  if (req === 'help') {
    io.out(EXPLAIN_USAGE);
    return 0;
  }
  try {
    const run = req.netns === null ? hostRunner : netnsRunner(req.netns);
    if (req.kind === 'save') {
      const text = await saveState(req, run);
      writeFileSync(req.file, text);
      io.out(
        `saved ebpf mode's maps (${text.length} bytes) to ${req.file}; trace them anywhere with --from ${req.file}\n`,
      );
      return 0;
    }
    if (req.kind === 'service') {
      const views = await explainServiceRequest(req, run);
      io.out(
        req.output === 'json' ? `${JSON.stringify(views, null, 2)}\n` : views.map(serviceExplanationText).join('\n'),
      );
      return 0;
    }
    const e = await explain(req, run);
    io.out(req.output === 'json' ? `${JSON.stringify(e, null, 2)}\n` : explanationText(e));
    return 0;
  } catch (err) {
    io.err(`Error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }
}
