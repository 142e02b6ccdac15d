// One UDP listener of the userspace mode. A session per client address
// (ip:port): the first datagram picks an endpoint (RoundRobin, affinity by
// client IP) and opens a socket connected to it; replies come back through
// the listener socket to the client. A session ends after idleMs without a
// datagram in either direction (upstream --udp-timeout, default 250 ms), when
// its endpoint is removed, or when the listener closes.
//
// Known limit: the listener is bound to the wildcard address, so the kernel
// chooses the source address of replies by route. When that differs from the
// address the client's datagram was redirected to, conntrack cannot undo the
// REDIRECT and the client sees a reply from the wrong address. On a node with
// one address per route (the usual case) they agree.
import dgram from 'node:dgram';
import type { RoundRobin } from '../../dataplane/userspace/loadbalancer.js';
import type { Clock, TimerHandle } from '../../core/clock.js';
import { splitEndpoint, type RelayEvent } from './tcp.js';

interface Session {
  readonly clientKey: string;
  readonly endpoint: string;
  readonly upstream: dgram.Socket;
  /** Datagrams that arrived before the upstream socket was connected. */
  queue: Buffer[] | null;
  lastActivity: number;
  timer: TimerHandle | null;
}

/** Most datagrams queued per session while its upstream socket connects. */
const MAX_QUEUED = 64;
/** Bound on remembered failing clients (memory stays bounded under a flood of sources). */
const MAX_FAILED_CLIENTS = 10_000;

export class UdpListener {
  private readonly socket: dgram.Socket;
  private readonly sessions = new Map<string, Session>();
  /** Client IPs whose last session ended in an error: their next session skips affinity. */
  private readonly failedClients = new Set<string>();
  private closed = false;
  private bound = false;
  /** The error that ended the socket after it was bound (e.g. ECONNABORTED from `ss -K`), or null. */
  private failure: string | null = null;
  /** Datagrams dropped because there was no endpoint. */
  dropped = 0;

  constructor(
    readonly key: string,
    private readonly lb: RoundRobin,
    private readonly clock: Clock,
    private readonly idleMs: number,
    private readonly onEvent: RelayEvent,
    private readonly type: 'udp4' | 'udp6',
  ) {
    this.socket = dgram.createSocket({ type, ipv6Only: type === 'udp6' });
    this.socket.on('message', (msg, rinfo) => this.onClientMessage(msg, rinfo));
    this.socket.on('error', (err) => {
      // A bound UDP socket reports an error on receive only when it was
      // destroyed under us (unconnected: no ICMP errors reach it).
      if (this.bound) this.failure ??= String(err);
      this.onEvent('error', { listener: key, err: String(err) }, 'userspace UDP listener error');
    });
  }

  /** Why the socket stopped receiving, or null while it works. */
  failed(): string | null {
    return this.failure;
  }

  listen(host: string, port = 0): Promise<number> {
    return new Promise((resolve, reject) => {
      const onErr = (err: Error) => reject(err);
      this.socket.once('error', onErr);
      this.socket.bind({ address: host, port }, () => {
        this.socket.off('error', onErr);
        this.bound = true;
        resolve(this.socket.address().port);
      });
    });
  }

  port(): number {
    try {
      return this.socket.address().port;
    } catch {
      return 0;
    }
  }

  sessionCount(): number {
    return this.sessions.size;
  }

  closeConnectionsNotIn(keep: ReadonlySet<string>): number {
    let n = 0;
    for (const s of [...this.sessions.values()]) {
      if (keep.has(s.endpoint)) continue;
      this.endSession(s);
      n++;
    }
    return n;
  }

  close(): Promise<void> {
    this.closed = true;
    for (const s of [...this.sessions.values()]) this.endSession(s);
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }

  private onClientMessage(msg: Buffer, rinfo: dgram.RemoteInfo): void {
    if (this.closed) return;
    const clientKey = `${rinfo.address}:${rinfo.port}`;
    let s = this.sessions.get(clientKey);
    if (!s) {
      const created = this.newSession(clientKey, rinfo);
      if (!created) {
        this.dropped++;
        return;
      }
      s = created;
    }
    s.lastActivity = this.clock.monotonic();
    if (s.queue) {
      if (s.queue.length < MAX_QUEUED) s.queue.push(msg);
    } else {
      s.upstream.send(msg);
    }
  }

  private newSession(clientKey: string, rinfo: dgram.RemoteInfo): Session | null {
    // After an error (e.g. the endpoint answered port unreachable) the client moves on, as TCP dials do.
    const failedBefore = this.failedClients.delete(rinfo.address);
    const ep = this.lb.next(rinfo.address, failedBefore);
    if (ep === null) return null;
    const { host, port } = splitEndpoint(ep);
    const upstream = dgram.createSocket(this.type);
    const s: Session = {
      clientKey,
      endpoint: ep,
      upstream,
      queue: [],
      lastActivity: this.clock.monotonic(),
      timer: null,
    };
    this.sessions.set(clientKey, s);
    upstream.on('error', (err) => {
      this.onEvent('debug', { listener: this.key, endpoint: ep, err: String(err) }, 'UDP session error');
      if (this.failedClients.size < MAX_FAILED_CLIENTS) this.failedClients.add(rinfo.address);
      this.endSession(s);
    });
    upstream.on('message', (reply) => {
      s.lastActivity = this.clock.monotonic();
      this.socket.send(reply, rinfo.port, rinfo.address);
    });
    upstream.connect(port, host, () => {
      const q = s.queue ?? [];
      s.queue = null;
      for (const m of q) upstream.send(m);
    });
    this.armIdle(s);
    return s;
  }

  /** One timer per session; on expiry it re-arms for the remaining time if there was activity since. */
  private armIdle(s: Session): void {
    const wait = Math.max(1, s.lastActivity + this.idleMs - this.clock.monotonic());
    s.timer = this.clock.setTimer(wait, () => {
      s.timer = null;
      if (this.sessions.get(s.clientKey) !== s) return;
      if (this.clock.monotonic() - s.lastActivity >= this.idleMs) this.endSession(s);
      else this.armIdle(s);
    });
  }

  private endSession(s: Session): void {
    if (this.sessions.get(s.clientKey) === s) this.sessions.delete(s.clientKey);
    s.timer?.cancel();
    s.timer = null;
    try {
      s.upstream.close();
    } catch {
      /* already closed */
    }
  }
}
