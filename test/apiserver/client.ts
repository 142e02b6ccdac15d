// A bare HTTPS client for testing the test API server itself (no Kubernetes
// library in between): one-shot requests and streaming watches.

import { request } from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { KeyPair } from './certs.js';

export interface Reply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

export interface ClientOptions {
  readonly url: string;
  readonly ca: string;
  readonly token?: string;
  readonly clientCert?: KeyPair;
  /** Extra request headers (e.g. Accept). */
  readonly headers?: Readonly<Record<string, string>>;
}

function open(
  c: ClientOptions,
  method: string,
  path: string,
  headers: Record<string, string>,
): ReturnType<typeof request> {
  return request(new URL(path, c.url), {
    method,
    ca: c.ca,
    cert: c.clientCert?.cert,
    key: c.clientCert?.key,
    agent: false,
    headers: { ...(c.token !== undefined ? { Authorization: `Bearer ${c.token}` } : {}), ...c.headers, ...headers },
  });
}

export function call(
  c: ClientOptions,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = open(c, method, path, body === undefined ? {} : { 'Content-Type': contentType });
    req.on('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (b: Buffer) => chunks.push(b));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} });
      });
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

export interface WatchEvent {
  type: string;
  object: {
    kind?: string;
    code?: number;
    reason?: string;
    metadata: { name?: string; resourceVersion?: string; labels?: Record<string, string> };
  };
}

/** A streaming watch: events accumulate in `events`; `ended` resolves when the server ends the stream. */
export class WatchStream {
  readonly events: WatchEvent[] = [];
  status = 0;
  readonly ended: Promise<void>;
  private wake: () => void = () => {};
  private req: ReturnType<typeof request>;

  constructor(c: ClientOptions, path: string) {
    this.req = open(c, 'GET', path, {});
    this.ended = new Promise((resolve) => {
      this.req.on('response', (res: IncomingMessage) => {
        this.status = res.statusCode ?? 0;
        let buf = '';
        res.on('data', (b: Buffer) => {
          buf += b.toString('utf8');
          let nl: number;
          while ((nl = buf.indexOf('\n')) >= 0) {
            this.events.push(JSON.parse(buf.slice(0, nl)) as WatchEvent);
            buf = buf.slice(nl + 1);
          }
          this.wake();
        });
        res.on('end', () => {
          resolve();
          this.wake();
        });
        res.on('close', () => {
          resolve();
          this.wake();
        });
      });
      this.req.on('error', () => {
        resolve();
        this.wake();
      });
    });
    this.req.end();
  }

  /** Wait until at least n events (of `type`, if given) arrived. */
  async atLeast(n: number, type?: string, timeoutMs = 5000): Promise<WatchEvent[]> {
    const pick = (): WatchEvent[] => this.events.filter((e) => type === undefined || e.type === type);
    const deadline = Date.now() + timeoutMs;
    while (pick().length < n) {
      if (Date.now() > deadline) throw new Error(`watch: ${pick().length}/${n} events: ${JSON.stringify(this.events)}`);
      await new Promise<void>((r) => {
        this.wake = r;
        setTimeout(r, 50);
      });
    }
    return pick();
  }

  close(): void {
    this.req.destroy();
  }
}
