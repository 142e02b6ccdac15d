// One TCP listener of the userspace mode: accepts redirected connections,
// picks an endpoint with the listener's RoundRobin and relays bytes both
// ways until both sides have ended.
//
// Contracts:
// * Backpressure: relayBytes() in both directions (a full socket pauses its
//   source), so a slow side never makes the relay buffer without bound.
// * Half-close: both sockets allow half-open; a FIN from one side is passed
//   on as end() to the other, which may go on sending.
// * Errors: an error or reset on either side resets the other (RST passes
//   through, as a kernel DNAT path would show it).
// * Connect failures (refused, unreachable, timeout) try the next endpoint
//   round-robin, ignoring affinity, with the upstream userspace proxier's
//   dial timeouts (250 ms, 500 ms, 1 s, 2 s): four tries, then reset.
// * No endpoints: the client is reset at once.
import net from 'node:net';
import type { RoundRobin } from '../../dataplane/userspace/loadbalancer.js';
import { DialTimer } from './dialtimer.js';

/** Upstream userspace EndpointDialTimeouts. */
export const ENDPOINT_DIAL_TIMEOUTS_MS = [250, 500, 1000, 2000] as const;

export type RelayEvent = (
  level: 'debug' | 'info' | 'warn' | 'error',
  fields: Record<string, unknown>,
  msg: string,
) => void;

interface Relay {
  readonly client: net.Socket;
  upstream: net.Socket | null;
  endpoint: string;
  /** True once upstream connected and the byte relay is wired. */
  wired: boolean;
}

/** "ip:port" / "[ip]:port" -> host and port. */
export function splitEndpoint(key: string): { host: string; port: number } {
  const i = key.lastIndexOf(':');
  const host = key.slice(0, i);
  return { host: host.startsWith('[') ? host.slice(1, -1) : host, port: Number(key.slice(i + 1)) };
}

/**
 * Copy from -> to with backpressure and half-close: what stream.pipe() does,
 * minus its per-chunk bookkeeping (measured: less CPU per connection).
 * A full `to` pauses `from` until 'drain'; the end of `from` ends `to`.
 */
function relayBytes(from: net.Socket, to: net.Socket): void {
  const resume = () => from.resume();
  from.on('data', (chunk: Buffer) => {
    if (!to.write(chunk)) {
      from.pause();
      to.once('drain', resume);
    }
  });
  // 'end' fires at most once: on() spares once()'s wrapper closure.
  from.on('end', () => to.end());
  // Accepted sockets start paused (pauseOnConnect): a 'data' listener alone does not start them.
  from.resume();
}

export class TcpListener {
  private readonly server: net.Server;
  private readonly relays = new Set<Relay>();
  private readonly dialTimer = new DialTimer();
  private closed = false;
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
    this.server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true, noDelay: true }, (c) => this.accept(c));
    this.server.on('error', (err) =>
      this.onEvent('error', { listener: key, err: String(err) }, 'userspace TCP listener error'),
    );
  }

  /** Bind (port 0 = any free port) and resolve with the bound port. */
  listen(host: string, port = 0): Promise<number> {
    return new Promise((resolve, reject) => {
      const onErr = (err: Error) => reject(err);
      this.server.once('error', onErr);
      this.server.listen({ host, port, backlog: 4096, ipv6Only: host.includes(':') }, () => {
        this.server.off('error', onErr);
        resolve((this.server.address() as net.AddressInfo).port);
      });
    });
  }

  port(): number {
    return (this.server.address() as net.AddressInfo | null)?.port ?? 0;
  }

  /** The listening socket's fd, for the liveness check (sockstate.ts); -1 when unknown. */
  fd(): number {
    // net.Server keeps its handle private; on Unix the handle's fd is the socket's.
    return (this.server as unknown as { _handle?: { fd?: number } | null })._handle?.fd ?? -1;
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
      this.reset(r);
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

  /** Stop accepting and reset every relay. */
  close(): Promise<void> {
    this.closed = true;
    this.dialTimer.clear();
    for (const r of this.relays) this.reset(r);
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    if (this.closed) {
      client.resetAndDestroy();
      return;
    }
    this.accepted++;
    const relay: Relay = { client, upstream: null, endpoint: '', wired: false };
    this.relays.add(relay);
    client.on('error', () => this.reset(relay));
    // One 'close' listener for both phases (fewer listeners per connection).
    client.on('close', () => {
      this.relays.delete(relay);
      const up = relay.upstream;
      // The client went away without a clean end on our side: pass the reset on.
      if (relay.wired && up && !up.destroyed && !up.writableEnded) up.resetAndDestroy();
    });
    this.dial(relay, 0);
  }

  private dial(relay: Relay, attempt: number): void {
    // remoteAddress costs a getpeername() syscall: only affinity needs it.
    const clientIP = this.lb.affinityEnabled() ? (relay.client.remoteAddress ?? '') : '';
    const ep = attempt < this.dialTimeouts.length ? this.lb.next(clientIP, attempt > 0) : null;
    if (ep === null || relay.client.destroyed) {
      if (ep === null) this.failed++;
      relay.client.resetAndDestroy();
      this.relays.delete(relay);
      return;
    }
    const { host, port } = splitEndpoint(ep);
    relay.endpoint = ep;
    const up = net.connect({ host, port, allowHalfOpen: true, noDelay: true });
    relay.upstream = up;
    let failed = false;
    const retry = (why: string) => {
      if (failed) return;
      failed = true;
      up.removeAllListeners();
      up.on('error', () => {});
      up.destroy();
      relay.upstream = null;
      this.onEvent(
        'debug',
        { listener: this.key, endpoint: ep, attempt, why },
        'endpoint dial failed, trying the next',
      );
      this.dial(relay, attempt + 1);
    };
    const onDialError = (err: NodeJS.ErrnoException) => retry(err.code ?? String(err));
    // One shared deadline timer per listener instead of up.setTimeout() per dial.
    this.dialTimer.watch(this.dialTimeouts[attempt]!, () => {
      if (up.connecting && !up.destroyed) retry('timeout');
    });
    up.on('error', onDialError);
    up.on('connect', () => {
      up.off('error', onDialError);
      this.wire(relay, up);
    });
  }

  private wire(relay: Relay, up: net.Socket): void {
    const { client } = relay;
    if (client.destroyed) {
      up.destroy();
      return;
    }
    relay.wired = true;
    up.on('error', () => this.reset(relay));
    up.on('close', () => {
      // The upstream went away without a clean end on our side: pass the reset on.
      if (!client.destroyed && !client.writableEnded) client.resetAndDestroy();
    });
    relayBytes(client, up);
    relayBytes(up, client);
  }

  private reset(r: Relay): void {
    this.relays.delete(r);
    if (!r.client.destroyed) r.client.resetAndDestroy();
    if (r.upstream && !r.upstream.destroyed) r.upstream.resetAndDestroy();
  }
}
