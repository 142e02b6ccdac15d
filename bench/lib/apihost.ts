// The test API server (test/apiserver) as a benchmark's control plane, run
// inside the benchmark's network namespace beside the proxy under test:
//
//   ip netns exec <ns> node dist/bench/lib/apihost.js --dir D --services N --endpoints E
//
// It seeds N Services with one EndpointSlice of E endpoints each (bench/lib/
// objects.ts: shaped like a real server's objects, managedFields included),
// then serves on 127.0.0.1 and takes one JSON command per stdin line, answering
// each with one JSON line {id, ok, ...} on stdout. Being in the namespace, it
// also polls the proxy's /healthz and /metrics for the benchmark.
//
// Commands: healthy {timeoutMs} | metrics | change {service, ip?} | churn {rate, seconds, services}
//           | stop | start | compact | closeWatches | stats
// A change replaces endpoint 0 of one Service's slice with a fresh address (or
// `ip`) and stamps endpoints.kubernetes.io/last-change-trigger-time with the
// wall clock.
//
// --probes I,J,... --probe-ips A,B,...: those Services' endpoints are the
// given addresses (endpoint j takes address j mod their count) instead of
// made-up pod addresses, so that a benchmark with a listener there can open
// real connections through their ClusterIPs. The ready line also says how
// long the seeding took (seedMs). --pace N streams a watch-list's initial
// events N at a time (TestApiServer's paceInitialEvents); 0, the default:
// in one go.
import { request } from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as readline from 'node:readline';
import { parseArgs } from 'node:util';
import { TestApiServer } from '../../test/apiserver/server.js';
import { benchNode, churnIP, endpointSlice, service, serviceKey, sliceEndpoint, sliceName } from './objects.js';

const { values } = parseArgs({
  options: {
    dir: { type: 'string' },
    services: { type: 'string', default: '1000' },
    endpoints: { type: 'string', default: '5' },
    token: { type: 'string', default: 'kpt-bench-token' },
    probes: { type: 'string', default: '' },
    pace: { type: 'string', default: '0' },
    'probe-ips': { type: 'string', default: '' },
  },
});
const services = Number(values.services);
const endpoints = Number(values.endpoints);
// Watch connections are closed when the watch ends, as a real server (or the proxy in front of it) may.
const server = new TestApiServer({
  token: values.token,
  bookmarkIntervalMs: 60_000,
  connectionClose: { afterWatch: true },
  ...(Number(values.pace) > 0 ? { paceInitialEvents: Number(values.pace) } : {}),
});
const probes = new Set(values.probes!.split(',').filter(Boolean).map(Number));
const probeIPs = values['probe-ips']!.split(',').filter(Boolean);
const seedStart = Date.now();
for (let i = 0; i < services; i++) {
  server.create('services', service(i));
  const slice = endpointSlice(i, endpoints) as { endpoints: unknown[] };
  if (probes.has(i) && probeIPs.length > 0)
    slice.endpoints = slice.endpoints.map((_, j) => sliceEndpoint(i, j, probeIPs[j % probeIPs.length]!));
  server.create('endpointslices', slice);
}
server.create('nodes', benchNode());
server.compact();
const seedMs = Date.now() - seedStart;
await server.start();

const dir = values.dir!;
mkdirSync(dir, { recursive: true });
const kubeconfig = join(dir, 'kubeconfig');
writeFileSync(kubeconfig, server.kubeconfig(), { mode: 0o600 });

let churnCount = 0;

/** One endpoint change of Service i; returns the fresh address and the trigger time (epoch ms). */
function change(i: number, to?: string): { service: number; ip: string; at: number } {
  const { namespace } = serviceKey(i);
  const cur = server.get('endpointslices', namespace, sliceName(i)) as Record<string, unknown> & {
    metadata: { annotations?: Record<string, string> };
    endpoints: unknown[];
  };
  const ip = to ?? churnIP(churnCount++);
  const at = Date.now();
  cur.endpoints[0] = sliceEndpoint(i, 0, ip);
  cur.metadata.annotations = {
    ...cur.metadata.annotations,
    'endpoints.kubernetes.io/last-change-trigger-time': new Date(at).toISOString(),
  };
  server.update('endpointslices', cur);
  return { service: i, ip, at };
}

function httpGet(url: string, timeoutMs: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = request(url, { timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      res.on('error', () => resolve({ status: 0, body: '' }));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve({ status: 0, body: '' }));
    req.end();
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function churn(rate: number, seconds: number, among: number): Promise<unknown[]> {
  const out: unknown[] = [];
  const start = Date.now();
  const total = Math.round(rate * seconds);
  for (let k = 0; k < total; k++) {
    const due = start + (k * 1000) / rate;
    const wait = due - Date.now();
    if (wait > 0) await sleep(wait);
    // Spread over the Services with a fixed stride so consecutive changes hit different ones.
    out.push(change((k * 7919) % among));
  }
  return out;
}

async function handle(m: Record<string, unknown>): Promise<Record<string, unknown>> {
  switch (m['cmd']) {
    case 'healthy': {
      const deadline = Date.now() + Number(m['timeoutMs'] ?? 600_000);
      while (Date.now() < deadline) {
        const r = await httpGet('http://127.0.0.1:10256/healthz', 1000);
        if (r.status === 200) return { at: Date.now() };
        await sleep(50);
      }
      throw new Error('proxy not healthy in time');
    }
    case 'metrics':
      return { text: (await httpGet('http://127.0.0.1:10249/metrics', 5000)).body };
    case 'change':
      return change(Number(m['service']), typeof m['ip'] === 'string' ? m['ip'] : undefined);
    case 'churn':
      return { changes: await churn(Number(m['rate']), Number(m['seconds']), Number(m['services'] ?? services)) };
    case 'stop':
      await server.stop();
      return { at: Date.now() };
    case 'start':
      await server.start();
      return { at: Date.now() };
    case 'compact':
      server.compact();
      return { at: Date.now() };
    case 'closeWatches':
      server.closeWatches();
      return { at: Date.now() };
    case 'stats': {
      const byPath: Record<string, number> = {};
      for (const r of server.requests) {
        const k = `${r.query['watch'] === 'true' ? 'WATCH' : r.method} ${r.path}`;
        byPath[k] = (byPath[k] ?? 0) + 1;
      }
      return {
        requests: byPath,
        openWatches: server.openWatches,
        abortedHandshakes: server.abortedHandshakes,
        handshakes: server.handshakes,
      };
    }
    default:
      throw new Error(`unknown command ${String(m['cmd'])}`);
  }
}

process.stdout.write(JSON.stringify({ ready: true, url: server.url, kubeconfig, seedMs }) + '\n');
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return;
  }
  handle(m).then(
    (r) => process.stdout.write(JSON.stringify({ id: m['id'], ok: true, ...r }) + '\n'),
    (e: unknown) => process.stdout.write(JSON.stringify({ id: m['id'], ok: false, error: String(e) }) + '\n'),
  );
});
const shutdown = (): void => {
  void server.dispose().then(() => process.exit(0));
};
process.stdin.on('end', shutdown);
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
