// A small REST client for the test API server, used the way kubectl would:
// HTTPS with the server's CA and the bearer token. apply() creates or
// replaces; setStatus() writes the status subresource (LoadBalancer ingress).
// The requests go through a Transport because the server is only reachable
// inside the cluster's namespaces: the harness passes an agent's https op.

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    resourceVersion?: string;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

const PATHS: Record<string, { prefix: string; plural: string; namespaced: boolean }> = {
  Service: { prefix: '/api/v1', plural: 'services', namespaced: true },
  EndpointSlice: { prefix: '/apis/discovery.k8s.io/v1', plural: 'endpointslices', namespaced: true },
  Node: { prefix: '/api/v1', plural: 'nodes', namespaced: false },
  ServiceCIDR: { prefix: '/apis/networking.k8s.io/v1', plural: 'servicecidrs', namespaced: false },
};

export class KubeError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'KubeError';
  }
}

export type Transport = (req: {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  ca: string;
  timeoutMs: number;
}) => Promise<{ ok: boolean; status?: number; body?: string; error?: string }>;

export class KubeClient {
  constructor(
    readonly url: string,
    private readonly token: string,
    private readonly ca: string,
    private readonly transport: Transport,
  ) {}

  private path(kind: string, namespace: string | undefined, name?: string, sub?: string): string {
    const p = PATHS[kind];
    if (!p) throw new Error(`unknown kind ${kind}`);
    const ns = p.namespaced ? `/namespaces/${namespace ?? 'default'}` : '';
    return `${p.prefix}${ns}/${p.plural}${name ? `/${name}` : ''}${sub ? `/${sub}` : ''}`;
  }

  async call(method: string, path: string, body?: unknown, timeoutMs = 5000): Promise<KubeObject> {
    const r = await this.transport({
      method,
      url: new URL(path, this.url).href,
      ca: this.ca,
      timeoutMs,
      headers: {
        authorization: `Bearer ${this.token}`,
        'content-type': 'application/json',
        accept: 'application/json',
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!r.ok) throw new KubeError(0, `${method} ${path}: ${r.error}`);
    const status = r.status ?? 0;
    if (status >= 200 && status < 300) return JSON.parse(r.body || '{}') as KubeObject;
    throw new KubeError(status, `${method} ${path}: ${status} ${(r.body ?? '').slice(0, 500)}`);
  }

  /** Create, or replace if it exists (no resourceVersion: last write wins, fine for tests). */
  async apply(obj: KubeObject): Promise<KubeObject> {
    const kind = obj.kind ?? '';
    try {
      return await this.call('POST', this.path(kind, obj.metadata.namespace), obj);
    } catch (err) {
      if (!(err instanceof KubeError) || err.status !== 409) throw err;
      const { resourceVersion: _rv, ...meta } = obj.metadata;
      return this.call('PUT', this.path(kind, obj.metadata.namespace, obj.metadata.name), { ...obj, metadata: meta });
    }
  }

  setStatus(obj: KubeObject, status: unknown): Promise<KubeObject> {
    const { resourceVersion: _rv, ...meta } = obj.metadata;
    return this.call('PUT', this.path(obj.kind ?? '', obj.metadata.namespace, obj.metadata.name, 'status'), {
      ...obj,
      metadata: meta,
      status,
    });
  }

  /** Delete; a missing object is not an error. */
  async remove(kind: string, name: string, namespace?: string): Promise<void> {
    try {
      await this.call('DELETE', this.path(kind, namespace, name));
    } catch (err) {
      if (!(err instanceof KubeError) || err.status !== 404) throw err;
    }
  }
}
