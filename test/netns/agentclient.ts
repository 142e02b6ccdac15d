// The test-side handle of an agent (agent.ts) running in one namespace.
// Requests are matched to responses by id; every request carries a timeout
// and the handle adds its own margin, so no call can hang a test.
import * as readline from 'node:readline';
import { nodeScript, nsSpawn, type NsProcess } from './spawn.js';
import { scaled } from './timescale.js';

/** What an echo server saw: which pod answered, the client address it saw, the address it was reached on. */
export interface EchoReply {
  readonly pod: string;
  readonly src: string;
  readonly dst: string;
  readonly data: string;
}

export type ClientResult =
  | {
      ok: true;
      reply: EchoReply;
      ms: number;
      /** TCP and UDP exchanges: the server's address as the client socket saw it (getpeername / recvmsg). */
      peer?: string;
    }
  | { ok: false; error: string; ms: number };

export interface HttpResult {
  ok: boolean;
  status?: number;
  body?: string;
  headers?: Record<string, string>;
  error?: string;
}

export interface TcpOpts {
  timeoutMs?: number;
  bind?: string;
  data?: string;
}
export interface UdpOpts extends TcpOpts {
  localPort?: number;
  /** Send with sendto() on an unconnected socket (the reply's source as recvmsg reports it) instead of connect(). */
  unconnected?: boolean;
}

export class Agent {
  private nextId = 1;
  private readonly pending = new Map<number, (r: Record<string, unknown>) => void>();
  private readonly ready: Promise<void>;

  private constructor(
    readonly ns: string,
    readonly name: string,
    private readonly proc: NsProcess,
  ) {
    let markReady!: () => void;
    this.ready = new Promise((res) => {
      markReady = res;
    });
    readline.createInterface({ input: proc.child.stdout! }).on('line', (line) => {
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      if (msg['id'] === 0) {
        markReady();
        return;
      }
      const cb = this.pending.get(Number(msg['id']));
      this.pending.delete(Number(msg['id']));
      cb?.(msg);
    });
    void proc.exited.then(() => {
      for (const cb of this.pending.values()) cb({ ok: false, error: 'EAGENTEXIT' });
      this.pending.clear();
    });
  }

  static async start(ns: string, name: string): Promise<Agent> {
    const proc = nsSpawn(ns, nodeScript('./agent.js', import.meta.url), {
      env: { KPT_AGENT_NAME: name },
      pipeStdout: true,
    });
    const agent = new Agent(ns, name, proc);
    const timeout = new Promise<never>((_, rej) =>
      setTimeout(() => rej(new Error(`agent in ${ns} did not start: ${proc.log()}`)), scaled(15000)).unref(),
    );
    await Promise.race([
      agent.ready,
      timeout,
      proc.exited.then((c) => {
        throw new Error(`agent in ${ns} exited ${c}: ${proc.log()}`);
      }),
    ]);
    return agent;
  }

  request(op: string, args: Record<string, unknown>, unscaledTimeoutMs = 2000): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    const timeoutMs = scaled(unscaledTimeoutMs);
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.pending.delete(id);
        resolve({ ok: false, error: 'EAGENTTIMEOUT' });
      }, timeoutMs + 3000);
      this.pending.set(id, (r) => {
        clearTimeout(t);
        resolve(r);
      });
      this.proc.child.stdin!.write(JSON.stringify({ ...args, id, op, timeoutMs }) + '\n');
    });
  }

  /** Start echo servers (TCP and UDP) on 0.0.0.0 (and on :: if ipv6) answering as `name`. */
  async serve(tcp: number[], udp: number[], ipv6 = false): Promise<void> {
    const r = await this.request('serve', { name: this.name, tcp, udp, ipv6 });
    if (!r['ok']) throw new Error(`serve in ${this.ns}: ${String(r['error'])}`);
  }

  tcp(host: string, port: number, opts: TcpOpts = {}): Promise<ClientResult> {
    return this.request(
      'tcp',
      { host, port, bind: opts.bind, data: opts.data },
      opts.timeoutMs ?? 2000,
    ) as unknown as Promise<ClientResult>;
  }

  udp(host: string, port: number, opts: UdpOpts = {}): Promise<ClientResult> {
    return this.request(
      'udp',
      { host, port, bind: opts.bind, data: opts.data, localPort: opts.localPort, unconnected: opts.unconnected },
      opts.timeoutMs ?? 2000,
    ) as unknown as Promise<ClientResult>;
  }

  http(url: string, timeoutMs = 2000): Promise<HttpResult> {
    return this.request('http', { url }, timeoutMs) as unknown as Promise<HttpResult>;
  }

  /** Hold a TCP connection open under key (from localPort if given); send() exchanges a line on it. */
  async open(
    key: string,
    host: string,
    port: number,
    timeoutMs = 2000,
    localPort?: number,
  ): Promise<{ ok: boolean; error?: string }> {
    return (await this.request('open', { key, host, port, localPort }, timeoutMs)) as { ok: boolean; error?: string };
  }
  send(key: string, data = 'ping', timeoutMs = 2000): Promise<ClientResult> {
    return this.request('send', { key, data }, timeoutMs) as unknown as Promise<ClientResult>;
  }
  /** Close a held connection; reset: with an RST (no TIME_WAIT left behind). */
  async closeConn(key: string, reset = false): Promise<void> {
    await this.request('close', { key, reset });
  }

  stop(): Promise<void> {
    this.proc.child.stdin?.end();
    return this.proc.stop(1000);
  }
}
