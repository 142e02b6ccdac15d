// `kube-proxy-ts explain --src IP --dst IP --port N [--protocol tcp|udp|sctp]
//   [--mode iptables|nftables|ebpf] [--netns NAME] [--iif IFACE] [--local-ip IP ...]
//   [--sport N] [--ebpf-pin-path PATH] [--output text|json]`
// Reads the LIVE ruleset (iptables-save, the nftables kube-proxy table, or
// the ebpf mode's pinned maps) of this host or of a named network namespace,
// walks one new connection's
// first packet through it with the mode's pure tracer, and prints every rule
// it matched, the verdict (DNAT candidates with probabilities, REJECT, DROP,
// or "not a service address") and whether it is masqueraded. Reads only:
// nothing is ever written to the kernel.
// Exit codes: 0 = explained, 2 = bad flags or the ruleset could not be read.

import { parseArgs } from 'node:util';
import { ProxyError } from '../core/errors.js';
import { ipFamilyOf, normalizeIP } from '../core/ip.js';
import type { IPFamily, Protocol } from '../core/types.js';
import { Fake } from '../dataplane/iptables/fake.js';
import { trace as traceIptables } from '../dataplane/iptables/trace.js';
import { hostRunner, netnsRunner, type CommandRunner } from '../platform/exec.js';
import { explainNftables } from './explainnft.js';
import { explainEbpf } from './explainebpf.js';
import { DEFAULT_EBPF_OPTIONS } from '../dataplane/ebpf/options.js';
import { PinnedMaps } from '../platform/ebpf/pinned.js';
import { explanationText, serviceFromComment, summarize, type Explanation } from './explainview.js';

export const EXPLAIN_USAGE = `Usage: kube-proxy-ts explain --src IP --dst IP --port N [flags]

Walk one new connection's first packet through the kube-proxy rules the kernel
holds now and print every rule it matches and what happens to it.

Flags:
  --src IP               source address of the packet (required)
  --dst IP               destination address (required)
  --port N               destination port (required)
  --protocol P           tcp, udp or sctp (default tcp)
  --mode M               iptables, nftables or ebpf (default: detect from the kernel)
  --netns NAME           read the rules of this network namespace (ip netns)
  --iif IFACE            input interface of a remote packet (bridge/interface local detectors)
  --local-ip IP          a node address (repeatable; default: the addresses of the host or netns)
  --sport N              source port (ebpf Maglev services: the one endpoint this flow gets)
  --ebpf-pin-path PATH   where the ebpf mode pinned its maps (default /sys/fs/bpf/kube-proxy-ts)
  --output F             text (default) or json
`;

export interface ExplainRequest {
  readonly src: string;
  readonly dst: string;
  readonly port: number;
  readonly protocol: Protocol;
  readonly mode: 'iptables' | 'nftables' | 'ebpf' | null;
  readonly netns: string | null;
  readonly iif: string | null;
  readonly localIPs: readonly string[] | null;
  readonly output: 'text' | 'json';
  readonly sport: number | null;
  readonly pinRoot: string;
}

const bad = (msg: string): never => {
  throw new ProxyError('KPT_FLAG_INVALID', msg);
};

export function parseExplainArgs(argv: readonly string[]): ExplainRequest | 'help' {
  const { values } = parseArgs({
    args: [...argv],
    allowPositionals: false,
    strict: true,
    options: {
      src: { type: 'string' },
      dst: { type: 'string' },
      port: { type: 'string' },
      protocol: { type: 'string' },
      mode: { type: 'string' },
      netns: { type: 'string' },
      iif: { type: 'string' },
      'local-ip': { type: 'string', multiple: true },
      sport: { type: 'string' },
      'ebpf-pin-path': { type: 'string' },
      output: { type: 'string', short: 'o' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  const src = normalizeIP(values.src) ?? bad(`--src: not an IP address: ${values.src ?? '(missing)'}`);
  const dst = normalizeIP(values.dst) ?? bad(`--dst: not an IP address: ${values.dst ?? '(missing)'}`);
  if (ipFamilyOf(src) !== ipFamilyOf(dst)) bad('--src and --dst must be of the same IP family');
  const port = Number(values.port);
  if (!/^\d+$/.test(values.port ?? '') || port < 1 || port > 65535)
    bad(`--port: not a port: ${values.port ?? '(missing)'}`);
  const proto = (values.protocol ?? 'tcp').toUpperCase();
  if (proto !== 'TCP' && proto !== 'UDP' && proto !== 'SCTP')
    bad(`--protocol: tcp, udp or sctp, not ${values.protocol}`);
  const mode = values.mode ?? null;
  if (mode !== null && mode !== 'iptables' && mode !== 'nftables' && mode !== 'ebpf')
    bad(`--mode: iptables, nftables or ebpf, not ${mode}`);
  const sport = values.sport === undefined ? null : Number(values.sport);
  if (sport !== null && (!/^\d+$/.test(values.sport ?? '') || sport < 1 || sport > 65535))
    bad(`--sport: not a port: ${values.sport}`);
  const output = values.output ?? 'text';
  if (output !== 'text' && output !== 'json') bad(`--output: text or json, not ${output}`);
  const locals = (values['local-ip'] ?? []).map((ip) => normalizeIP(ip) ?? bad(`--local-ip: not an IP address: ${ip}`));
  return {
    src,
    dst,
    port,
    protocol: proto as Protocol,
    mode: mode as ExplainRequest['mode'],
    netns: values.netns ?? null,
    iif: values.iif ?? null,
    localIPs: locals.length > 0 ? locals : null,
    output: output as 'text' | 'json',
    sport,
    pinRoot: values['ebpf-pin-path'] ?? DEFAULT_EBPF_OPTIONS.pinRoot,
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
 * iptables when the nat table has KUBE-SERVICES, else nftables when the
 * kube-proxy table exists, else ebpf when its maps are pinned under pinRoot.
 */
export async function detectMode(
  run: CommandRunner,
  family: IPFamily,
  pinRoot: string = DEFAULT_EBPF_OPTIONS.pinRoot,
): Promise<'iptables' | 'nftables' | 'ebpf' | null> {
  const save = await run(family === 'IPv4' ? 'iptables-save' : 'ip6tables-save', ['-t', 'nat'], { allowFailure: true });
  if (save.code === 0 && /^:KUBE-SERVICES /m.test(save.stdout)) return 'iptables';
  const nft = await run('nft', ['list', 'table', family === 'IPv4' ? 'ip' : 'ip6', 'kube-proxy'], {
    allowFailure: true,
  });
  if (nft.code === 0) return 'nftables';
  return PinnedMaps.present(pinRoot) ? 'ebpf' : null;
}

export async function explainIptables(
  run: CommandRunner,
  req: ExplainRequest,
  family: IPFamily,
  localIPs: readonly string[],
): Promise<Explanation> {
  const save = await run(family === 'IPv4' ? 'iptables-save' : 'ip6tables-save', []);
  const fake = new Fake();
  fake.load(save.stdout);
  const r = traceIptables(
    fake,
    { src: req.src, dst: req.dst, port: req.port, protocol: req.protocol, ...(req.iif ? { iif: req.iif } : {}) },
    localIPs,
    { strict: false },
  );
  const service = r.steps.map((s) => serviceFromComment(s.comment)).find((x) => x !== null) ?? null;
  const candidates = r.candidates.map((c) => ({ endpoint: c.endpoint, probability: c.probability }));
  return {
    mode: 'iptables',
    packet: { src: req.src, dst: req.dst, port: req.port, protocol: req.protocol },
    service,
    verdict: r.verdict,
    candidates,
    masquerade: r.masq && r.verdict === 'DNAT',
    steps: r.steps.map((s) => ({
      where: `${s.table}/${s.chain}`,
      rule: s.rule,
      comment: s.comment,
      depth: s.depth,
      probability: s.probability,
    })),
    notUnderstood: r.notUnderstood,
    summary: summarize(service, r.verdict, candidates, r.masq),
  };
}

export async function explain(req: ExplainRequest, run: CommandRunner): Promise<Explanation> {
  const family = ipFamilyOf(req.dst)!;
  const locals = req.localIPs ?? (await kernelLocalIPs(run, family));
  const mode = req.mode ?? (await detectMode(run, family, req.pinRoot));
  if (mode === null)
    throw new ProxyError(
      'KPT_NOT_FOUND',
      'no kube-proxy rules found (no KUBE-SERVICES chain, no kube-proxy nftables table, no pinned ebpf maps); use --mode to force one',
    );
  if (mode === 'ebpf') return explainEbpf(req, family, locals, req.pinRoot);
  return mode === 'iptables' ? explainIptables(run, req, family, locals) : explainNftables(run, req, family, locals);
}

/** Where a subcommand writes (tests capture it). */
export interface CmdIO {
  readonly out: (s: string) => void;
  readonly err: (s: string) => void;
}
export const PROCESS_IO: CmdIO = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) };

export async function runExplain(argv: string[], io: CmdIO = PROCESS_IO): Promise<number> {
  let req: ExplainRequest | 'help';
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
    const e = await explain(req, req.netns === null ? hostRunner : netnsRunner(req.netns));
    io.out(req.output === 'json' ? `${JSON.stringify(e, null, 2)}\n` : explanationText(e));
    return 0;
  } catch (err) {
    io.err(`Error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }
}
