// `kube-proxy-ts status [WORD...] [--address HOST:PORT] [--netns NAME] [-o table|json]`
// Asks a running proxy for its status (GET /statusz?format=json on its
// metrics address) and prints the same view as the /statusz page as terminal
// tables, or the JSON document. WORDs keep only the service ports whose row
// contains every word (as the page's search box does).
// Exit codes: 0 = printed, 2 = bad flags, proxy unreachable, or /statusz off.

import { parseArgs } from 'node:util';
import { ProxyError } from '../core/errors.js';
import type { ServicePortDoc, StatusDoc } from '../engine/statusview.js';
import { netnsRunner } from '../platform/exec.js';
import { parseBindAddress } from '../platform/metricsserver.js';
import { statusTable } from './statustable.js';

export const STATUS_USAGE = `Usage: kube-proxy-ts status [WORD...] [flags]

Print what a running kube-proxy-ts on this node programs: mode, version, the last
sync of each IP family, and one row per Service port with its addresses, the
endpoints it uses and why it leaves out the others (the /statusz page as a table).
WORDs keep only the Service ports whose row has every one of them, for example
"default/web" or "local-policy".

Flags:
  --address HOST:PORT    the proxy's metrics address (default 127.0.0.1:10249)
  --netns NAME           ask the proxy running in this network namespace (ip netns)
  -o, --output F         table (default) or json
`;

export interface StatusRequest {
  readonly address: string;
  readonly netns: string | null;
  readonly output: 'table' | 'json';
  readonly words: readonly string[];
}

export function parseStatusArgs(argv: readonly string[]): StatusRequest | 'help' {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      address: { type: 'string' },
      netns: { type: 'string' },
      output: { type: 'string', short: 'o' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  const output = values.output ?? 'table';
  if (output !== 'table' && output !== 'json')
    throw new ProxyError('KPT_FLAG_INVALID', `--output: want table or json, got ${JSON.stringify(output)}`);
  const address = values.address ?? '127.0.0.1:10249';
  const hp = parseBindAddress(address);
  if (!hp || hp.port === 0)
    throw new ProxyError('KPT_FLAG_INVALID', `--address: want HOST:PORT, got ${JSON.stringify(address)}`);
  return { address, netns: values.netns ?? null, output, words: positionals.map((w) => w.toLowerCase()) };
}

/** Every word of `words` occurs in the row's text (names, addresses, endpoints, nodes, reasons). */
export function rowMatches(r: ServicePortDoc, words: readonly string[]): boolean {
  const text = JSON.stringify(r).toLowerCase();
  return words.every((w) => text.includes(w));
}

function url(address: string): string {
  const hp = parseBindAddress(address)!;
  const host = hp.host === '' || hp.host === '0.0.0.0' ? '127.0.0.1' : hp.host === '::' ? '::1' : hp.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${hp.port}/statusz?format=json`;
}

/** GET the status document; a ProxyError with a message for operators when that fails. */
export async function fetchStatus(address: string): Promise<StatusDoc> {
  let res: Response;
  try {
    res = await fetch(url(address), { signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    const why = (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;
    throw new ProxyError(
      'KPT_NOT_FOUND',
      `cannot reach kube-proxy-ts at ${address} (${why}); is it running here, with --metrics-bind-address ${address}?`,
    );
  }
  const body = await res.text();
  if (res.status === 404)
    throw new ProxyError('KPT_NOT_FOUND', `${address} does not serve /statusz (feature gate ComponentStatusz=false?)`);
  if (res.status !== 200)
    throw new ProxyError('KPT_NOT_FOUND', `${address}/statusz answered ${res.status}: ${body.trim()}`);
  const doc = (JSON.parse(body) as { proxy?: StatusDoc }).proxy;
  if (!doc || !Array.isArray(doc.servicePorts))
    throw new ProxyError('KPT_NOT_FOUND', `${address}/statusz?format=json has no status document: not kube-proxy-ts?`);
  return doc;
}

/** Run ourselves again inside the namespace (a socket cannot be opened into another netns from here). */
async function inNamespace(ns: string, argv: readonly string[]): Promise<number> {
  const rest = argv.filter((a, i) => a !== '--netns' && argv[i - 1] !== '--netns' && !a.startsWith('--netns='));
  const r = await netnsRunner(ns)(process.execPath, [...process.execArgv, process.argv[1]!, 'status', ...rest], {
    allowFailure: true,
  }).catch((e: Error) => ({ stdout: '', stderr: `Error: ${e.message}\n`, code: 2 }));
  process.stdout.write(r.stdout);
  process.stderr.write(r.stderr);
  return r.code;
}

export async function runStatus(argv: readonly string[]): Promise<number> {
  let req: StatusRequest | 'help';
  try {
    req = parseStatusArgs(argv);
  } catch (err) {
    process.stderr.write(`Error: ${(err as Error).message}\n${STATUS_USAGE}`);
    return 2;
  }
  if (req === 'help') {
    process.stdout.write(STATUS_USAGE);
    return 0;
  }
  if (req.netns) return inNamespace(req.netns, argv);
  let doc: StatusDoc;
  try {
    doc = await fetchStatus(req.address);
  } catch (err) {
    process.stderr.write(`Error: ${(err as Error).message}\n`);
    return 2;
  }
  const words = req.words;
  const filtered = words.length ? { ...doc, servicePorts: doc.servicePorts.filter((r) => rowMatches(r, words)) } : doc;
  process.stdout.write(req.output === 'json' ? `${JSON.stringify(filtered, null, 2)}\n` : statusTable(filtered, words));
  return 0;
}
