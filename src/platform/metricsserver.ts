// The metrics server (upstream cmd/kube-proxy/app/server.go serveMetrics):
// /metrics, /metrics/slis, /healthz ("ok"), /proxyMode, /configz, /statusz and
// /flagz when their feature gates are on (zpages/), and /debug/pprof/ when
// enableProfiling is on (pprof/routes.ts). Plus the
// listener helper both it and the healthz server use: like upstream's
// wait.Until(..., 5s), a failed listen is retried every 5 s, unless hardFail
// (bindAddressHardFail), where the first failure is reported and retrying stops.

import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Registry } from './promclient.js';
import { ProxyError } from '../core/errors.js';
import { normalizeIP } from '../core/ip.js';
import type { Clock, TimerHandle } from '../core/clock.js';
import { realClock } from './clock.js';
import type { Logger } from './logger.js';
import type { ProxyMetrics } from './metrics.js';
import type { PprofRoutes } from './pprof/routes.js';
import { flagzHandler } from './zpages/flagz.js';
import { serveStatusz, type StatusSource } from './zpages/statusz.js';

export interface HostPort {
  /** Normalised IP; "" means every address (dual-stack ::). */
  readonly host: string;
  readonly port: number;
}

/**
 * "0.0.0.0:10256", "[::]:10256", "127.0.0.1:10249", ":10249". Empty -> null
 * (server disabled; the deprecated --healthz-port=0 is the config layer's to
 * turn into ""). Port 0 means an ephemeral port (tests). Anything else
 * malformed is a KPT_CONFIG_INVALID error.
 */
export function parseBindAddress(addr: string): HostPort | null {
  const s = addr.trim();
  if (s === '') return null;
  const m = /^(?:\[([^\]]*)\]|([^:[\]]*)):(\d{1,5})$/.exec(s);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535)
    throw new ProxyError('KPT_CONFIG_INVALID', `invalid bind address ${JSON.stringify(addr)}: want IP:port`);
  const rawHost = m[1] ?? m[2] ?? '';
  if (rawHost === '') return { host: '', port };
  const host = normalizeIP(rawHost);
  if (!host) throw new ProxyError('KPT_CONFIG_INVALID', `invalid bind address ${JSON.stringify(addr)}: bad IP`);
  return { host, port };
}

export interface ServeOptions {
  /** For logs and errors ("healthz", "metrics"). */
  readonly name: string;
  readonly address: HostPort;
  readonly handler: RequestListener;
  readonly log?: Logger;
  /** Milliseconds between listen attempts (upstream 5 s). */
  readonly retryInterval?: number;
  /** Stop retrying after the first failure (bindAddressHardFail). */
  readonly hardFail?: boolean;
  /**
   * A failure that will NOT be retried (hardFail): the caller should treat it
   * as fatal, as upstream does with bindAddressHardFail. Never called otherwise.
   */
  readonly onListenError?: (err: Error) => void;
  /** A failure that will be retried after retryInterval (for events/metrics). */
  readonly onListenRetry?: (err: Error) => void;
  readonly clock?: Clock;
}

/** An HTTP server that keeps trying to listen until it succeeds or is closed. */
export class RetryingServer {
  private readonly server: Server;
  private retry: TimerHandle | null = null;
  private closed = false;
  /** Settles when the listen attempt in progress (if any) has succeeded or failed. */
  private attempting: Promise<void> = Promise.resolve();
  private readyResolve!: (a: AddressInfo) => void;
  /** Resolves with the bound address once listening succeeds. */
  readonly ready: Promise<AddressInfo>;

  constructor(private readonly opts: ServeOptions) {
    this.server = createServer(opts.handler);
    this.ready = new Promise((resolve) => {
      this.readyResolve = resolve;
    });
    this.attempt();
  }

  private attempt(): void {
    if (this.closed) return;
    const { host, port } = this.opts.address;
    this.attempting = new Promise<void>((settle) => {
      const onError = (err: Error) => {
        this.server.off('listening', onListening);
        settle();
        this.opts.log?.error(
          { err, server: this.opts.name, address: `${host}:${port}` },
          `failed to start ${this.opts.name} server`,
        );
        if (this.closed) return;
        if (this.opts.hardFail) {
          this.opts.onListenError?.(err);
          return;
        }
        this.opts.onListenRetry?.(err);
        this.retry = (this.opts.clock ?? realClock).setTimer(this.opts.retryInterval ?? 5000, () => {
          this.retry = null;
          this.attempt();
        });
      };
      const onListening = () => {
        this.server.off('error', onError);
        settle();
        // Errors after a successful listen are logged, never fatal.
        this.server.on('error', (err) =>
          this.opts.log?.error({ err, server: this.opts.name }, `${this.opts.name} server error`),
        );
        const a = this.server.address() as AddressInfo;
        this.opts.log?.info(
          { server: this.opts.name, address: `${a.address}:${a.port}` },
          `${this.opts.name} server listening`,
        );
        this.readyResolve(a);
      };
      this.server.once('error', onError);
      this.server.once('listening', onListening);
      this.server.listen({ port, host: host === '' ? undefined : host });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.retry?.cancel();
    this.retry = null;
    await this.attempting;
    if (!this.server.listening) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Listening behaviour shared by the healthz and metrics servers (see ServeOptions). */
export type ListenOptions = Omit<ServeOptions, 'name' | 'address' | 'handler'>;

export interface MetricsServerOptions extends ListenOptions {
  readonly bindAddress: string;
  readonly metrics: ProxyMetrics;
  readonly proxyMode: string;
  /** The running configuration; /configz answers {"kubeproxy.config.k8s.io": config} like upstream's configz. */
  readonly config: unknown;
  /** Serves /statusz when set (feature gate ComponentStatusz). */
  readonly statusz?: StatusSource;
  /** Serves /flagz with these flag values when set (feature gate ComponentFlagz). */
  readonly flagz?: Readonly<Record<string, string>>;
  /** Serves /debug/pprof/ when set (enableProfiling); the caller owns it and closes it. */
  readonly pprof?: PprofRoutes;
}

function send(res: ServerResponse, status: number, contentType: string, body: string): void {
  res.writeHead(status, { 'Content-Type': contentType, 'X-Content-Type-Options': 'nosniff' });
  res.end(body);
}

/**
 * component-base's /healthz (one "ping" check) and its SLI metrics, served at
 * /metrics/slis: kubernetes_healthcheck{name,type} and
 * kubernetes_healthchecks_total{name,status,type}.
 */
class PingHealthz {
  readonly registry = new Registry();
  private readonly gauge = new Gauge({
    name: 'kubernetes_healthcheck',
    help: 'This metric records the result of a single healthcheck.',
    labelNames: ['name', 'type'],
    registers: [this.registry],
  });
  private readonly total = new Counter({
    name: 'kubernetes_healthchecks_total',
    help: 'This metric records the results of all healthcheck.',
    labelNames: ['name', 'status', 'type'],
    registers: [this.registry],
  });

  serve(res: ServerResponse, verbose: boolean): void {
    this.gauge.set({ name: 'ping', type: 'healthz' }, 1);
    this.total.inc({ name: 'ping', status: 'success', type: 'healthz' });
    send(res, 200, 'text/plain; charset=utf-8', verbose ? '[+]ping ok\nhealthz check passed\n' : 'ok');
  }
}

/** The metrics mux as a plain request handler (testable without sockets' retry logic). */
export function metricsHandler(
  opts: Pick<MetricsServerOptions, 'metrics' | 'proxyMode' | 'config' | 'statusz' | 'flagz' | 'pprof'>,
): RequestListener {
  const healthz = new PingHealthz();
  const flagz = opts.flagz ? flagzHandler(opts.flagz) : null;
  return (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const path = url.pathname;
    switch (path) {
      case '/metrics':
        opts.metrics.render().then(
          ({ contentType, body }) => send(res, 200, contentType, body),
          (err: unknown) => send(res, 500, 'text/plain; charset=utf-8', `error gathering metrics: ${String(err)}\n`),
        );
        return;
      case '/healthz':
      case '/healthz/ping':
        healthz.serve(res, url.searchParams.has('verbose'));
        return;
      case '/metrics/slis':
        healthz.registry.metrics().then(
          (body) => send(res, 200, healthz.registry.contentType, body),
          (err: unknown) => send(res, 500, 'text/plain; charset=utf-8', `error gathering metrics: ${String(err)}\n`),
        );
        return;
      case '/proxyMode':
        send(res, 200, 'text/plain; charset=utf-8', opts.proxyMode);
        return;
      case '/configz':
        send(res, 200, 'application/json', JSON.stringify({ 'kubeproxy.config.k8s.io': opts.config }));
        return;
      case '/statusz':
        if (opts.statusz) return serveStatusz(req, res, opts.statusz);
        break;
      case '/flagz':
        if (flagz) return flagz(req, res);
        break;
      default:
        if (opts.pprof && (path === '/debug/pprof' || path.startsWith('/debug/pprof/')))
          return opts.pprof.serve(req, res, path);
    }
    send(res, 404, 'text/plain; charset=utf-8', '404 page not found\n');
  };
}

/** Start the metrics server; null when bindAddress is empty (disabled). */
export function startMetricsServer(opts: MetricsServerOptions): RetryingServer | null {
  const address = parseBindAddress(opts.bindAddress);
  if (!address) return null;
  return new RetryingServer({
    name: 'metrics',
    address,
    handler: metricsHandler(opts),
    log: opts.log,
    hardFail: opts.hardFail,
    onListenError: opts.onListenError,
    onListenRetry: opts.onListenRetry,
    retryInterval: opts.retryInterval,
    clock: opts.clock,
  });
}
