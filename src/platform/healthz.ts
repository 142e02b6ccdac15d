// The proxy healthz server (upstream ProxyHealthServer.Run, pkg/proxy/healthcheck/proxy_health.go):
// /healthz and /livez over HTTP, bodies and codes from engine/health.ts,
// counted in kubeproxy_proxy_healthz_total / livez_total by code. Any other
// path is 404 (Go ServeMux with exact patterns). Listening is retried every
// 5 s like upstream serveHealthz; see RetryingServer.

import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { HealthResponse, ProxyHealthState } from '../engine/health.js';
import { parseBindAddress, RetryingServer, type ListenOptions } from './metricsserver.js';

/** What the healthz server counts; ProxyMetrics implements it. */
export interface HealthzCounters {
  healthzServed(code: number): void;
  livezServed(code: number): void;
}

export interface HealthzServerOptions extends ListenOptions {
  /** "0.0.0.0:10256", "[::]:10256"; "" disables the server. */
  readonly bindAddress: string;
  readonly state: ProxyHealthState;
  readonly counters?: HealthzCounters;
}

function write(res: ServerResponse, r: HealthResponse): void {
  res.writeHead(r.status, { ...r.headers });
  res.end(r.body);
}

export function healthzHandler(state: ProxyHealthState, counters?: HealthzCounters): RequestListener {
  return (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path === '/healthz') {
      const r = state.healthzResponse();
      counters?.healthzServed(r.status);
      write(res, r);
    } else if (path === '/livez') {
      const r = state.livezResponse();
      counters?.livezServed(r.status);
      write(res, r);
    } else {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' });
      res.end('404 page not found\n');
    }
  };
}

/** Start the healthz server; null when bindAddress is empty (disabled). */
export function startHealthzServer(opts: HealthzServerOptions): RetryingServer | null {
  const address = parseBindAddress(opts.bindAddress);
  if (!address) return null;
  return new RetryingServer({
    name: 'healthz',
    address,
    handler: healthzHandler(opts.state, opts.counters),
    log: opts.log,
    hardFail: opts.hardFail,
    onListenError: opts.onListenError,
    onListenRetry: opts.onListenRetry,
    retryInterval: opts.retryInterval,
    clock: opts.clock,
  });
}
