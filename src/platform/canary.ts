// The datapath canary's sockets: a TCP listener on a node address that hands
// every connection a secret and closes it, and a prober that connects to the
// canary's ClusterIP every interval through whatever the proxy programmed
// (nat OUTPUT rules, IPVS, the ebpf socket hooks, the userspace redirect) and
// checks the secret came back, so a connection that another host or process
// answered counts as a failure too. When a probe counts, and what it changes,
// is src/engine/canary.ts.
//
// Cost per probe: one connect, 33 bytes read, one close on the loopback path;
// measured in docs/compatibility.md.
//
// A connect() that fails with ENETUNREACH may mean the node has no route
// covering the ClusterIP at all (the lookup comes before any rule of ours), or
// that a router sent back "no route" for a packet our DNAT let through. A UDP
// connect() to the ClusterIP tells them apart: it looks the route up and sends
// nothing.

import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { CANARY_PORT, canaryTarget, canaryVIP, type CanaryTarget } from '../core/canary.js';
import type { Clock } from '../core/clock.js';
import type { IPFamily } from '../core/types.js';
import { CanaryJudge, type CanaryTransition, type ProbeResult } from '../engine/canary.js';
import type { Logger } from './logger.js';

export interface DatapathCanaryOptions {
  readonly family: IPFamily;
  readonly nodeName: string;
  /** The node address the listener binds (the endpoint the canary Service points at). */
  readonly listenIP: string;
  readonly clock: Clock;
  readonly judge: CanaryJudge;
  /** Proxier.syncEpoch. */
  readonly syncEpoch: () => number;
  /** The canary is in the family's last synced state. */
  readonly programmed: () => boolean;
  readonly onTransition: (t: CanaryTransition) => void;
  readonly log?: Logger;
  /** Default 5000. */
  readonly intervalMs?: number;
  /** Default 1000. */
  readonly timeoutMs?: number;
}

export class DatapathCanary {
  readonly vip: string;
  private readonly secret = `${randomBytes(16).toString('hex')}\n`;
  private server: Server | null = null;
  private canary: CanaryTarget | null = null;
  private timer: { cancel(): void } | null = null;
  private closed = false;

  constructor(private readonly opts: DatapathCanaryOptions) {
    this.vip = canaryVIP(opts.family);
  }

  /** Open the listener (an ephemeral port), so the first sync can program the canary. */
  async listen(): Promise<void> {
    const server = createServer((sock) => {
      sock.on('error', () => {});
      sock.end(this.secret);
    });
    server.listen(0, this.opts.listenIP);
    await once(server, 'listening');
    const addr = server.address();
    const port = typeof addr === 'object' && addr ? addr.port : 0;
    this.server = server;
    this.canary = canaryTarget(this.opts.family, this.opts.nodeName, this.opts.listenIP, port);
  }

  /** The canary for the proxier (the same object every time, so a sync sees no change). */
  target(): CanaryTarget | null {
    return this.canary;
  }

  /** Probe every interval from now on. */
  start(): void {
    this.schedule(this.opts.clock.monotonic() + this.interval());
  }

  async close(): Promise<void> {
    this.closed = true;
    this.timer?.cancel();
    const s = this.server;
    this.server = null;
    if (s) await new Promise<void>((r) => s.close(() => r()));
  }

  private interval(): number {
    return this.opts.intervalMs ?? 5000;
  }

  private schedule(at: number): void {
    if (this.closed) return;
    const delay = Math.max(0, at - this.opts.clock.monotonic());
    this.timer = this.opts.clock.setTimer(delay, () => void this.tick(at));
  }

  private async tick(scheduledAt: number): Promise<void> {
    const { clock } = this.opts;
    const startedAt = clock.monotonic();
    const epochBefore = this.opts.syncEpoch();
    const programmed = this.opts.programmed();
    const error = programmed ? await this.probe() : 'not programmed';
    const noRoute = error === 'ENETUNREACH' && !(await hasRoute(this.vip));
    const result: ProbeResult = {
      scheduledAt,
      startedAt,
      endedAt: clock.monotonic(),
      epochBefore,
      epochAfter: this.opts.syncEpoch(),
      programmed,
      ok: error === '',
      error,
      noRoute,
    };
    const wasNoRoute = this.opts.judge.status().noRoute;
    const { verdict, transition } = this.opts.judge.record(result);
    if (!result.ok && verdict === 'counted')
      this.opts.log?.debug({ family: this.opts.family, err: error }, 'datapath canary probe failed');
    if (this.opts.judge.status().noRoute !== wasNoRoute) this.logRoute(!wasNoRoute);
    if (transition) this.opts.onTransition(transition);
    // Fixed-rate from the schedule, but never a burst of catch-up probes after a stall.
    const next = Math.max(scheduledAt + this.interval(), clock.monotonic() + this.interval() / 2);
    this.schedule(next);
  }

  /** Said once per change, not per probe. */
  private logRoute(missing: boolean): void {
    const at = { family: this.opts.family, vip: this.vip };
    if (missing)
      this.opts.log?.warn(
        at,
        "No route from this node covers the datapath canary's ClusterIP (a default route would): its probes do not count until one does",
      );
    else this.opts.log?.info(at, "A route covers the datapath canary's ClusterIP again: its probes count");
  }

  /** One connection through the datapath: "" when the listener's secret came back, else why not. */
  private probe(): Promise<string> {
    const timeoutMs = this.opts.timeoutMs ?? 1000;
    return new Promise((resolve) => {
      let got = '';
      let done = false;
      const sock: Socket = connect({ host: this.vip, port: CANARY_PORT });
      const finish = (err: string) => {
        if (done) return;
        done = true;
        timer.cancel();
        sock.destroy();
        resolve(err);
      };
      const timer = this.opts.clock.setTimer(timeoutMs, () =>
        finish(got === '' ? `no answer within ${timeoutMs} ms` : 'answer incomplete'),
      );
      sock.setEncoding('utf8');
      sock.on('data', (d: string) => {
        got += d;
        if (got.length > this.secret.length) finish('answered by something other than this proxy');
      });
      sock.on('end', () => finish(got === this.secret ? '' : 'answered by something other than this proxy'));
      sock.on('error', (e: NodeJS.ErrnoException) => finish(e.code ?? e.message));
    });
  }
}

/** Whether the node has a route to ip: a UDP connect() looks it up and sends nothing. */
async function hasRoute(ip: string): Promise<boolean> {
  const sock = createSocket(ip.includes(':') ? 'udp6' : 'udp4');
  try {
    await new Promise<void>((resolve, reject) =>
      sock.connect(CANARY_PORT, ip, (err?: Error) => (err ? reject(err) : resolve())),
    );
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ENETUNREACH';
  } finally {
    sock.close();
  }
}
