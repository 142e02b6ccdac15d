// The process that runs INSIDE a test namespace (`ip netns exec <ns> node agent.js`).
// It speaks JSON lines on stdin/stdout: one request {id, op, ...} in, one
// response {id, ok, ...} out, in any order. It is both
//  - the pod's workload: TCP and UDP echo servers that answer every line /
//    datagram with {pod, src, dst, data}, so a test sees which endpoint
//    answered and which client address it saw;
//  - a client: one-shot TCP/UDP exchanges, held TCP connections, HTTP GETs.
// Every client operation has its own timeout, so a lost packet is a bounded
// failure (error 'ETIMEDOUT'), never a hang. It imports nothing from the
// project so it starts fast and runs from .ts (tsx) or .js (dist) alike.
import * as dgram from 'node:dgram';
import * as http from 'node:http';
import * as https from 'node:https';
import * as net from 'node:net';
import * as readline from 'node:readline';

type Req = { id: number; op: string } & Record<string, unknown>;
type Res = Record<string, unknown>;

let podName = process.env['KPT_AGENT_NAME'] ?? 'agent';
const held = new Map<string, { sock: net.Socket; lines: string[]; waiters: Array<(l: string) => void> }>();
const servers: Array<net.Server | dgram.Socket> = [];

function addr(ip: string | undefined, port: number | undefined): string {
  const a = ip ?? '?';
  return `${a.startsWith('::ffff:') ? a.slice(7) : a}:${port ?? 0}`;
}

function echo(src: string, dst: string, data: string): string {
  return JSON.stringify({ pod: podName, src, dst, data });
}

function serve(req: Req): Promise<Res> {
  podName = String(req['name'] ?? podName);
  // ipv6: also listen on :: (IPv6 only; IPv4 stays on the 0.0.0.0 sockets, so replies look the same as before).
  const ipv6 = req['ipv6'] === true;
  const tasks: Array<Promise<void>> = [];
  const onConnection = (sock: net.Socket): void => {
    const rl = readline.createInterface({ input: sock });
    rl.on('error', () => {});
    rl.on('line', (line) =>
      sock.write(echo(addr(sock.remoteAddress, sock.remotePort), addr(sock.localAddress, sock.localPort), line) + '\n'),
    );
    sock.on('error', () => {});
  };
  for (const port of (req['tcp'] as number[] | undefined) ?? []) {
    for (const host of ipv6 ? ['0.0.0.0', '::'] : ['0.0.0.0']) {
      const srv = net.createServer(onConnection);
      servers.push(srv);
      tasks.push(
        new Promise((res, rej) => {
          srv.once('error', rej);
          srv.listen({ port, host, ipv6Only: host === '::' }, () => res());
        }),
      );
    }
  }
  for (const port of (req['udp'] as number[] | undefined) ?? []) {
    for (const type of ipv6 ? (['udp4', 'udp6'] as const) : (['udp4'] as const)) {
      const any = type === 'udp4' ? '0.0.0.0' : '::';
      const sock = dgram.createSocket({ type, ipv6Only: type === 'udp6' });
      sock.on('message', (msg, rinfo) => {
        sock.send(echo(addr(rinfo.address, rinfo.port), `${any}:${port}`, msg.toString()), rinfo.port, rinfo.address);
      });
      servers.push(sock);
      tasks.push(
        new Promise((res, rej) => {
          sock.once('error', rej);
          sock.bind(port, any, () => res());
        }),
      );
    }
  }
  return Promise.all(tasks).then(() => ({ ok: true }));
}

function errCode(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? String(err);
}

/** Connect, send one line, read one line, close. */
function tcp(req: Req): Promise<Res> {
  const start = performance.now();
  const timeoutMs = Number(req['timeoutMs'] ?? 2000);
  return new Promise((resolve) => {
    const opts: net.NetConnectOpts = { host: String(req['host']), port: Number(req['port']) };
    if (req['bind']) opts.localAddress = String(req['bind']);
    if (req['localPort']) opts.localPort = Number(req['localPort']);
    const sock = net.connect(opts);
    let done = false;
    // For failures: the local port (to find the flow in conntrack) and when the handshake completed.
    let connectMs = -1;
    const finish = (r: Res): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      const why = r['ok'] ? {} : { localPort: sock.localPort ?? 0, connectMs };
      sock.destroy();
      resolve({ ...r, ...why, ms: Math.round(performance.now() - start) });
    };
    const timer = setTimeout(() => finish({ ok: false, error: 'ETIMEDOUT' }), timeoutMs);
    sock.on('connect', () => {
      connectMs = Math.round(performance.now() - start);
      sock.write(String(req['data'] ?? 'hello') + '\n');
    });
    sock.on('error', (e) => finish({ ok: false, error: errCode(e) }));
    const rl = readline.createInterface({ input: sock });
    rl.on('error', () => {}); // the socket's own 'error' handler reports it
    // peer: the server address as this socket sees it (getpeername).
    rl.once('line', (l) =>
      finish({ ok: true, reply: JSON.parse(l), peer: `${sock.remoteAddress}:${sock.remotePort}` }),
    );
    sock.on('close', () => finish({ ok: false, error: 'ECONNRESET' }));
  });
}

/**
 * Send one datagram from a connected socket (optionally from a fixed local port), or with `unconnected` by
 * sendto() on an unconnected one, and wait for one reply.
 */
function udp(req: Req): Promise<Res> {
  const start = performance.now();
  const timeoutMs = Number(req['timeoutMs'] ?? 2000);
  return new Promise((resolve) => {
    const sock = dgram.createSocket({ type: net.isIPv6(String(req['host'])) ? 'udp6' : 'udp4', reuseAddr: true });
    let done = false;
    const finish = (r: Res): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      try {
        sock.close();
      } catch {
        /* closed */
      }
      resolve({ ...r, ms: Math.round(performance.now() - start) });
    };
    const timer = setTimeout(() => finish({ ok: false, error: 'ETIMEDOUT' }), timeoutMs);
    sock.on('error', (e) => finish({ ok: false, error: errCode(e) }));
    // peer: where the answer came from as recvmsg reports it.
    sock.on('message', (m, rinfo) =>
      finish({ ok: true, reply: JSON.parse(m.toString()), peer: `${rinfo.address}:${rinfo.port}` }),
    );
    const bindOpts: dgram.BindOptions = { port: Number(req['localPort'] ?? 0) };
    if (req['bind']) bindOpts.address = String(req['bind']);
    sock.bind(bindOpts, () => {
      const data = String(req['data'] ?? 'hello');
      if (req['unconnected'] === true) sock.send(data, Number(req['port']), String(req['host']));
      else sock.connect(Number(req['port']), String(req['host']), () => sock.send(data));
    });
  });
}

function httpGet(req: Req): Promise<Res> {
  const timeoutMs = Number(req['timeoutMs'] ?? 2000);
  return new Promise((resolve) => {
    const r = http.get(String(req['url']), { timeout: timeoutMs, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
      });
      res.on('end', () => resolve({ ok: true, status: res.statusCode, headers: res.headers, body }));
    });
    r.on('timeout', () => {
      r.destroy();
      resolve({ ok: false, error: 'ETIMEDOUT' });
    });
    r.on('error', (e) => resolve({ ok: false, error: errCode(e) }));
  });
}

/** One HTTPS request (the tests' REST calls to the API server, made from inside a namespace). */
function httpsRequest(req: Req): Promise<Res> {
  const timeoutMs = Number(req['timeoutMs'] ?? 5000);
  return new Promise((resolve) => {
    const r = https.request(
      String(req['url']),
      {
        method: String(req['method'] ?? 'GET'),
        ca: String(req['ca']),
        timeout: timeoutMs,
        agent: false,
        headers: req['headers'] as Record<string, string>,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ ok: true, status: res.statusCode, body }));
      },
    );
    r.on('timeout', () => {
      r.destroy();
      resolve({ ok: false, error: 'ETIMEDOUT' });
    });
    r.on('error', (e) => resolve({ ok: false, error: errCode(e) }));
    r.end(req['body'] === undefined ? undefined : String(req['body']));
  });
}

/** Open a TCP connection kept under `key` for later `send`s (established-traffic tests). */
function open(req: Req): Promise<Res> {
  const key = String(req['key']);
  return new Promise((resolve) => {
    const opts: net.NetConnectOpts = { host: String(req['host']), port: Number(req['port']) };
    if (req['localPort']) opts.localPort = Number(req['localPort']);
    const sock = net.connect(opts);
    const entry = { sock, lines: [] as string[], waiters: [] as Array<(l: string) => void> };
    const timer = setTimeout(
      () => {
        sock.destroy();
        resolve({ ok: false, error: 'ETIMEDOUT' });
      },
      Number(req['timeoutMs'] ?? 2000),
    );
    sock.on('error', (e) => {
      clearTimeout(timer);
      resolve({ ok: false, error: errCode(e) });
    });
    sock.on('connect', () => {
      clearTimeout(timer);
      held.set(key, entry);
      resolve({ ok: true });
    });
    const rl = readline.createInterface({ input: sock });
    rl.on('error', () => {});
    rl.on('line', (l) => {
      const w = entry.waiters.shift();
      if (w) w(l);
      else entry.lines.push(l);
    });
  });
}

function send(req: Req): Promise<Res> {
  const entry = held.get(String(req['key']));
  if (!entry || entry.sock.destroyed) return Promise.resolve({ ok: false, error: 'ENOTCONN' });
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ ok: false, error: 'ETIMEDOUT' }), Number(req['timeoutMs'] ?? 2000));
    entry.waiters.push((l) => {
      clearTimeout(timer);
      resolve({ ok: true, reply: JSON.parse(l) });
    });
    entry.sock.write(String(req['data'] ?? 'ping') + '\n');
  });
}

function close(req: Req): Promise<Res> {
  const sock = held.get(String(req['key']))?.sock;
  // reset: end with an RST instead of a FIN, so no TIME_WAIT state lingers anywhere.
  if (req['reset'] === true) sock?.resetAndDestroy();
  else sock?.destroy();
  held.delete(String(req['key']));
  return Promise.resolve({ ok: true });
}

/**
 * A prober: from now on, one TCP exchange with host:port every intervalMs (not
 * waiting for the previous one), each bounded by timeoutMs. A probe fails when
 * it gets no echo in time. probeStats reports the counts so far, the failures
 * (time and error, the last 100) and, with stop, ends the prober.
 */
interface ProbeState {
  timer: NodeJS.Timeout;
  sent: number;
  answered: number;
  failed: number;
  inflight: number;
  maxMs: number;
  /** The longest gap between two ticks of the interval: more than intervalMs means this process was stalled. */
  maxTickGapMs: number;
  lastTick: number;
  failures: Array<{ at: number; error: string; ms: unknown; localPort: unknown; connectMs: unknown }>;
}
const probes = new Map<string, ProbeState>();

function probeStart(req: Req): Promise<Res> {
  const key = String(req['key']);
  if (probes.has(key)) return Promise.resolve({ ok: false, error: 'EEXIST' });
  const target = { ...req, timeoutMs: Number(req['probeTimeoutMs'] ?? 1000), data: 'probe' } as Req;
  const st: ProbeState = {
    timer: undefined as never,
    sent: 0,
    answered: 0,
    failed: 0,
    inflight: 0,
    maxMs: 0,
    maxTickGapMs: 0,
    lastTick: Date.now(),
    failures: [],
  };
  const once = (): void => {
    st.sent++;
    st.inflight++;
    const at = Date.now();
    st.maxTickGapMs = Math.max(st.maxTickGapMs, at - st.lastTick);
    st.lastTick = at;
    void tcp(target).then((r) => {
      st.inflight--;
      st.maxMs = Math.max(st.maxMs, Number(r['ms'] ?? 0));
      if (r['ok']) st.answered++;
      else {
        st.failed++;
        const f = { at, error: String(r['error']), ms: r['ms'], localPort: r['localPort'], connectMs: r['connectMs'] };
        st.failures.push(f);
        if (st.failures.length > 100) st.failures.shift();
      }
    });
  };
  st.timer = setInterval(once, Math.max(1, Number(req['intervalMs'] ?? 100)));
  probes.set(key, st);
  return Promise.resolve({ ok: true });
}

async function probeStats(req: Req): Promise<Res> {
  const key = String(req['key']);
  const st = probes.get(key);
  if (!st) return { ok: false, error: 'ENOENT' };
  if (req['stop']) {
    clearInterval(st.timer);
    probes.delete(key);
    // Let the probes in flight finish (each is bounded by its timeout).
    while (st.inflight > 0) await new Promise((r) => setTimeout(r, 20));
  }
  const { timer: _t, ...stats } = st;
  return { ok: true, ...stats };
}

const ops: Record<string, (r: Req) => Promise<Res>> = {
  probeStart,
  probeStats,
  serve,
  tcp,
  udp,
  http: httpGet,
  https: httpsRequest,
  open,
  send,
  close,
};

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  let req: Req;
  try {
    req = JSON.parse(line) as Req;
  } catch {
    return;
  }
  const op = ops[req.op];
  const p = op
    ? op(req).catch((e: unknown) => ({ ok: false, error: errCode(e) }))
    : Promise.resolve({ ok: false, error: `unknown op ${req.op}` });
  void p.then((res) => process.stdout.write(JSON.stringify({ ...res, id: req.id }) + '\n'));
});
process.stdin.on('end', () => process.exit(0));
// A bug in one exchange must not take the pod's servers down: report it and carry on.
process.on('uncaughtException', (e) => process.stderr.write(`agent ${podName}: ${e.stack ?? String(e)}\n`));
process.stdout.write(JSON.stringify({ id: 0, ok: true, ready: true }) + '\n');
