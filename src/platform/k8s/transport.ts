// The two API calls a reflector needs, behind a narrow interface so the
// reflector can be tested against a fake: list (one GET of a collection) and
// watch (a streaming GET of JSON lines). The real one uses the KubeConfig for
// TLS and credentials; watches go through @kubernetes/client-node's Watch, and
// lists through node:https with the same agent and headers (the library's
// typed list calls would turn the JSON into class instances with Date fields;
// handlers want the raw JSON the API server sent).

import { request as httpRequest } from 'node:http';
import { request as httpsRequest, type Agent } from 'node:https';
import { type KubeConfig, Watch } from '@kubernetes/client-node';

export type Query = Readonly<Record<string, string>>;

export interface ListResult {
  readonly resourceVersion: string;
  readonly items: readonly unknown[];
}

export interface ListWatchTransport {
  /** GET a collection. Rejects with ApiStatusError on a non-2xx answer. */
  list(path: string, query: Query, signal: AbortSignal): Promise<ListResult>;
  /**
   * Stream a watch. onOpen runs once the server accepted it; onEvent runs for
   * each event in order. Resolves when the stream ends (server timeout, closed
   * connection, or signal aborted); rejects on an HTTP error or stream error.
   */
  watch(
    path: string,
    query: Query,
    onOpen: () => void,
    onEvent: (type: string, object: unknown) => void,
    signal: AbortSignal,
  ): Promise<void>;
}

/** A non-2xx answer from the API server (or an ERROR watch event), with its Status. */
export class ApiStatusError extends Error {
  constructor(
    readonly statusCode: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiStatusError';
  }
}

export function statusCodeOf(err: unknown): number | undefined {
  if (err instanceof ApiStatusError) return err.statusCode;
  const code = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

/** Build an ApiStatusError from a metav1.Status body (or anything else the server sent). */
export function fromStatus(httpCode: number, body: unknown): ApiStatusError {
  const s = (body ?? {}) as { code?: unknown; reason?: unknown; message?: unknown };
  const code = typeof s.code === 'number' ? s.code : httpCode;
  return new ApiStatusError(
    code,
    typeof s.reason === 'string' ? s.reason : '',
    typeof s.message === 'string' ? s.message : `HTTP ${httpCode}`,
  );
}

const LIST_TIMEOUT_MS = 60_000;

export class KubeTransport implements ListWatchTransport {
  constructor(private readonly kc: KubeConfig) {}

  private url(path: string, query: Query): URL {
    const cluster = this.kc.getCurrentCluster();
    if (!cluster) throw new Error('no current cluster in kubeconfig');
    const url = new URL(cluster.server.replace(/\/$/, '') + path);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    return url;
  }

  async list(path: string, query: Query, signal: AbortSignal): Promise<ListResult> {
    const url = this.url(path, query);
    const opts = await this.kc.applyToFetchOptions({});
    const headers: Record<string, string> = { Accept: 'application/json' };
    (opts.headers as Headers | undefined)?.forEach((v, k) => {
      headers[k] = v;
    });
    const send = url.protocol === 'http:' ? httpRequest : httpsRequest;
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = send(
        url,
        { agent: opts.agent as Agent | undefined, headers, signal, timeout: LIST_TIMEOUT_MS },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`list ${path}: timed out`)));
      req.on('error', reject);
      req.end();
    });
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (status < 200 || status > 299) throw fromStatus(status, body);
    const b = body as { metadata?: { resourceVersion?: unknown }; items?: unknown } | undefined;
    if (!b || !Array.isArray(b.items))
      throw new ApiStatusError(status, 'BadResponse', `list ${path}: no items in reply`);
    const rv = b.metadata?.resourceVersion;
    return { resourceVersion: typeof rv === 'string' ? rv : '', items: b.items };
  }

  watch(
    path: string,
    query: Query,
    onOpen: () => void,
    onEvent: (type: string, object: unknown) => void,
    signal: AbortSignal,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      let finished = false;
      let controller: AbortController | undefined;
      const finish = (err: unknown): void => {
        if (finished) return;
        finished = true;
        signal.removeEventListener('abort', onAbort);
        controller?.abort();
        if (err) reject(err instanceof Error ? err : new Error(String(err)));
        else resolve();
      };
      const onAbort = (): void => finish(null);
      if (signal.aborted) return resolve();
      signal.addEventListener('abort', onAbort);
      const w = new Watch(this.kc);
      w.watch(
        path,
        { ...query },
        (type, obj) => {
          if (!finished) onEvent(type, obj);
        },
        (err) => finish(err),
      ).then((c) => {
        controller = c;
        if (finished) c.abort();
        else onOpen();
      }, finish);
    });
  }
}
