// The proxy's responsiveness, watched from beside it in its network namespace:
//
//   ip netns exec <ns> node dist/bench/lib/loopwatch-child.js [--window-s 10] [--probe-ms 200]
//
// Every --probe-ms it asks /healthz (127.0.0.1:10256) and times the answer
// (one request in flight at a time, so a stalled proxy is seen as one long
// answer, not a pile of them). Every --window-s it scrapes /metrics
// (127.0.0.1:10249) for the proxy's own event-loop delay over the window:
// prom-client's nodejs_eventloop_lag_{p99,max}_seconds come from
// perf_hooks.monitorEventLoopDelay and are reset at every scrape, so with this
// the only scraper each value is one window's. Prints one JSON line per window:
//   {t, loopP99Ms, loopMaxMs, healthMaxMs, healthSlow, healthProbes, healthFailed, metricsMs}
// t is the window's end (epoch ms); healthSlow counts answers slower than 1 s;
// healthFailed counts probes without any HTTP answer (connection refused
// before the server listens, or no answer within 10 s).
import { request } from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    'window-s': { type: 'string', default: '10' },
    'probe-ms': { type: 'string', default: '200' },
  },
});
const WINDOW_MS = Number(values['window-s']) * 1000;
const PROBE_MS = Number(values['probe-ms']);

function get(url: string, timeoutMs: number): Promise<{ status: number; body: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const done = (status: number, body: string): void => resolve({ status, body, ms: performance.now() - t0 });
    const req = request(url, { timeout: timeoutMs, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => done(res.statusCode ?? 0, Buffer.concat(chunks).toString()));
      res.on('error', () => done(0, ''));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => done(0, ''));
    req.end();
  });
}

let healthMaxMs = 0;
let healthSlow = 0;
let healthProbes = 0;
let healthFailed = 0;
let stopped = false;

async function probeLoop(): Promise<void> {
  while (!stopped) {
    const started = performance.now();
    const r = await get('http://127.0.0.1:10256/healthz', 10_000);
    healthProbes++;
    if (r.status === 0) healthFailed++;
    else {
      healthMaxMs = Math.max(healthMaxMs, r.ms);
      if (r.ms > 1000) healthSlow++;
    }
    const wait = PROBE_MS - (performance.now() - started);
    if (wait > 0) await new Promise((res) => setTimeout(res, wait));
  }
}

const gauge = (text: string, name: string): number => {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) * 1000 : NaN;
};

async function windowLoop(): Promise<void> {
  let next = Date.now() + WINDOW_MS;
  while (!stopped) {
    await new Promise((res) => setTimeout(res, Math.max(0, next - Date.now())));
    next += WINDOW_MS;
    const m = await get('http://127.0.0.1:10249/metrics', 10_000);
    const line = {
      t: Date.now(),
      loopP99Ms: gauge(m.body, 'nodejs_eventloop_lag_p99_seconds'),
      loopMaxMs: gauge(m.body, 'nodejs_eventloop_lag_max_seconds'),
      healthMaxMs: Math.round(healthMaxMs),
      healthSlow,
      healthProbes,
      healthFailed,
      metricsMs: m.status === 0 ? NaN : Math.round(m.ms),
    };
    healthMaxMs = healthSlow = healthProbes = healthFailed = 0;
    process.stdout.write(JSON.stringify(line) + '\n');
  }
}

const stop = (): void => {
  stopped = true;
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.resume();
void probeLoop();
void windowLoop();
