// The userspace mode's TCP listener, also the relay of nftables mode's
// localhost NodePorts: accepts redirected connections, picks an endpoint with
// the listener's RoundRobin and relays bytes both ways until both sides have
// ended. It works on libuv stream handles (Node's tcp_wrap binding), not on
// net.Socket: no Duplex stream, no stream state objects and no events per
// socket, which is where a net.Socket relay spends most of its CPU per
// connection and per byte (measured in bench/README.md, userspace-relay).
//
// Contracts:
// * Backpressure: when libuv queues more than HIGH_WATER (256 KiB) of writes
//   to one side (its kernel buffer is full), reading from the other side
//   stops until the queue drains below it. So at most HIGH_WATER plus one
//   read chunk (64 KiB) per direction is held in the relay.
// * Half-close: EOF from one side becomes shutdown() of the other, which
//   may go on sending; when both directions ended both handles are closed.
// * Errors: a read or write error on either side resets both (RST passes
//   through, as a kernel DNAT path would show it).
// * Connect failures (refused, unreachable, timeout) try the next endpoint
//   round-robin, ignoring affinity, with the upstream userspace proxier's
//   dial timeouts (250 ms, 500 ms, 1 s, 2 s): four tries, then reset.
// * No endpoints: the client is reset at once.
// * No idle timeout: a relay lives as long as both sides keep it open, as
//   upstream's userspace proxier did for TCP.
//
// The binding is Node's internal API (process.binding allow-listed
// 'tcp_wrap' and 'stream_wrap', used by lib/net.js itself); bindings.ts
// checks its shape once, and the relay's users ask for it when they are
// built, so a Node that changed it fails at start, not in the middle of a relay.
import { getSystemErrorName } from 'node:util';
import { ProxyError } from '../../core/errors.js';
import type { RoundRobin } from '../../dataplane/userspace/loadbalancer.js';
import { binding, UV_EOF, type ConnectReq, type TcpHandle, type WriteReq } from './bindings.js';
import { DialTimer } from './dialtimer.js';

/** Upstream userspace EndpointDialTimeouts. */
export const ENDPOINT_DIAL_TIMEOUTS_MS = [250, 500, 1000, 2000] as const;

export type RelayEvent = (
  level: 'debug' | 'info' | 'warn' | 'error',
  fields: Record<string, unknown>,
  msg: string,
) => void;

/** "ip:port" / "[ip]:port" -> host and port. */
export function splitEndpoint(key: string): { host: string; port: number } {
  const i = key.lastIndexOf(':');
  const host = key.slice(0, i);
  return { host: host.startsWith('[') ? host.slice(1, -1) : host, port: Number(key.slice(i + 1)) };
}

/** One relayed connection. `up` is null while no dial is in flight. */
interface Relay {
  readonly client: TcpHandle;
  up: TcpHandle | null;
  endpoint: string;
  /** Bumped per dial: completions of abandoned dials are ignored. */
  dialSeq: number;
  connected: boolean;
  done: boolean;
  /** Directions whose EOF was passed on as a completed shutdown (2 = both). */
  ended: number;
}

/** Per-handle relay state, kept on the handle so one shared onread serves all. */
interface Side {
  relay: Relay;
  peer: TcpHandle;
  owner: TcpListener;
  /** Bytes written to `peer` still queued in libuv (the kernel buffer was full). */
  pending: number;
  /** Bytes read so far (until the side gets a user buffer). */
  total: number;
  /** This side's own read buffer once it moved BULK_AFTER bytes. */
  userBuf?: Buffer;
  /** Reading from this side is stopped for backpressure. */
  stopped: boolean;
  eof: boolean;
}

/** Queued bytes per direction before reading stops (net.Socket's pipe stops at 16 KiB; bulk gains from more). */
const HIGH_WATER = 256 * 1024;
/** Bytes read before a side gets its own read buffer of BULK_BUFFER bytes. */
const BULK_AFTER = 4 * 1024 * 1024;
const BULK_BUFFER = 256 * 1024;

type SideHandle = TcpHandle & { side?: Side; shutdownIssued?: boolean };

function errName(err: number): string {
  try {
    return getSystemErrorName(err);
  } catch {
    return String(err);
  }
}

/**
 * Close with RST, or plainly once a shutdown was issued on the handle: libuv
 * refuses to reset a handle with a shutdown in flight (EINVAL), and Node's
 * TCPWrap marks the handle closing even then, so a close() after the failed
 * reset does nothing and the socket would stay open for good.
 */
function resetHandle(h: SideHandle): void {
  if (h.shutdownIssued || h.reset(() => {}) !== 0) h.close();
}

/** onread of every wired handle (`this` is the handle that read). */
function onRead(this: SideHandle, ab: ArrayBuffer | undefined): void {
  const s = this.side;
  if (!s || s.relay.done) return;
  const { streamBaseState, kReadBytesOrError, kArrayBufferOffset, kLastWriteWasAsync, WriteWrap } = binding();
  const nread = streamBaseState[kReadBytesOrError]!;
  if (nread > 0) {
    // With a user buffer (bulk side) the bytes are at its start and ab is undefined.
    const chunk = ab ? new Uint8Array(ab, streamBaseState[kArrayBufferOffset]!, nread) : s.userBuf!.subarray(0, nread);
    const req = new WriteWrap() as WriteReq;
    req.handle = s.peer;
    req.oncomplete = onWriteDone;
    req.async = false;
    req.side = s;
    req.buffer = chunk;
    const err = s.peer.writeBuffer(req, chunk);
    if (err !== 0) return s.owner.resetRelay(s.relay);
    if (streamBaseState[kLastWriteWasAsync]) {
      // The peer's kernel buffer is full: libuv queues the rest. Past HIGH_WATER
      // queued bytes stop reading here until the queue drained below it.
      // A user buffer is reused by the next read: stop at once until the write is out.
      s.pending += nread;
      req.bytes = nread;
      if ((s.userBuf || s.pending >= HIGH_WATER) && !s.stopped) {
        s.stopped = true;
        this.readStop();
      }
    } else if (!s.userBuf && (s.total += nread) >= BULK_AFTER && s.pending === 0) {
      // A bulk side: read into its own larger buffer, no allocation per chunk.
      s.userBuf = Buffer.allocUnsafe(BULK_BUFFER);
      this.useUserBuffer(s.userBuf);
    }
    return;
  }
  if (nread === UV_EOF) {
    s.eof = true;
    // libuv queues the shutdown behind pending writes.
    const req = new (binding().ShutdownWrap)() as WriteReq;
    req.handle = s.peer;
    req.oncomplete = onShutdownDone;
    req.side = s;
    (s.peer as SideHandle).shutdownIssued = true;
    if (s.peer.shutdown(req) !== 0) s.owner.resetRelay(s.relay);
    return;
  }
  if (nread < 0) s.owner.resetRelay(s.relay);
}

function onWriteDone(this: WriteReq, status: number): void {
  const s = this.side as Side;
  if (s.relay.done) return;
  if (status < 0) return s.owner.resetRelay(s.relay);
  s.pending -= this.bytes ?? 0;
  if (s.stopped && (s.userBuf ? s.pending === 0 : s.pending < HIGH_WATER) && !s.eof) {
    s.stopped = false;
    (s.relay.client === s.peer ? s.relay.up! : s.relay.client).readStart();
  }
}

function onShutdownDone(this: WriteReq, status: number): void {
  const s = this.side as Side;
  if (s.relay.done) return;
  if (status < 0) return s.owner.resetRelay(s.relay);
  if (++s.relay.ended === 2) s.owner.finish(s.relay);
}

/** The relays of a listener that has accepted none: read, never written (accept() makes a Set of its own). */
const NO_RELAYS: ReadonlySet<Relay> = new Set();

export class TcpListener {
  private readonly server: TcpHandle;
  // Made on first use: most listeners of a large node are idle, and each empty Set or timer costs heap.
  private relays: Set<Relay> = NO_RELAYS as Set<Relay>;
  private dialTimer: DialTimer | null = null;
  private closed = false;
  private boundPort = 0;
  /** Connections accepted since start (for metrics and tests). */
  accepted = 0;
  /** Connections that found no endpoint that would accept them. */
  failed = 0;

  constructor(
    readonly key: string,
    private readonly lb: RoundRobin,
    private readonly onEvent: RelayEvent,
    private readonly dialTimeouts: readonly number[] = ENDPOINT_DIAL_TIMEOUTS_MS,
  ) {
    const b = binding();
    this.server = new b.TCP(b.constants.SERVER);
    this.server.onconnection = (status: number, client?: TcpHandle) => {
      if (status < 0 || !client) {
        this.onEvent('error', { listener: key, err: errName(status) }, 'userspace TCP listener error');
        return;
      }
      this.accept(client);
    };
  }

  /** Bind (port 0 = any free port) and resolve with the bound port. */
  listen(host: string, port = 0): Promise<number> {
    const v6 = host.includes(':');
    // UV_TCP_IPV6ONLY = 1, as net.Server's ipv6Only.
    let err = v6 ? this.server.bind6(host, port, 1) : this.server.bind(host, port);
    if (err === 0) err = this.server.listen(4096);
    if (err !== 0) {
      const name = errName(err);
      // A taken port is another socket's (the next sync tries again); anything else is an address or port we may not use.
      const code = name === 'EADDRINUSE' ? 'KPT_BUSY' : 'KPT_CONFIG_INVALID';
      return Promise.reject(new ProxyError(code, `listen ${name} ${host}:${port}`));
    }
    const out: { port?: number } = {};
    this.server.getsockname(out);
    this.boundPort = out.port ?? 0;
    return Promise.resolve(this.boundPort);
  }

  port(): number {
    return this.boundPort;
  }

  /** The listening socket's fd, for the liveness check (sockstate.ts); -1 when unknown. */
  fd(): number {
    return this.server.fd ?? -1;
  }

  /** Open relays (including those still connecting). */
  connectionCount(): number {
    return this.relays.size;
  }

  /** Reset relays whose endpoint is not in `keep` (endpoint removed). Returns how many. */
  closeConnectionsNotIn(keep: ReadonlySet<string>): number {
    let n = 0;
    for (const r of this.relays) {
      if (keep.has(r.endpoint)) continue;
      this.resetRelay(r);
      n++;
    }
    return n;
  }

  /**
   * Stop listening but let the open relays run to their end: what a listener
   * that died (sockstate.ts) leaves behind still works, and its replacement
   * takes the new connections.
   */
  retire(): void {
    if (this.closed) return;
    this.closed = true;
    this.server.close();
  }

  /** Stop accepting and reset every relay (also those a retired listener left running). */
  close(): Promise<void> {
    this.dialTimer?.clear();
    for (const r of this.relays) this.resetRelay(r);
    if (this.closed) return Promise.resolve();
    this.closed = true;
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: TcpHandle): void {
    if (this.closed) {
      resetHandle(client);
      return;
    }
    this.accepted++;
    client.setNoDelay(true);
    const relay: Relay = { client, up: null, endpoint: '', dialSeq: 0, connected: false, done: false, ended: 0 };
    if (this.relays === NO_RELAYS) this.relays = new Set();
    this.relays.add(relay);
    this.dial(relay, 0);
  }

  private clientIP(relay: Relay): string {
    if (!this.lb.affinityEnabled()) return '';
    const out: { address?: string } = {};
    relay.client.getpeername(out);
    return out.address ?? '';
  }

  private dial(relay: Relay, attempt: number): void {
    const ep = attempt < this.dialTimeouts.length ? this.lb.next(this.clientIP(relay), attempt > 0) : null;
    if (ep === null) {
      this.failed++;
      return this.resetRelay(relay);
    }
    const b = binding();
    const { host, port } = splitEndpoint(ep);
    const up: SideHandle = new b.TCP(b.constants.SOCKET);
    const seq = ++relay.dialSeq;
    relay.endpoint = ep;
    relay.up = up;
    const req = new b.TCPConnectWrap() as ConnectReq;
    req.oncomplete = (status: number) => {
      if (relay.done || relay.dialSeq !== seq) return;
      if (status === 0) return this.wire(relay, up);
      this.retry(relay, attempt, errName(status));
    };
    req.address = host;
    req.port = port;
    const err = host.includes(':') ? up.connect6(req, host, port) : up.connect(req, host, port);
    if (err !== 0) return this.retry(relay, attempt, errName(err));
    (this.dialTimer ??= new DialTimer()).watch(this.dialTimeouts[attempt]!, () => {
      if (!relay.done && relay.dialSeq === seq && !relay.connected) this.retry(relay, attempt, 'timeout');
    });
  }

  private retry(relay: Relay, attempt: number, why: string): void {
    relay.dialSeq++;
    relay.up?.close();
    relay.up = null;
    this.onEvent(
      'debug',
      { listener: this.key, endpoint: relay.endpoint, attempt, why },
      'endpoint dial failed, trying the next',
    );
    this.dial(relay, attempt + 1);
  }

  private wire(relay: Relay, up: SideHandle): void {
    relay.connected = true;
    const client = relay.client as SideHandle;
    up.setNoDelay(true);
    client.side = { relay, peer: up, owner: this, pending: 0, total: 0, stopped: false, eof: false };
    up.side = { relay, peer: client, owner: this, pending: 0, total: 0, stopped: false, eof: false };
    client.onread = onRead;
    up.onread = onRead;
    if (client.readStart() !== 0 || up.readStart() !== 0) this.resetRelay(relay);
  }

  /** Both directions ended cleanly: close both handles. */
  finish(relay: Relay): void {
    if (relay.done) return;
    relay.done = true;
    this.relays.delete(relay);
    relay.client.close();
    relay.up?.close();
  }

  /** Reset both sides (RST where connected) and forget the relay. */
  resetRelay(relay: Relay): void {
    if (relay.done) return;
    relay.done = true;
    this.relays.delete(relay);
    resetHandle(relay.client);
    const up = relay.up;
    if (up) {
      if (relay.connected) resetHandle(up);
      else up.close();
    }
  }
}
