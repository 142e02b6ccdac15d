// Whether the API server can be reached again, for the sources that wait out
// an outage (KubeClient.untilReachable). Its own file: the client's requests
// (client.ts) only report to it what they saw.
import { connect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { Clock } from '../../core/clock.js';

/** How long one probe connection may take. */
const PROBE_TIMEOUT_MS = 1000;

/**
 * When someone starts waiting, try one connection to the server; while they
 * wait and it cannot be reached (or a request finds it unreachable:
 * suspect()), try again every interval (jittered). Waiters are released when
 * a connection succeeds after the server was seen unreachable: it came back.
 * A server that accepts connections but fails requests (a load balancer in
 * front of a dead API server, a 410, a closed keep-alive) costs one probe per
 * wait and releases no one, so the sources' own backoff applies.
 *
 * Both halves matter to the API server. The probe once went on for as long
 * as anyone waited, down or not, connecting and dropping the socket at once:
 * on a TLS port each is an aborted handshake, 3-6 a second per proxy for as
 * long as a source backed off after a failure that was not an outage (the
 * relist's "socket hang up" after a 410: 8-12 s of them). Now it stops at the
 * first success, and on a TLS port a probe finishes the handshake and closes
 * politely (close_notify), so the server sees a clean connection.
 */
export class ReachabilityProbe {
  private readonly waiters = new Set<() => void>();
  private running = false;
  private stopped = false;
  /** The server was seen unreachable since it last answered. */
  private down = false;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly clock: Clock,
    private readonly intervalMs: number,
    private readonly random: () => number,
    /** For an https server: the TLS name to present (servername); undefined = plain TCP. */
    private readonly tls: { servername?: string } | undefined,
  ) {}

  untilRecovered(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const done = (): void => {
        this.waiters.delete(done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      this.waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
      void this.loop();
    });
  }

  stop(): void {
    this.stopped = true;
    this.releaseAll();
  }

  /** A request could not reach the server (refused, timed out, peer gone). */
  suspect(): void {
    this.down = true;
    if (this.waiters.size > 0) void this.loop();
  }

  /**
   * The server answered a request. After an outage the first answer often
   * comes before the probe's next try (a source whose backoff ended first),
   * and it is as good a sign of recovery: release the waiters too. Without
   * that, clearing `down` here left the probe nothing to report, and the
   * other sources slept out their backoff (5-11 s seen in bench/recovery).
   * Only a change from down releases them, so a server that answers every
   * request with an error does not wake the sources round after round.
   */
  answered(): void {
    this.recovered();
  }

  /** If the server was down, it is back: release every waiter. Whether it was down. */
  private recovered(): boolean {
    if (!this.down) return false;
    this.down = false;
    this.releaseAll();
    return true;
  }

  private releaseAll(): void {
    for (const w of [...this.waiters]) w();
  }

  private async loop(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.waiters.size > 0 && !this.stopped) {
        // Up: release the waiters if it had been down; if not, the failure
        // they wait out was not an outage, and probing on would only load a
        // healthy server.
        if (await this.tryConnect()) {
          this.recovered();
          break;
        }
        this.down = true;
        const delay = this.intervalMs * (0.5 + this.random());
        await new Promise<void>((r) => this.clock.setTimer(delay, r));
      }
    } finally {
      this.running = false;
    }
  }

  private tryConnect(): Promise<boolean> {
    return new Promise((resolve) => {
      // Reachability only: the server's certificate is checked by the requests that follow.
      const s = this.tls
        ? tlsConnect({ host: this.host, port: this.port, rejectUnauthorized: false, ...this.tls })
        : connect({ host: this.host, port: this.port });
      let settled = false;
      const finish = (ok: boolean): void => {
        if (settled) return;
        settled = true;
        s.setTimeout(0);
        // After a finished handshake: close_notify and FIN, which the server takes as a clean close.
        if (ok) s.end();
        else s.destroy();
        s.on('error', () => {}); // a late error of a socket already given up on
        resolve(ok);
      };
      s.setTimeout(PROBE_TIMEOUT_MS, () => finish(false));
      s.once(this.tls ? 'secureConnect' : 'connect', () => finish(true));
      s.once('error', () => finish(false));
    });
  }
}
