// The proxy's Kubernetes client: list (paginated), watch (JSON lines) and
// event posting over node:https, with the credentials of credentials.ts, the
// client-side rate limit of clientConnection.qps/burst, and a reachability
// probe that lets the reflectors resume the moment an API server that was
// down answers again. It replaces @kubernetes/client-node, whose import alone
// cost ~67 MiB of RSS (it loads the whole generated API).
//
// Contracts:
// - Every non-2xx answer rejects with ApiStatusError carrying the Status the
//   server sent (code, reason, message). A 401 also tells the credentials to
//   refresh (rotated token file, expired exec credential) before the next try.
// - Objects are handed over as the parsed JSON the server sent (no classes,
//   no Date fields); callers transform them.
// - JSON only: requests say `Accept: application/json` (see contentType in
//   docs/compatibility.md: protobuf is accepted in the config and JSON is spoken).
// - Every request takes a token from the rate limiter first; events have a
//   bucket of their own (upstream uses a separate client for them), so a burst
//   of events never delays a list or a watch.
// - A dead path is noticed without the server's help (docs/compatibility.md,
//   "API client"): every socket has TCP keepalive after KEEPALIVE_IDLE_MS of
//   silence (libuv then probes every second, ten times, so a watch whose peer
//   vanished fails ~20 s after its last byte); a connect must finish within
//   CONNECT_TIMEOUT_MS (a black-holed SYN otherwise waits ~2 min for the
//   kernel); a reply's headers must come within the request timeout and its
//   body may then pause at most BODY_IDLE_TIMEOUT_MS (a list stalled mid-body).
// - A 429/5xx carrying Retry-After rejects with ApiStatusError.retryAfterSeconds;
//   the reflectors wait at least that long.
// - A GET that fails on a reused keep-alive connection before any reply byte
//   (the server closed it as we wrote) is sent again at once (send()).
// - The API server never sees a TLS handshake we opened and dropped: the
//   reachability probe finishes its handshakes (reachability.ts).

import { type ClientRequest, type IncomingMessage, request as httpRequest } from 'node:http';
import { Agent, request as httpsRequest } from 'node:https';
import { isIP, type Socket } from 'node:net';
import type { Clock } from '../../core/clock.js';
import { ProxyError, SystemError } from '../../core/errors.js';
import { realClock } from '../clock.js';
import { Credentials, type CredentialsOptions } from './credentials.js';
import { ListBodyParser } from './liststream.js';
import type { ClientConfig } from './kubeconfig.js';
import { ReachabilityProbe } from './reachability.js';
import { TokenBucket } from './ratelimit.js';
import {
  AbortError,
  ApiStatusError,
  fromStatus,
  parseRetryAfter,
  type ListResult,
  type ListWatchTransport,
  type Query,
} from './transport.js';

export interface KubeClientOptions {
  /** clientConnection.qps; < 0 = unlimited. Default 5. */
  readonly qps?: number;
  /** clientConnection.burst. Default 10. */
  readonly burst?: number;
  readonly clock?: Clock;
  readonly userAgent?: string;
  readonly credentials?: Omit<CredentialsOptions, 'clock'>;
  /** Interval of the reachability probe while the server is down (jittered ±50 %). Default 250 ms. */
  readonly probeIntervalMs?: number;
  /** Random source for jitter; default Math.random. */
  readonly random?: () => number;
  /** Dead-path detection; defaults KEEPALIVE_IDLE_MS, CONNECT_TIMEOUT_MS, BODY_IDLE_TIMEOUT_MS (tests shorten them). */
  readonly timeouts?: { readonly keepaliveIdleMs?: number; readonly connectMs?: number; readonly bodyIdleMs?: number };
}

/** A list page is at most 500 objects; a minute is ample even on a loaded control plane. */
const REQUEST_TIMEOUT_MS = 60_000;
/** A watch must at least answer with headers within this time. */
const WATCH_HEADERS_TIMEOUT_MS = 30_000;
/** Silence before the first TCP keepalive probe (libuv: then 10 probes 1 s apart). */
export const KEEPALIVE_IDLE_MS = 10_000;
/** A TCP connect (SYN to SYN-ACK) longer than this is a path that drops packets. */
export const CONNECT_TIMEOUT_MS = 5_000;
/**
 * Once a list reply has started, the server writes it in one go: a pause this
 * long mid-body is a stalled reply (the connection may be alive, so keepalive
 * would never notice).
 */
export const BODY_IDLE_TIMEOUT_MS = 10_000;
/**
 * How a kept-alive socket the server had closed fails a request written on
 * it: "socket hang up" (the close came before any reply) or a write into a
 * reset connection.
 */
const STALE_CODES = new Set(['ECONNRESET', 'EPIPE']);
const STALE_CONNECTION = Symbol('staleConnection');
/** A bound for the pool's idle sockets all found dead at once (a restart behind a load balancer). */
const MAX_STALE_RETRIES = 8;
type StaleMark = { [STALE_CONNECTION]?: boolean };

/** The request failed on a reused connection before any reply: it never reached the server's handler. */
function isStaleConnection(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as StaleMark)[STALE_CONNECTION] === true;
}

/** Errors that mean the server could not be reached at all (not that it answered badly). */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN']);
/** Of those, the ones where no byte of the request can have reached the server: its rate-limit token goes back. */
const NEVER_SENT_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN']);

export class KubeClient implements ListWatchTransport {
  private readonly base: URL;
  private readonly agent: Agent | undefined;
  private readonly creds: Credentials;
  private readonly limiter: TokenBucket;
  private readonly eventLimiter: TokenBucket;
  private readonly clock: Clock;
  private readonly userAgent: string;
  private readonly probe: ReachabilityProbe;
  private readonly keepaliveIdleMs: number;
  private readonly connectTimeoutMs: number;
  private readonly bodyIdleMs: number;
  /** Requests sent again because the server had closed the kept-alive connection they went out on. */
  staleRetries = 0;

  constructor(
    readonly config: ClientConfig,
    opts: KubeClientOptions = {},
  ) {
    this.base = new URL(config.server);
    this.clock = opts.clock ?? realClock;
    this.creds = new Credentials(config, { clock: this.clock, ...opts.credentials });
    const qps = opts.qps ?? 5;
    const burst = opts.burst ?? 10;
    this.limiter = new TokenBucket(qps, burst, this.clock);
    this.eventLimiter = new TokenBucket(qps, burst, this.clock);
    this.userAgent = opts.userAgent ?? 'kube-proxy-ts';
    this.keepaliveIdleMs = opts.timeouts?.keepaliveIdleMs ?? KEEPALIVE_IDLE_MS;
    this.connectTimeoutMs = opts.timeouts?.connectMs ?? CONNECT_TIMEOUT_MS;
    this.bodyIdleMs = opts.timeouts?.bodyIdleMs ?? BODY_IDLE_TIMEOUT_MS;
    if (this.base.protocol === 'https:') {
      this.agent = new Agent({
        keepAlive: true,
        keepAliveMsecs: 30_000,
        ...(config.tls.ca ? { ca: config.tls.ca } : {}),
        rejectUnauthorized: !config.tls.insecureSkipVerify,
        ...(config.tls.serverName ? { servername: config.tls.serverName } : {}),
      });
    }
    const port = Number(this.base.port || (this.base.protocol === 'https:' ? 443 : 80));
    this.probe = new ReachabilityProbe(
      this.base.hostname.replace(/^\[|\]$/g, ''),
      port,
      this.clock,
      opts.probeIntervalMs ?? 250,
      opts.random ?? Math.random,
      this.base.protocol === 'https:'
        ? {
            ...(config.tls.serverName
              ? { servername: config.tls.serverName }
              : isIP(this.base.hostname.replace(/^\[|\]$/g, '')) === 0
                ? { servername: this.base.hostname }
                : {}),
          }
        : undefined,
    );
  }

  /** GET one page of a collection (pass limit/continue in query for pagination). */
  async list(path: string, query: Query, signal: AbortSignal): Promise<ListResult> {
    // The reply is parsed item by item as it arrives (liststream.ts): a first
    // list comes whole, and its text was the proxy's memory peak.
    const res = await this.send(
      'GET',
      path,
      query,
      undefined,
      signal,
      this.limiter,
      REQUEST_TIMEOUT_MS,
      this.bodyIdleMs,
    );
    let body: unknown;
    try {
      body = await readListBody(res);
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
      throw new ApiStatusError(res.statusCode ?? 0, 'BadResponse', `GET ${path}: reply is not JSON`);
    }
    const b = body as { metadata?: { resourceVersion?: unknown; continue?: unknown }; items?: unknown } | undefined;
    if (!b || !Array.isArray(b.items)) throw new ApiStatusError(200, 'BadResponse', `list ${path}: no items in reply`);
    const rv = b.metadata?.resourceVersion;
    const cont = b.metadata?.continue;
    return {
      resourceVersion: typeof rv === 'string' ? rv : '',
      items: b.items,
      ...(typeof cont === 'string' && cont !== '' ? { continue: cont } : {}),
    };
  }

  /** Every page of a collection, in order (a 410 on a continue token restarts from the first page). */
  async listAll(path: string, query: Query, signal: AbortSignal, pageSize = 500): Promise<ListResult> {
    for (;;) {
      const items: unknown[] = [];
      let cont: string | undefined;
      let rv = '';
      try {
        do {
          const page = await this.list(
            path,
            { ...query, limit: String(pageSize), ...(cont ? { continue: cont } : {}) },
            signal,
          );
          for (const i of page.items) items.push(i);
          if (!cont) rv = page.resourceVersion;
          cont = page.continue;
        } while (cont);
      } catch (err) {
        if (cont && err instanceof ApiStatusError && err.statusCode === 410) continue;
        throw err;
      }
      return { resourceVersion: rv, items };
    }
  }

  /** POST an events.k8s.io/v1 Event into its metadata.namespace (default "default"). */
  async postEvent(event: object, signal?: AbortSignal): Promise<void> {
    const ns = (event as { metadata?: { namespace?: unknown } }).metadata?.namespace;
    const namespace = typeof ns === 'string' && ns !== '' ? ns : 'default';
    await this.json(
      'POST',
      `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/events`,
      {},
      JSON.stringify(event),
      signal ?? new AbortController().signal,
      this.eventLimiter,
    );
  }

  watch(
    path: string,
    query: Query,
    onOpen: () => void,
    onEvent: (type: string, object: unknown) => void,
    signal: AbortSignal,
  ): Promise<void> {
    // An idle watch is normal (no body timeout): keepalive notices a dead peer.
    return this.send('GET', path, query, undefined, signal, this.limiter, WATCH_HEADERS_TIMEOUT_MS, 0).then(
      (res) =>
        new Promise<void>((resolve, reject) => {
          res.setEncoding('utf8');
          onOpen();
          let buf = '';
          let failed = false;
          res.on('data', (chunk: string) => {
            buf += chunk;
            let nl: number;
            while (!failed && (nl = buf.indexOf('\n')) >= 0) {
              const line = buf.slice(0, nl).trim();
              buf = buf.slice(nl + 1);
              if (line === '') continue;
              let ev: { type?: unknown; object?: unknown };
              try {
                ev = JSON.parse(line) as typeof ev;
              } catch {
                failed = true;
                res.destroy();
                return reject(new ProxyError('KPT_API_STREAM', `watch ${path}: undecodable event`));
              }
              onEvent(String(ev.type), ev.object);
            }
          });
          res.on('end', () => resolve());
          res.on('error', (err) => (signal.aborted ? resolve() : reject(err)));
          res.on('close', () => {
            if (signal.aborted) resolve();
            else if (!res.complete && !failed)
              reject(new ProxyError('KPT_API_STREAM', `watch ${path}: connection closed mid-stream`));
          });
        }),
      (err: unknown) => {
        if (signal.aborted) return;
        throw err;
      },
    );
  }

  /** Resolves when the server, after refusing connections, accepts one again (or signal aborts). */
  untilReachable(signal: AbortSignal): Promise<void> {
    return this.probe.untilRecovered(signal);
  }

  close(): void {
    this.agent?.destroy();
    this.probe.stop();
  }

  private async json(
    method: string,
    path: string,
    query: Query,
    body: string | undefined,
    signal: AbortSignal,
    limiter: TokenBucket,
  ): Promise<unknown> {
    const res = await this.send(method, path, query, body, signal, limiter, REQUEST_TIMEOUT_MS, this.bodyIdleMs);
    const text = await readBody(res);
    try {
      return text === '' ? undefined : JSON.parse(text);
    } catch {
      throw new ApiStatusError(res.statusCode ?? 0, 'BadResponse', `${method} ${path}: reply is not JSON`);
    }
  }

  /**
   * One request; resolves with a 2xx response whose body is unread, rejects
   * otherwise. timeoutMs bounds the wait for the headers, bodyIdleMs (0 = none)
   * any pause in the body after them.
   */
  private async send(
    method: string,
    path: string,
    query: Query,
    body: string | undefined,
    signal: AbortSignal,
    limiter: TokenBucket,
    timeoutMs: number,
    bodyIdleMs: number,
  ): Promise<IncomingMessage> {
    await limiter.acquire(signal);
    try {
      return await this.sendAcquired(method, path, query, body, signal, timeoutMs, bodyIdleMs);
    } catch (err) {
      if (NEVER_SENT_CODES.has((err as NodeJS.ErrnoException).code ?? '')) limiter.refund();
      throw err;
    }
  }

  private async sendAcquired(
    method: string,
    path: string,
    query: Query,
    body: string | undefined,
    signal: AbortSignal,
    timeoutMs: number,
    bodyIdleMs: number,
  ): Promise<IncomingMessage> {
    const auth = await this.creds.get();
    const url = new URL(this.base.pathname.replace(/\/$/, '') + path, this.base);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    const headers: Record<string, string | string[]> = {
      Accept: 'application/json',
      'User-Agent': this.userAgent,
      ...auth.headers,
    };
    for (const [k, v] of this.creds.repeatedHeaders()) headers[k] = [...((headers[k] as string[]) ?? []), v];
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(body));
    }
    let res: IncomingMessage | undefined;
    // Go's net/http does the same for a request that can be sent again: the
    // server (or a proxy in front of it) closed a kept-alive connection just
    // as we wrote on it, so nothing reached the server's handler, and the
    // request goes again at once. Each stale socket leaves the pool as it
    // fails, so the next try takes another idle one or a new connection; a
    // failure on a new connection is the caller's. Only GETs: a POST could
    // have been read before the close, and events must not be doubled.
    for (let attempt = 0; res === undefined; attempt++) {
      try {
        res = await this.sendOnce(method, path, url, headers, body, auth, signal, timeoutMs, bodyIdleMs);
      } catch (err) {
        if (method !== 'GET' || !isStaleConnection(err) || signal.aborted || attempt >= MAX_STALE_RETRIES) throw err;
        this.staleRetries++;
      }
    }
    this.probe.answered();
    const code = res.statusCode ?? 0;
    if (code >= 200 && code < 300) return res;
    const text = await readBody(res).catch(() => '');
    if (code === 401) this.creds.unauthorized();
    let status: unknown;
    try {
      status = JSON.parse(text);
    } catch {
      status = undefined;
    }
    const retryAfter = res.headers['retry-after'];
    throw fromStatus(code, status, parseRetryAfter(retryAfter, this.clock.now()));
  }

  /**
   * One attempt at a request. A failure before any byte of the reply on a
   * socket the agent reused is marked (STALE_CONNECTION) so send() can retry it.
   */
  private sendOnce(
    method: string,
    path: string,
    url: URL,
    headers: Record<string, string | string[]>,
    body: string | undefined,
    auth: { cert?: string | Buffer; key?: string | Buffer },
    signal: AbortSignal,
    timeoutMs: number,
    bodyIdleMs: number,
  ): Promise<IncomingMessage> {
    return new Promise<IncomingMessage>((resolve, reject) => {
      const opts = {
        method,
        headers,
        ...(this.agent
          ? { agent: this.agent, ...(auth.cert && auth.key ? { cert: auth.cert, key: auth.key } : {}) }
          : {}),
      };
      let response: IncomingMessage | undefined;
      const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, opts, (r) => {
        // From here the socket timeout guards the body.
        response = r;
        req.setTimeout(bodyIdleMs);
        resolve(r);
      });
      req.setTimeout(timeoutMs, () => {
        const why = response ? `reply stalled: no data for ${bodyIdleMs} ms` : `no answer in ${timeoutMs} ms`;
        const err = timeoutError(`${method} ${path}: ${why}`);
        response?.destroy(err); // the body's reader sees why, not just "aborted"
        req.destroy(err);
      });
      req.on('socket', (s: Socket) => this.guardSocket(req, s, `${method} ${path}`));
      // Also after the response: a watch whose peer vanished ends here (keepalive ETIMEDOUT).
      req.on('error', (e) => {
        const code = (e as NodeJS.ErrnoException).code ?? '';
        if (UNREACHABLE_CODES.has(code)) this.probe.suspect();
        if (!response && req.reusedSocket && STALE_CODES.has(code)) (e as StaleMark)[STALE_CONNECTION] = true;
        reject(e);
      });
      abortWith(signal, req);
      req.end(body);
    });
  }

  /**
   * Keepalive on every socket (new or reused), and a bound on the TCP connect
   * of a new one: the request's own timeout only starts once it is connected.
   */
  private guardSocket(req: ClientRequest, s: Socket, what: string): void {
    s.setKeepAlive(true, this.keepaliveIdleMs);
    if (!s.connecting) return;
    const ms = this.connectTimeoutMs;
    const timer = this.clock.setTimer(ms, () => req.destroy(timeoutError(`${what}: connect timed out after ${ms} ms`)));
    // Both listeners go once either fires: a keep-alive socket lives for many
    // requests, and a listener left on it would keep this first request (and
    // its whole response, a list page of megabytes) reachable until it closes.
    const done = (): void => {
      timer.cancel();
      s.off('connect', done);
      s.off('close', done);
    };
    s.once('connect', done);
    s.once('close', done);
  }
}

/**
 * Destroy the request when signal aborts, unless it has finished. The destroy
 * is deferred a tick: an abort often comes from inside a 'data' handler (the
 * reflector ends a watch on an ERROR event) while the HTTP parser is still
 * working on the chunk, and a response that completes in that same chunk must
 * hand its socket back to the agent rather than destroy it under the parser.
 */
function abortWith(signal: AbortSignal, req: ClientRequest): void {
  if (signal.aborted) {
    req.destroy(new AbortError());
    return;
  }
  let finished = false;
  const onAbort = (): void => {
    setImmediate(() => {
      if (!finished) req.destroy(new AbortError());
    });
  };
  signal.addEventListener('abort', onAbort, { once: true });
  req.once('response', (res: IncomingMessage) => res.once('end', () => (finished = true)));
  req.once('close', () => {
    finished = true;
    signal.removeEventListener('abort', onAbort);
  });
}

/** Our own deadlines fail as the socket's would, so the reachability probe and callers see one ETIMEDOUT. */
function timeoutError(message: string): SystemError {
  return new SystemError('ETIMEDOUT', message);
}

function ignoreLateError(): void {}

/**
 * The whole body as text. The listeners are removed at the end: the response
 * object can outlive the read (the agent's socket refers to it), and a
 * listener left on it would keep the body text reachable through its promise.
 */
function readBody(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  return consumeBody(res, { push: (c) => void chunks.push(c), end: () => Buffer.concat(chunks).toString('utf8') });
}

/** A list reply, parsed as it arrives (ListBodyParser). */
function readListBody(res: IncomingMessage): Promise<unknown> {
  return consumeBody(res, new ListBodyParser());
}

/** Feed a reply's chunks to `sink` and resolve with its end(); a sink that throws ends the read. */
function consumeBody<T>(res: IncomingMessage, sink: { push(c: Buffer): void; end(): T }): Promise<T> {
  return new Promise((resolve, reject) => {
    const finish = (err?: Error): void => {
      res.off('data', onData);
      res.off('end', onEnd);
      res.off('error', finish);
      res.on('error', ignoreLateError); // one after the end must not become an uncaught exception
      if (err) {
        res.resume(); // drain the rest: the socket goes back to the agent
        return reject(err);
      }
      try {
        resolve(sink.end());
      } catch (e) {
        reject(e as Error);
      }
    };
    const onData = (c: Buffer): void => {
      try {
        sink.push(c);
      } catch (e) {
        finish(e as Error);
      }
    };
    const onEnd = (): void => finish();
    res.on('data', onData);
    res.on('end', onEnd);
    res.on('error', finish);
  });
}

export const JSON_CONTENT_TYPE = 'application/json';
export const PROTOBUF_CONTENT_TYPE = 'application/vnd.kubernetes.protobuf';

/**
 * clientConnection.contentType: JSON is what we speak. Upstream's default,
 * protobuf, is accepted so that existing configurations keep working, and
 * answered with a note (the objects are the same; only the encoding on the
 * wire differs). Anything else cannot work and is refused at start.
 */
export function checkContentType(contentType: string): { note?: string } {
  const base = contentType.split(';')[0]!.trim().toLowerCase();
  if (base === '' || base === JSON_CONTENT_TYPE) return {};
  if (base === PROTOBUF_CONTENT_TYPE) {
    return {
      note: `clientConnection.contentType ${PROTOBUF_CONTENT_TYPE}: kube-proxy-ts talks JSON to the API server`,
    };
  }
  throw new ProxyError(
    'KPT_CONFIG_INVALID',
    `clientConnection.contentType: Unsupported value: ${JSON.stringify(contentType)}: supported values: "${JSON_CONTENT_TYPE}", "${PROTOBUF_CONTENT_TYPE}" (spoken as JSON)`,
  );
}
