// A faithful-enough Kubernetes API server for tests: HTTPS with a throw-away
// CA, bearer-token (or client-certificate) authentication, the real REST paths
// for Services, EndpointSlices, Nodes and ServiceCIDRs, and list / watch / get /
// create / update / merge-patch / delete with one global resourceVersion.
//
// Lifecycle: start() listens; stop() closes the listener and kills every open
// connection (watches included) but keeps the store; restart() listens again on
// the same port with the same CA, so clients can reconnect and resume.
// The store (and the helpers below) keep working while the server is stopped,
// which lets a test change the world while clients cannot see it.

import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { TestPKI, type KeyPair } from './certs.js';
import { BadRequest, mergePatch, readJSON, sendJSON, sendStatus, withKind } from './http.js';
import { RESOURCES, type ResourceDef, apiGroups, resourceByPlural } from './resources.js';
import { parseFieldSelector, parseLabelSelector, SelectorError } from './selectors.js';
import { type Obj, Store, StoreError } from './store.js';
import { sendWatchError, serveWatch, type ServedWatch } from './watch.js';
import {
  type ApiFault,
  FaultSet,
  sendFaultStatus,
  sendSilentWatch,
  sendStalledJSON,
  sleep,
  type FaultVerb,
} from './faults.js';
import { checkListOptions, tooLargeResourceVersion, type WatchListSupport } from './listoptions.js';

export interface TestApiServerOptions {
  /** Listen address; default 127.0.0.1. */
  readonly host?: string;
  /** Listen port; default 0 (any free port, kept across restart()). */
  readonly port?: number;
  /** The accepted bearer token; default a random one. */
  readonly token?: string;
  /** BOOKMARK period for watches that allow them; default 1000 ms. */
  readonly bookmarkIntervalMs?: number;
  /** Resources to serve; others answer 404 (e.g. omit 'servicecidrs' to mimic an old server). */
  readonly resources?: readonly string[];
  /** Extra names/IPs for the serving certificate. */
  readonly certHosts?: readonly string[];
  /**
   * When the server closes a kept-alive connection, without a `Connection:
   * close` header, as real API servers and the proxies and load balancers in
   * front of them do. Default: after 5 s idle (Node's keepAliveTimeout), and
   * with a `Keep-Alive: timeout=5` hint.
   */
  readonly connectionClose?: ConnectionCloseOptions;
  /**
   * The streaming watch-list (`sendInitialEvents`): 'on' as 1.34+ (default),
   * 'off' as a server with the WatchList gate off, 'unknown' as one before
   * 1.27 (listoptions.ts).
   */
  readonly watchList?: WatchListSupport;
  /**
   * Stream a watch-list's initial events this many at a time, reading
   * between batches (watch.ts); unset: all in one go. For benchmarks with
   * states of 100k objects.
   */
  readonly paceInitialEvents?: number;
}

export interface ConnectionCloseOptions {
  /** Close the connection as soon as a watch response ends (a 410, a timeout, closeWatches()). */
  readonly afterWatch?: boolean;
  /** Close a connection that has had no request in flight for this long (no hint header is sent). */
  readonly idleMs?: number;
  /** After each response, close its connection with this probability (0..1). */
  readonly randomRate?: number;
  /** The random source for randomRate; default Math.random. */
  readonly random?: () => number;
}

/** One request as the server saw it (for tests that check what a client asked). */
export interface RequestRecord {
  readonly method: string;
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  /** Who it was: `token:<token>`, `cert:<CN>`, or undefined when refused. */
  readonly user?: string;
  readonly accept?: string;
  readonly impersonateUser?: string;
  /** When it arrived (epoch ms). */
  readonly at: number;
  /** The client's address (tells the proxies of a cluster apart: they share a token). */
  readonly remote?: string;
  /** Body bytes sent in reply so far (a watch's grow while it runs). */
  readonly replyBytes: number;
}

/** The request log is for tests; keep a long-running CLI server bounded. */
const MAX_RECORDED_REQUESTS = 10_000;

interface Route {
  def: ResourceDef;
  namespace: string | undefined;
  name: string | undefined;
  status: boolean;
}

export class TestApiServer {
  readonly store = new Store();
  /** The token in the kubeconfigs this server writes; acceptToken/revokeToken change what is accepted. */
  readonly token: string;
  private readonly tokens = new Set<string>();
  readonly requests: RequestRecord[] = [];
  /** Injected misbehaviour (faults.ts): errors, stalls and delays for matching requests. */
  readonly faults = new FaultSet();
  /** Per resource, the resourceVersion of the last BOOKMARK sent on any watch. */
  readonly lastBookmark = new Map<string, number>();
  private readonly opts: TestApiServerOptions;
  private readonly served: ResourceDef[];
  private pki: TestPKI | undefined;
  private server: Server | undefined;
  private port = 0;
  private readonly sockets = new Set<Socket>();
  private readonly watches = new Set<ServedWatch>();
  /**
   * TLS handshakes a client started and abandoned (a connection opened and
   * dropped before the handshake ended): the load a client should never put
   * on a real API server. Counted from tlsClientError while running.
   */
  abortedHandshakes = 0;
  /** TLS handshakes completed: connections clients opened. */
  handshakes = 0;
  /** Connections the server closed on its own initiative (connectionClose). */
  closedByServer = 0;
  /**
   * Connections the server has closed (connectionClose): a request that
   * still arrives on one never reaches a handler, as on a real server whose
   * close the client had not seen yet; the client sees the connection end.
   */
  private readonly closing = new WeakSet<Socket>();
  /** Per connection, when connectionClose.idleMs is set: requests begin and end (the idle clock runs at zero). */
  private readonly idle = new WeakMap<Socket, { begin(): void; end(): void }>();

  /** How a watch-list's initial events go out (paceInitialEvents): chunk size and a pause between chunks. */
  private pace: { chunk: number; delayMs: number } | undefined;

  constructor(opts: TestApiServerOptions = {}) {
    this.opts = opts;
    if (opts.paceInitialEvents) this.pace = { chunk: opts.paceInitialEvents, delayMs: 0 };
    this.token = opts.token ?? randomBytes(16).toString('hex');
    this.tokens.add(this.token);
    this.port = opts.port ?? 0;
    const names = opts.resources ?? RESOURCES.map((r) => r.plural);
    this.served = RESOURCES.filter((r) => names.includes(r.plural));
  }

  /**
   * From now on, stream a watch-list's initial events `chunk` at a time with
   * `delayMs` between chunks (a slow start of a large list, for tests of what a
   * client does meanwhile); chunk 0: all in one go.
   */
  paceInitialEvents(chunk: number, delayMs = 0): void {
    this.pace = chunk > 0 ? { chunk, delayMs } : undefined;
  }

  get host(): string {
    return this.opts.host ?? '127.0.0.1';
  }
  get url(): string {
    const h = this.host.includes(':') ? `[${this.host}]` : this.host;
    return `https://${h}:${this.port}`;
  }
  get caCert(): string {
    return this.ensurePKI().ca.cert;
  }
  get running(): boolean {
    return this.server !== undefined;
  }
  /** Open watch streams right now. */
  get openWatches(): number {
    return this.watches.size;
  }

  private ensurePKI(): TestPKI {
    this.pki ??= new TestPKI([this.host, ...(this.opts.certHosts ?? [])]);
    return this.pki;
  }

  /** Accept another bearer token (e.g. a rotated service-account token). */
  acceptToken(token: string): void {
    this.tokens.add(token);
  }
  /** Refuse a bearer token from now on (401). */
  revokeToken(token: string): void {
    this.tokens.delete(token);
  }

  /** The events.k8s.io/v1 Events clients posted, in name order. */
  events(): Obj[] {
    return this.store.list(this.def('events')).items;
  }

  /** A client certificate the server accepts as user `user`. */
  issueClientCert(user: string, groups: readonly string[] = []): KeyPair {
    return this.ensurePKI().issueClient(user, groups);
  }

  async start(): Promise<void> {
    if (this.server) return;
    const pki = this.ensurePKI();
    const server = createServer(
      {
        cert: pki.serving.cert,
        key: pki.serving.key,
        ca: pki.ca.cert,
        requestCert: true,
        rejectUnauthorized: false,
      },
      (req, res) => {
        void this.handle(req, res);
      },
    );
    server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    server.on('secureConnection', (s: TLSSocket) => {
      this.handshakes++;
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
      this.closeWhenIdle(s);
    });
    server.on('tlsClientError', () => {
      if (this.server === server) this.abortedHandshakes++;
    });
    // Our own idle close replaces Node's, which also sends a Keep-Alive hint the real server does not.
    if (this.opts.connectionClose?.idleMs !== undefined) server.keepAliveTimeout = 0;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, this.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Close the listener and kill every open connection and watch; the store survives. */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const w of [...this.watches]) w.close(true);
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    await closed;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /**
   * End open watch streams cleanly, as the real server does at a watch's
   * timeout (everything already sent is delivered); the listener stays up and
   * clients must re-watch.
   */
  closeWatches(): void {
    for (const w of [...this.watches]) w.close(false);
  }

  /** Drop the event history: watches/lists from older versions get 410 Gone. */
  compact(): void {
    this.store.compact();
  }

  dispose(): Promise<void> {
    return this.stop();
  }

  private def(plural: string): ResourceDef {
    const d = resourceByPlural(plural);
    if (!d) throw new Error(`unknown resource ${plural}`);
    return d;
  }

  // In-process helpers (tests): they go through the same store as REST writes.
  create(plural: string, obj: object): Obj {
    return this.store.create(this.def(plural), obj as Obj);
  }
  update(plural: string, obj: object): Obj {
    return this.store.update(this.def(plural), obj as Obj, 'main');
  }
  updateStatus(plural: string, obj: object): Obj {
    return this.store.update(this.def(plural), obj as Obj, 'status');
  }
  delete(plural: string, namespace: string | undefined, name: string): Obj {
    return this.store.delete(this.def(plural), namespace, name);
  }
  get(plural: string, namespace: string | undefined, name: string): Obj {
    return this.store.get(this.def(plural), namespace, name);
  }

  /** A kubeconfig (YAML is a JSON superset) for this server with token auth and its CA inline. */
  kubeconfig(opts: { token?: string; clientCert?: KeyPair } = {}): string {
    const b64 = (s: string): string => Buffer.from(s).toString('base64');
    const user: Record<string, string> = opts.clientCert
      ? { 'client-certificate-data': b64(opts.clientCert.cert), 'client-key-data': b64(opts.clientCert.key) }
      : { token: opts.token ?? this.token };
    return JSON.stringify(
      {
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'kpt-test',
        clusters: [{ name: 'kpt-test', cluster: { server: this.url, 'certificate-authority-data': b64(this.caCert) } }],
        users: [{ name: 'kpt-test', user }],
        contexts: [{ name: 'kpt-test', context: { cluster: 'kpt-test', user: 'kpt-test' } }],
      },
      null,
      2,
    );
  }

  /** The caller's identity, or undefined (401). A bearer token wins over a client certificate. */
  private authenticate(req: IncomingMessage): string | undefined {
    const auth = req.headers.authorization;
    if (auth !== undefined) {
      const m = /^Bearer (.+)$/.exec(auth);
      return m && this.tokens.has(m[1]!) ? `token:${m[1]}` : undefined;
    }
    const sock = req.socket as TLSSocket;
    const cn = sock.authorized === true ? sock.getPeerCertificate()?.subject?.CN : undefined;
    return cn ? `cert:${String(cn)}` : undefined;
  }

  /** We speak JSON only: a client that accepts only other types (protobuf) gets 406, as a server without that codec. */
  private static acceptsJSON(accept: string | undefined): boolean {
    if (accept === undefined || accept.trim() === '') return true;
    return accept
      .split(',')
      .map((t) => t.split(';')[0]!.trim().toLowerCase())
      .some((t) => t === 'application/json' || t === 'application/*' || t === '*/*');
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (this.closing.has(req.socket)) return void req.socket.destroy();
    const idle = this.idle.get(req.socket);
    if (idle) {
      idle.begin();
      res.once('close', idle.end);
    }
    const url = new URL(req.url ?? '/', 'https://x');
    const user = this.authenticate(req);
    const impersonate = req.headers['impersonate-user'];
    const record = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      ...(user ? { user } : {}),
      ...(req.headers.accept ? { accept: req.headers.accept } : {}),
      ...(typeof impersonate === 'string' ? { impersonateUser: impersonate } : {}),
      at: Date.now(),
      ...(req.socket.remoteAddress ? { remote: req.socket.remoteAddress } : {}),
      replyBytes: 0,
    };
    this.requests.push(record);
    countReplyBytes(res, (n) => (record.replyBytes += n));
    if (this.requests.length > MAX_RECORDED_REQUESTS)
      this.requests.splice(0, this.requests.length - MAX_RECORDED_REQUESTS);
    this.closeAfterReply(req, res);
    try {
      if (!user) return sendStatus(res, 401, 'Unauthorized', 'Unauthorized');
      if (!TestApiServer.acceptsJSON(req.headers.accept)) {
        return sendStatus(res, 406, 'NotAcceptable', `only application/json is served, not ${req.headers.accept}`);
      }
      if (this.discovery(url.pathname, res)) return;
      const route = this.route(url.pathname);
      if (!route) return sendStatus(res, 404, 'NotFound', 'the server could not find the requested resource');
      const fault = this.faults.take(verbOf(req.method, route, url.searchParams), route.def.plural);
      if (fault?.kind === 'status') return sendFaultStatus(res, fault);
      if (fault?.kind === 'hangup') return void req.socket.destroy();
      if (fault?.kind === 'delay') await sleep(fault.delayMs ?? 0);
      await this.serve(req, res, route, url.searchParams, fault);
    } catch (err) {
      if (res.headersSent) return void res.destroy();
      if (err instanceof StoreError) return sendStatus(res, err.code, err.reason, err.message, err.details);
      if (err instanceof BadRequest) return sendStatus(res, err.code, err.reason, err.message);
      if (err instanceof SelectorError) return sendStatus(res, 400, 'BadRequest', err.message);
      sendStatus(res, 500, 'InternalError', String(err));
    }
  }

  /** connectionClose.afterWatch and randomRate: end the connection once this reply is out. */
  private closeAfterReply(req: IncomingMessage, res: ServerResponse): void {
    const c = this.opts.connectionClose;
    if (!c) return;
    const sock = req.socket;
    const url = req.url ?? '';
    const isWatch = /[?&]watch=(true|1)(&|$)/.test(url);
    res.once('finish', () => {
      const random = c.random ?? Math.random;
      if ((isWatch && c.afterWatch) || (c.randomRate !== undefined && random() < c.randomRate)) {
        this.closedByServer++;
        this.closing.add(sock);
        sock.end();
      }
    });
  }

  /** connectionClose.idleMs: close a connection with nothing in flight for that long. */
  private closeWhenIdle(s: TLSSocket): void {
    const idleMs = this.opts.connectionClose?.idleMs;
    if (idleMs === undefined) return;
    let inFlight = 0;
    let timer: NodeJS.Timeout | undefined;
    const arm = (): void => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        if (inFlight > 0 || s.destroyed) return;
        this.closedByServer++;
        this.closing.add(s);
        s.end();
      }, idleMs);
    };
    this.idle.set(s, {
      begin: () => {
        inFlight++;
        clearTimeout(timer);
      },
      end: () => {
        if (--inFlight === 0) arm();
      },
    });
    s.once('close', () => clearTimeout(timer));
    arm();
  }

  private discovery(path: string, res: ServerResponse): boolean {
    const resourceList = (gv: string, defs: ResourceDef[]): unknown => ({
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: gv,
      resources: defs.map((d) => ({
        name: d.plural,
        singularName: d.kind.toLowerCase(),
        namespaced: d.namespaced,
        kind: d.kind,
        verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
      })),
    });
    if (path === '/version') {
      sendJSON(res, 200, { major: '1', minor: '34', gitVersion: 'v1.34.0-kpt-test', platform: 'linux/amd64' });
    } else if (path === '/api') {
      sendJSON(res, 200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] });
    } else if (path === '/apis') {
      sendJSON(res, 200, {
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: apiGroups(this.served).map((g) => ({
          name: g.name,
          versions: [{ groupVersion: `${g.name}/${g.version}`, version: g.version }],
          preferredVersion: { groupVersion: `${g.name}/${g.version}`, version: g.version },
        })),
      });
    } else if (path === '/api/v1') {
      sendJSON(
        res,
        200,
        resourceList(
          'v1',
          this.served.filter((d) => d.prefix === '/api/v1'),
        ),
      );
    } else {
      const m = /^\/apis\/([^/]+)\/([^/]+)$/.exec(path);
      const defs = m ? this.served.filter((d) => d.apiVersion === `${m[1]}/${m[2]}`) : [];
      if (defs.length === 0) return false;
      sendJSON(res, 200, resourceList(`${m![1]}/${m![2]}`, defs));
    }
    return true;
  }

  /** Map a URL path onto a served resource, or undefined (404). */
  private route(path: string): Route | undefined {
    for (const def of this.served) {
      if (!path.startsWith(def.prefix + '/')) continue;
      const parts = path
        .slice(def.prefix.length + 1)
        .split('/')
        .map(decodeURIComponent);
      let namespace: string | undefined;
      if (parts[0] === 'namespaces' && parts.length >= 3 && def.namespaced) {
        namespace = parts[1];
        parts.splice(0, 2);
      }
      if (parts[0] !== def.plural || parts.length > 3) continue;
      const status = parts[2] === 'status';
      if (parts.length === 3 && !status) continue;
      if (status && !def.statusSubresource) continue;
      return { def, namespace, name: parts[1], status };
    }
    return undefined;
  }

  private async serve(
    req: IncomingMessage,
    res: ServerResponse,
    r: Route,
    q: URLSearchParams,
    fault: ApiFault | undefined,
  ): Promise<void> {
    const method = req.method ?? 'GET';
    const stall = fault?.kind === 'stall';
    if (r.name === undefined) {
      if (method === 'GET') return this.listOrWatch(res, r, q, fault);
      if (method === 'POST') {
        const body = await this.readObject(req, r);
        if (r.def.plural === 'events') validateEvent(body);
        return sendJSON(res, 201, withKind(r.def, this.store.create(r.def, body)));
      }
    } else if (method === 'GET') {
      return (stall ? sendStalledJSON : sendOK)(res, withKind(r.def, this.store.get(r.def, r.namespace, r.name)));
    } else if (method === 'PUT') {
      const body = await this.readObject(req, r);
      if (body.metadata.name !== r.name)
        throw new BadRequest(400, 'BadRequest', 'the name of the object does not match the URL');
      return sendJSON(res, 200, withKind(r.def, this.store.update(r.def, body, r.status ? 'status' : 'main')));
    } else if (method === 'PATCH') {
      const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
      // Strategic merge patch is taken as a JSON merge patch: the same for the maps we patch, not for lists.
      if (type !== 'application/merge-patch+json' && type !== 'application/strategic-merge-patch+json') {
        throw new BadRequest(415, 'UnsupportedMediaType', `the body of the request was in an unknown format: ${type}`);
      }
      const patch = await readJSON(req);
      const cur = this.store.get(r.def, r.namespace, r.name);
      const next = mergePatch(cur, patch) as Obj;
      next.metadata = { ...next.metadata, name: r.name, namespace: r.namespace };
      const wanted = (patch as { metadata?: { resourceVersion?: string } })?.metadata?.resourceVersion;
      if (!wanted) next.metadata.resourceVersion = cur.metadata.resourceVersion;
      return sendJSON(res, 200, withKind(r.def, this.store.update(r.def, next, r.status ? 'status' : 'main')));
    } else if (method === 'DELETE' && !r.status) {
      return sendJSON(res, 200, withKind(r.def, this.store.delete(r.def, r.namespace, r.name)));
    }
    sendStatus(res, 405, 'MethodNotAllowed', `${method} is not supported here`);
  }

  private async readObject(req: IncomingMessage, r: Route): Promise<Obj> {
    const body = await readJSON(req);
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new BadRequest(400, 'BadRequest', 'the body must be a JSON object');
    }
    const obj = body as Obj;
    obj.metadata = { ...(obj.metadata ?? {}) };
    if (r.def.namespaced) {
      if (obj.metadata.namespace && r.namespace && obj.metadata.namespace !== r.namespace) {
        throw new BadRequest(
          400,
          'BadRequest',
          'the namespace of the object does not match the namespace on the request',
        );
      }
      obj.metadata.namespace = r.namespace ?? obj.metadata.namespace;
    }
    delete obj.kind;
    delete obj.apiVersion;
    return obj;
  }

  private listOrWatch(res: ServerResponse, r: Route, q: URLSearchParams, fault: ApiFault | undefined): void {
    const stall = fault?.kind === 'stall';
    const labels = parseLabelSelector(q.get('labelSelector'));
    const fields = parseFieldSelector(q.get('fieldSelector'), r.def.fields);
    const rv = q.get('resourceVersion');
    if (rv !== null && rv !== '' && !/^\d+$/.test(rv)) {
      throw new BadRequest(400, 'BadRequest', `invalid resourceVersion ${JSON.stringify(rv)}`);
    }
    const watch = q.get('watch') === 'true' || q.get('watch') === '1';
    const sendInitialEvents = checkListOptions(q, watch, this.opts.watchList ?? 'on');
    if (fault?.kind === 'behind' && rv && rv !== '0') {
      const err = tooLargeResourceVersion(Number(rv), Number(rv) - 1);
      if (watch) return sendWatchError(res, err);
      throw err;
    }
    if (watch) {
      if (stall) return sendSilentWatch(res);
      const t = q.get('timeoutSeconds');
      serveWatch(
        this.store,
        res,
        {
          def: r.def,
          namespace: r.namespace,
          labels,
          fields,
          resourceVersion: rv,
          bookmarks: q.get('allowWatchBookmarks') === 'true',
          timeoutSeconds: t === null ? undefined : Number(t),
          sendInitialEvents,
          ...(fault?.kind === 'expire' ? { expireAfter: fault.afterEvents ?? 0 } : {}),
        },
        this.opts.bookmarkIntervalMs ?? 1000,
        this.watches,
        (bm) => this.lastBookmark.set(r.def.plural, bm),
        this.pace?.chunk,
        this.pace?.delayMs,
      );
      return;
    }
    // resourceVersion as the real server reads it for a list (its watch cache enabled, the default):
    //   ""         a consistent read, paginated by limit/continue (etcd);
    //   "0"        whatever the watch cache holds, and it ignores limit: one reply;
    //   N, no limit  "not older than N", from the watch cache: the current state
    //              (a version the server has not reached yet is a 504 "Too large resource version");
    //   N, limit   exactly N, from etcd: 410 Expired once compacted.
    const page = listPage(q);
    if (rv && rv !== '0' && page.token) {
      throw new BadRequest(400, 'BadRequest', 'specifying resource version is not allowed when using continue');
    }
    if (rv && rv !== '0' && page.limit === undefined && Number(rv) > this.store.resourceVersion) {
      throw tooLargeResourceVersion(Number(rv), this.store.resourceVersion);
    }
    if (rv && rv !== '0' && page.limit !== undefined && Number(rv) < this.store.oldestWatchableRV) {
      throw new StoreError(410, 'Expired', `too old resource version: ${rv} (${this.store.oldestWatchableRV})`);
    }
    if (rv === '0') page.limit = undefined;
    const exact = rv && rv !== '0' && page.limit !== undefined ? Number(rv) : undefined;
    const atRV = page.token?.rv ?? exact ?? this.store.resourceVersion;
    let sel;
    try {
      sel = this.store.select(r.def, {
        ns: r.namespace,
        atRV,
        after: page.token?.start,
        limit: page.limit,
        match: (o) => labels(o.metadata.labels) && fields(o),
      });
    } catch (err) {
      if (page.token && err instanceof StoreError && err.code === 410)
        throw new StoreError(410, 'Expired', CONTINUE_EXPIRED);
      throw err;
    }
    const metadata: Record<string, unknown> = { resourceVersion: String(atRV) };
    if (sel.more > 0) {
      metadata['continue'] = encodeContinue({ rv: atRV, start: sel.lastKey! });
      // The real server counts what is left only for unfiltered lists.
      if (!q.get('labelSelector') && !q.get('fieldSelector')) metadata['remainingItemCount'] = sel.more;
    }
    const list = { kind: `${r.def.kind}List`, apiVersion: r.def.apiVersion, metadata, items: sel.items };
    (stall ? sendStalledJSON : sendOK)(res, list);
  }
}

/** Call count(n) with the size of each body chunk written to res. */
function countReplyBytes(res: ServerResponse, count: (n: number) => void): void {
  const size = (chunk: unknown): number =>
    typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk instanceof Uint8Array ? chunk.length : 0;
  const write = res.write.bind(res) as (...a: unknown[]) => boolean;
  const end = res.end.bind(res) as (...a: unknown[]) => ServerResponse;
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    count(size(chunk));
    return write(chunk, ...rest);
  }) as typeof res.write;
  res.end = ((chunk?: unknown, ...rest: unknown[]) => {
    if (typeof chunk !== 'function') count(size(chunk));
    return end(chunk, ...rest);
  }) as typeof res.end;
}

function sendOK(res: ServerResponse, body: unknown): void {
  sendJSON(res, 200, body);
}

/** The verb a fault matches on. */
function verbOf(method: string | undefined, r: Route, q: URLSearchParams): FaultVerb {
  if (method !== 'GET') return 'write';
  if (r.name !== undefined) return 'get';
  if (q.get('watch') !== 'true' && q.get('watch') !== '1') return 'list';
  return q.get('sendInitialEvents') === 'true' ? 'watchList' : 'watch';
}

const CONTINUE_EXPIRED =
  'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.';

interface ContinueToken {
  readonly rv: number;
  readonly start: string;
}

/** Like the real server's token: base64 of {"v":"meta.k8s.io/v1","rv":N,"start":"<key>"}. */
function encodeContinue(t: ContinueToken): string {
  return Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: t.rv, start: t.start })).toString('base64url');
}

/** `limit` and `continue` of a list request; a malformed one is a 400 as on the real server. */
function listPage(q: URLSearchParams): { limit: number | undefined; token: ContinueToken | undefined } {
  const l = q.get('limit');
  let limit: number | undefined;
  if (l !== null && l !== '' && l !== '0') {
    if (!/^\d+$/.test(l)) throw new BadRequest(400, 'BadRequest', `invalid limit ${JSON.stringify(l)}`);
    limit = Number(l);
  }
  const c = q.get('continue');
  if (c === null || c === '') return { limit, token: undefined };
  try {
    const t = JSON.parse(Buffer.from(c, 'base64url').toString('utf8')) as {
      v?: unknown;
      rv?: unknown;
      start?: unknown;
    };
    if (t.v !== 'meta.k8s.io/v1' || typeof t.rv !== 'number' || typeof t.start !== 'string') throw new Error('bad');
    return { limit, token: { rv: t.rv, start: t.start } };
  } catch {
    throw new BadRequest(400, 'BadRequest', 'continue key is not valid: incorrect encoded start resourceVersion');
  }
}

/**
 * The checks the real server makes on an events.k8s.io/v1 Event create
 * (ValidateEventCreate), reduced to what a client can get wrong: the fields
 * it must set, the type, the note's size, and the namespace of what it is about.
 */
function validateEvent(e: Obj): void {
  const errs: string[] = [];
  const need = (v: unknown, f: string): void => {
    if (typeof v !== 'string' || v === '') errs.push(`${f}: Required value`);
  };
  need(e['eventTime'], 'eventTime');
  need(e['reportingController'], 'reportingController');
  need(e['reportingInstance'], 'reportingInstance');
  need(e['action'], 'action');
  need(e['reason'], 'reason');
  if (e['type'] !== 'Normal' && e['type'] !== 'Warning') {
    errs.push(`type: Unsupported value: ${JSON.stringify(e['type'])}: supported values: "Normal", "Warning"`);
  }
  if (typeof e['note'] === 'string' && Buffer.byteLength(e['note']) > 1024)
    errs.push('note: Too long: may not be more than 1024 bytes');
  const regarding = e['regarding'] as { namespace?: unknown } | undefined;
  if (regarding?.namespace && regarding.namespace !== e.metadata.namespace) {
    errs.push(
      `regarding.namespace: Invalid value: ${JSON.stringify(regarding.namespace)}: does not match event.namespace`,
    );
  }
  if (errs.length > 0)
    throw new StoreError(422, 'Invalid', `Event "${e.metadata.name ?? ''}" is invalid: ${errs.join(', ')}`);
}
