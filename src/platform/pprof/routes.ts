// /debug/pprof/ on the metrics server when enableProfiling is on (upstream
// installs Go's net/http/pprof there). What Go serves that V8 can produce:
//
//   /debug/pprof/              this list, as HTML
//   /debug/pprof/profile       CPU profile, ?seconds=N (default 30, at most
//                              MAX_SECONDS); pprof protobuf, gzipped, as Go
//                              writes it; ?format=cpuprofile for V8's JSON
//   /debug/pprof/heap          in-use heap (sampled since start-up), ?gc=1 to
//                              collect first; ?format=heapprofile for V8's JSON
//   /debug/pprof/heapsnapshot  a full V8 heap snapshot, to loopback clients only
//   /debug/pprof/cmdline       the command line, NUL-separated
//
// The pprof encoder (convert.ts, pprof-format) is imported on the first pprof
// request, not before.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { gzip as gzipCb } from 'node:zlib';
import { hasCode } from '../../core/errors.js';
import type { Logger } from '../logger.js';
import { CPU_INTERVAL_MICROS, HEAP_INTERVAL_BYTES, V8Profiler } from './profiler.js';

const gzip = promisify(gzipCb);

/** Go's default profile length. */
export const DEFAULT_SECONDS = 30;
/** The longest CPU profile served: V8 keeps every tick (1,000 a second) in memory until the profile ends. */
export const MAX_SECONDS = 300;

export interface PprofRoutes {
  /** Answers a request whose path is /debug/pprof or under it. */
  serve(req: IncomingMessage, res: ServerResponse, path: string): void;
  /** Stops heap sampling and ends the inspector session. */
  close(): Promise<void>;
}

const PROFILES: readonly (readonly [string, string])[] = [
  [
    'profile',
    `CPU profile of the main thread. ?seconds=N (default ${DEFAULT_SECONDS}, at most ${MAX_SECONDS}); ` +
      'pprof format, or V8 .cpuprofile JSON with ?format=cpuprofile.',
  ],
  [
    'heap',
    'Sampled allocations still in use, collected since start-up. ?gc=1 collects garbage first; ' +
      'pprof format, or V8 .heapprofile JSON with ?format=heapprofile.',
  ],
  [
    'heapsnapshot',
    'Full V8 heap snapshot (.heapsnapshot, for Chrome DevTools). Pauses the proxy while taken; ' +
      'it holds every string in memory, so it is served to loopback clients only.',
  ],
  ['cmdline', 'The command line of this process, arguments separated by NUL bytes.'],
];

function indexPage(): string {
  const rows = PROFILES.map(
    ([name, what]) => `<tr><td><a href="/debug/pprof/${name}">${name}</a></td><td>${what}</td></tr>`,
  ).join('\n');
  return `<html><head><title>/debug/pprof/</title></head><body>
<p>kube-proxy-ts profiles (V8). Open the pprof ones with <code>go tool pprof</code>, e.g.
<code>go tool pprof http://127.0.0.1:10249/debug/pprof/profile?seconds=30</code>;
the V8 ones in Chrome DevTools.</p>
<table>
${rows}
</table>
</body></html>
`;
}

function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' });
  res.end(body.endsWith('\n') ? body : `${body}\n`);
}

function attachment(res: ServerResponse, contentType: string, filename: string, length?: number): void {
  res.writeHead(200, {
    'Content-Type': contentType,
    'Content-Disposition': `attachment; filename="${filename}"`,
    'X-Content-Type-Options': 'nosniff',
    ...(length !== undefined ? { 'Content-Length': length } : {}),
  });
}

/** The seconds a CPU profile should run, or a message saying why the value is refused. */
export function parseSeconds(raw: string | null): number | string {
  if (raw === null || raw === '') return DEFAULT_SECONDS;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_SECONDS)
    return `invalid seconds ${JSON.stringify(raw)}: want a whole number from 1 to ${MAX_SECONDS}`;
  return Number(raw);
}

/** True for 127.0.0.0/8 and ::1, also as IPv4-mapped IPv6. */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.toLowerCase().replace(/^::ffff:(?=\d+\.)/, '');
  if (isIP(a) === 4) return a.startsWith('127.');
  return a === '::1';
}

type Converter = typeof import('./convert.js');

export function startProfiling(opts: { log?: Logger } = {}): PprofRoutes {
  const profiler = new V8Profiler();
  profiler.ready().then(
    () => opts.log?.info({ heapSamplingIntervalBytes: HEAP_INTERVAL_BYTES }, 'profiling enabled under /debug/pprof/'),
    (err: unknown) => opts.log?.error({ err }, 'profiling: could not start heap sampling'),
  );
  let converter: Promise<Converter> | undefined;
  const convert = () => (converter ??= import('./convert.js'));

  const fail = (res: ServerResponse, err: unknown) => {
    if (res.headersSent) return void res.destroy();
    if (hasCode(err, 'KPT_BUSY')) return text(res, 409, (err as Error).message);
    opts.log?.error({ err }, 'profiling request failed');
    text(res, 500, `profiling failed: ${String(err)}`);
  };

  const send = async (res: ServerResponse, body: Uint8Array, filename: string, gzipped: boolean) => {
    const data = gzipped ? await gzip(body) : body;
    attachment(res, gzipped ? 'application/octet-stream' : 'application/json', filename, data.byteLength);
    res.end(data);
  };

  async function cpu(url: URL, res: ServerResponse): Promise<void> {
    const seconds = parseSeconds(url.searchParams.get('seconds'));
    if (typeof seconds === 'string') return text(res, 400, seconds);
    const format = url.searchParams.get('format') ?? 'pprof';
    if (format !== 'pprof' && format !== 'cpuprofile')
      return text(res, 400, `invalid format ${JSON.stringify(format)}: want pprof or cpuprofile`);
    // A client that gives up ends the profile early, as Go's handler does.
    const gone = new AbortController();
    res.once('close', () => gone.abort());
    opts.log?.info({ seconds, format }, 'profiling: taking a CPU profile');
    const { profile, timeNanos } = await profiler.cpuProfile(seconds, gone.signal);
    if (gone.signal.aborted) return;
    if (format === 'cpuprofile') return send(res, Buffer.from(JSON.stringify(profile)), 'profile.cpuprofile', false);
    const { cpuProfileToPprof } = await convert();
    const pprof = cpuProfileToPprof(profile, { timeNanos, intervalMicros: CPU_INTERVAL_MICROS });
    await send(res, pprof.encode(), 'profile', true);
  }

  async function heap(url: URL, res: ServerResponse): Promise<void> {
    if (url.searchParams.has('seconds'))
      return text(res, 400, 'heap: seconds (a delta profile) is not supported; the heap profile is what is in use now');
    const format = url.searchParams.get('format') ?? 'pprof';
    if (format !== 'pprof' && format !== 'heapprofile')
      return text(res, 400, `invalid format ${JSON.stringify(format)}: want pprof or heapprofile`);
    const { profile, timeNanos } = await profiler.heapProfile(url.searchParams.get('gc') === '1');
    if (format === 'heapprofile') return send(res, Buffer.from(JSON.stringify(profile)), 'heap.heapprofile', false);
    const { heapProfileToPprof } = await convert();
    const pprof = heapProfileToPprof(profile, { timeNanos, intervalBytes: HEAP_INTERVAL_BYTES });
    await send(res, pprof.encode(), 'heap', true);
  }

  async function snapshot(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!isLoopback(req.socket.remoteAddress))
      return text(
        res,
        403,
        'heapsnapshot: served to loopback clients only (it holds every string in memory, credentials included); ' +
          'fetch it from the node itself, e.g. through kubectl port-forward',
      );
    const stream = profiler.heapSnapshot();
    opts.log?.info({}, 'profiling: writing a heap snapshot');
    attachment(res, 'application/json', 'kube-proxy-ts.heapsnapshot');
    await pipeline(stream, res);
  }

  return {
    serve(req, res, path) {
      const url = new URL(req.url ?? '/', 'http://x');
      const name = path.replace(/^\/debug\/pprof\/?/, '');
      let work: Promise<void> | void;
      switch (name) {
        case '':
          res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'X-Content-Type-Options': 'nosniff' });
          return void res.end(indexPage());
        case 'profile':
          work = cpu(url, res);
          break;
        case 'heap':
          work = heap(url, res);
          break;
        case 'heapsnapshot':
          work = snapshot(req, res);
          break;
        case 'cmdline':
          res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' });
          return void res.end(process.argv.join('\0'));
        default:
          return text(res, 404, `unknown profile ${JSON.stringify(name)}; see /debug/pprof/`);
      }
      work?.catch((err: unknown) => fail(res, err));
    },
    close: () => profiler.close(),
  };
}
