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
import { explanationText, type Explanation } from './explainview.js';
import type { StatusDoc } from '../engine/statusview.js';
import { explainFromDump, readDump, serviceSourceFromDump, statusFromFile, type StatusAnswer } from './explaindump.js';
import {
  DEFAULT_REMOTE_CLIENT,
  explainService,
  serviceExplanationText,
  type ServiceExplanation,
} from './explainservice.js';
import {
  EXPLAIN_USAGE,
  parseExplainArgs,
  type ExplainRequest,
  type SaveRequest,
  type ServiceRequest,
} from './explainargs.js';
import { DUMP_ORDER, detectMode, modeDriver, SUPPORTED_MODES } from './modes/index.js';
import type { LiveContext } from './modes/driver.js';

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
  const ctx: LiveContext = {
    run,
    netns: req.netns,
    family,
    pinRoot: req.pinRoot,
    service: null,
    sport: req.sport,
    status: statusOnce(req, run),
  };
  return modeDriver(mode).withLive(ctx, (source) => source.trace(packet, locals));
}

/** The proxy's status, from --status FILE or asked of the running proxy, at most once. */
function statusOnce(req: ExplainRequest | ServiceRequest, run: CommandRunner): () => Promise<StatusAnswer> {
  let asked: Promise<StatusAnswer> | null = null;
  return () =>
    (asked ??=
      req.statusFile === null ? proxyStatus(run, req.address) : Promise.resolve(statusFromFile(req.statusFile)));
}

/**
 * `explain --service`: the family of --src, else IPv4 and then IPv6 (each
 * family whose state exists; an iptables dump is one family, told by its
 * addresses).
 */
export async function explainServiceRequest(req: ServiceRequest, run: CommandRunner): Promise<ServiceExplanation[]> {
  let families: IPFamily[] = req.src !== null ? [ipFamilyOf(req.src)!] : ['IPv4', 'IPv6'];
  if (req.from !== null && req.src === null) {
    // A saved file of some modes holds one family only.
    const text = readDump(req.from);
    families = DUMP_ORDER.find((d) => d.holdsDump(text))?.dumpFamilies?.(text) ?? families;
  }
  const status = statusOnce(req, run);
  const out: ServiceExplanation[] = [];
  const errors: string[] = [];
  for (const family of families) {
    try {
      const client = req.src ?? DEFAULT_REMOTE_CLIENT[family];
      if (req.from !== null) {
        const saved = req.statusFile === null ? null : statusFromFile(req.statusFile);
        const dump = await serviceSourceFromDump(req.from, req.mode, family, req.localIPs, saved, req.service);
        out.push(explainService(dump.source, req.service, family, dump.localIPs, client));
        continue;
      }
      const mode = req.mode ?? (await detectMode(run, family, req.pinRoot));
      if (mode === null) throw new ProxyError('KPT_NOT_FOUND', `${family}: ${NO_RULES}`);
      const locals = req.localIPs ?? (await kernelLocalIPs(run, family));
      const ctx: LiveContext = {
        run,
        netns: req.netns,
        family,
        pinRoot: req.pinRoot,
        service: req.service,
        sport: null,
        status,
      };
      out.push(
        await modeDriver(mode).withLive(ctx, (source) => explainService(source, req.service, family, locals, client)),
      );
    } catch (err) {
      errors.push(err instanceof Error ? err.message : String(err));
    }
  }
  if (out.length === 0) throw new ProxyError('KPT_NOT_FOUND', errors.join('; '));
  return out;
}

/** `explain --save`: the state of a mode that has no text form of its own (ebpf's maps). */
export async function saveState(req: SaveRequest, run: CommandRunner): Promise<string> {
  const mode = req.mode ?? (await detectMode(run, 'IPv4', req.pinRoot));
  if (mode === null) throw new ProxyError('KPT_NOT_FOUND', NO_RULES);
  const driver = modeDriver(mode);
  if (!driver.save) {
    const savers = SUPPORTED_MODES.filter((m) => modeDriver(m).save !== undefined).join(', ');
    throw new ProxyError(
      'KPT_FLAG_INVALID',
      `--save writes the state of ${savers} mode; in ${mode} mode save the state with its own tools for --from: ${driver.saveWith}`,
    );
  }
  const locals = [...(await kernelLocalIPs(run, 'IPv4')), ...(await kernelLocalIPs(run, 'IPv6'))];
  return driver.save(req.pinRoot, locals);
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
