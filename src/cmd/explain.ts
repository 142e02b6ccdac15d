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
import { ProxyError } from '../core/errors.js';
import { ipFamilyOf, normalizeIP } from '../core/ip.js';
import type { IPFamily } from '../core/types.js';
import { hostRunner, netnsRunner, type CommandRunner } from '../platform/exec.js';
import { ebpfServiceAddresses, explainEbpfMaps, liveIfindexOf, saveEbpfMaps, withPinnedMaps } from './explainebpf.js';
import { explainIpvsFake } from './explainipvs.js';
import { readLiveIpvs } from './ipvslive.js';
import { DEFAULT_EBPF_OPTIONS } from '../dataplane/ebpf/options.js';
import { PinnedMaps } from '../platform/ebpf/pinned.js';
import { explanationText, type Explanation } from './explainview.js';
import type { StatusDoc } from '../engine/statusview.js';
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
import {
  EXPLAIN_USAGE,
  parseExplainArgs,
  type ExplainRequest,
  type SaveRequest,
  type ServiceRequest,
} from './explainargs.js';

export {
  EXPLAIN_USAGE,
  parseExplainArgs,
  type ExplainRequest,
  type SaveRequest,
  type ServiceRequest,
} from './explainargs.js';

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
