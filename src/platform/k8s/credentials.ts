// The credentials a request carries, kept fresh as client-go's transport does:
// - a token file (projected service-account tokens rotate) is re-read when the
//   copy in memory is older than a minute, and at once after a 401; the last
//   good read is kept if a read fails, and the kubeconfig's `token` is the
//   fallback before the first read;
// - an exec plugin is run on first use and again when its credential expires
//   or the server refuses it (401); concurrent requests share one run;
// - static tokens, basic auth and impersonation headers are fixed.
// A plugin may return a client certificate instead of a token; the client
// builds its TLS agent from `identity`, which changes when the plugin's
// certificate does.

import { readFile } from 'node:fs/promises';
import type { Clock } from '../../core/clock.js';
import { type ExecCredential, runExecPlugin } from './execplugin.js';
import type { ClientConfig } from './kubeconfig.js';

export interface AuthState {
  readonly headers: Readonly<Record<string, string>>;
  /** PEM client certificate and key to present (kubeconfig's, or the exec plugin's). */
  readonly cert?: string;
  readonly key?: string;
}

export interface CredentialsOptions {
  readonly clock: Clock;
  /** How long a token file read stays good; default 60 s (client-go's period). */
  readonly tokenFileMaxAgeMs?: number;
  /** Replace the plugin runner (tests). */
  readonly runPlugin?: typeof runExecPlugin;
}

const TOKEN_FILE_MAX_AGE_MS = 60_000;
/** Refresh an expiring exec credential this early, so no request goes out with a dying one. */
const EXEC_EXPIRY_MARGIN_MS = 10_000;

export class Credentials {
  private fileToken: string | undefined;
  private fileReadAt = -Infinity;
  private exec: ExecCredential | undefined;
  private execRun: Promise<ExecCredential> | undefined;
  private readonly fixed: Record<string, string> = {};

  constructor(
    private readonly cfg: ClientConfig,
    private readonly o: CredentialsOptions,
  ) {
    const imp = cfg.impersonate;
    if (imp?.user) this.fixed['Impersonate-User'] = imp.user;
    if (imp?.uid) this.fixed['Impersonate-Uid'] = imp.uid;
    if (cfg.basic) {
      this.fixed['Authorization'] =
        `Basic ${Buffer.from(`${cfg.basic.username}:${cfg.basic.password}`).toString('base64')}`;
    }
  }

  /** Extra headers that repeat (Impersonate-Group, Impersonate-Extra-*), as [name, value] pairs. */
  repeatedHeaders(): Array<[string, string]> {
    const imp = this.cfg.impersonate;
    if (!imp) return [];
    const out: Array<[string, string]> = imp.groups.map((g) => ['Impersonate-Group', g]);
    for (const [k, vs] of Object.entries(imp.extra)) {
      for (const v of vs) out.push([`Impersonate-Extra-${encodeURIComponent(k)}`, v]);
    }
    return out;
  }

  async get(): Promise<AuthState> {
    const headers: Record<string, string> = { ...this.fixed };
    let cert = this.cfg.tls.cert;
    let key = this.cfg.tls.key;
    if (this.cfg.exec) {
      const c = await this.execCredential();
      if (c.token) headers['Authorization'] = `Bearer ${c.token}`;
      if (c.cert && c.key) {
        cert = c.cert;
        key = c.key;
      }
    } else {
      const token = this.cfg.tokenFile ? await this.tokenFromFile() : this.cfg.token;
      if (token) headers['Authorization'] = `Bearer ${token}`;
    }
    return { headers, ...(cert && key ? { cert, key } : {}) };
  }

  /** The server answered 401: forget what may be stale so the next get() fetches anew. */
  unauthorized(): void {
    this.fileReadAt = -Infinity;
    this.exec = undefined;
  }

  private async tokenFromFile(): Promise<string | undefined> {
    const now = this.o.clock.monotonic();
    if (now - this.fileReadAt < (this.o.tokenFileMaxAgeMs ?? TOKEN_FILE_MAX_AGE_MS))
      return this.fileToken ?? this.cfg.token;
    try {
      const t = (await readFile(this.cfg.tokenFile!, 'utf8')).trim();
      if (t) this.fileToken = t;
      this.fileReadAt = now;
    } catch {
      // Keep the last good token; the next request tries the file again.
    }
    return this.fileToken ?? this.cfg.token;
  }

  private async execCredential(): Promise<ExecCredential> {
    const c = this.exec;
    if (c && (c.expiresAt === undefined || c.expiresAt - EXEC_EXPIRY_MARGIN_MS > this.o.clock.now())) return c;
    this.execRun ??= (this.o.runPlugin ?? runExecPlugin)(this.cfg.exec!, {
      server: this.cfg.server,
      ...(this.cfg.tls.ca ? { ca: this.cfg.tls.ca } : {}),
      insecureSkipVerify: this.cfg.tls.insecureSkipVerify,
      ...(this.cfg.tls.serverName ? { serverName: this.cfg.tls.serverName } : {}),
    }).finally(() => {
      this.execRun = undefined;
    });
    this.exec = await this.execRun;
    return this.exec;
  }
}
