// Upstream's service health server sockets (service_health.go): one HTTP
// listener set per healthCheckNodePort, bound on each selected node IP or on
// each family's wildcard, one socket per address and family. A port that cannot be opened is logged and counted (and
// reported through onListenFailed, for the FailedToStartServiceHealthcheck
// event), never fatal; it is retried on the next syncServices. The decisions
// live in engine/servicehealth.ts.

import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { planServices, ServiceEndpointCounts, serviceHealthResponse } from '../engine/servicehealth.js';
import { ProxyError } from '../core/errors.js';
import type { Logger } from './logger.js';

export interface ServiceHealthServerOptions {
  /**
   * Addresses to bind, one socket each (engine healthCheckListenAddresses):
   * IPs, "0.0.0.0", or "::" (bound IPv6-only, so each family has its own socket).
   */
  readonly listenAddresses: readonly string[];
  /** Proxy health without the node (ProxyHealthState.isHealthy). */
  readonly isProxyHealthy: () => boolean;
  readonly log?: Logger;
  /** Counted listen failures (ProxyMetrics.serviceHealthcheckListenFailed). */
  readonly onListenFailed?: (svcKey: string, port: number, err: Error) => void;
}

interface Instance {
  readonly port: number;
  readonly servers: Server[];
}

export class ServiceHealthServer {
  private readonly instances = new Map<string, Instance>();
  private readonly counts = new ServiceEndpointCounts();
  /** syncServices calls run one after another. */
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly opts: ServiceHealthServerOptions) {}

  /** Open/close listeners so exactly the wanted svcKey -> healthCheckNodePort map is served. */
  syncServices(wanted: ReadonlyMap<string, number>): Promise<void> {
    const snapshot = new Map(wanted);
    this.chain = this.chain.then(() => this.doSync(snapshot));
    return this.chain;
  }

  /** svcKey -> number of local ready endpoints. */
  syncEndpoints(counts: ReadonlyMap<string, number>): void {
    this.counts.sync(counts);
  }

  /** svcKey -> port of the listeners currently open. */
  open(): Map<string, number> {
    return new Map([...this.instances].map(([k, v]) => [k, v.port]));
  }

  async close(): Promise<void> {
    await this.syncServices(new Map());
  }

  private async doSync(wanted: ReadonlyMap<string, number>): Promise<void> {
    const plan = planServices(this.open(), wanted);
    for (const key of plan.close) {
      const inst = this.instances.get(key);
      this.instances.delete(key);
      this.counts.closed(key);
      this.opts.log?.debug({ service: key, port: inst?.port }, 'Closing healthcheck');
      if (inst) await closeAll(inst.servers);
    }
    for (const [key, port] of plan.open) {
      this.opts.log?.debug({ service: key, port }, 'Opening healthcheck');
      try {
        const servers = await this.listenAll(key, port);
        this.instances.set(key, { port, servers });
        this.counts.opened(key);
      } catch (e) {
        const err = e instanceof Error ? e : new ProxyError('KPT_EXEC_FAILED', String(e), { cause: e });
        this.opts.log?.error({ err, service: key, port }, 'Failed to start healthcheck');
        try {
          this.opts.onListenFailed?.(key, port, err);
        } catch {
          // reporting must not stop the other services
        }
      }
    }
  }

  /** Listen on every node IP; on any failure close what was opened and throw. */
  private async listenAll(key: string, port: number): Promise<Server[]> {
    const hosts = this.opts.listenAddresses;
    const servers: Server[] = [];
    try {
      for (const host of hosts) {
        const srv = createServer((_req, res) => {
          const n = this.counts.get(key);
          if (n === undefined) {
            res.end();
            return;
          } // closed meanwhile; upstream writes nothing
          const r = serviceHealthResponse(key, n, this.opts.isProxyHealthy());
          res.writeHead(r.status, { ...r.headers });
          res.end(r.body);
        });
        servers.push(srv);
        srv.listen({ port, host, ipv6Only: host.includes(':') });
        await once(srv, 'listening'); // rejects on 'error' (EADDRINUSE, EADDRNOTAVAIL...)
        srv.on('error', (err) => this.opts.log?.error({ err, service: key, port }, 'Healthcheck server error'));
      }
      return servers;
    } catch (e) {
      await closeAll(servers);
      throw e;
    }
  }
}

async function closeAll(servers: Server[]): Promise<void> {
  await Promise.all(
    servers.map(
      (s) =>
        new Promise<void>((resolve) => {
          if (!s.listening) {
            resolve();
            return;
          }
          s.closeAllConnections();
          s.close(() => resolve());
        }),
    ),
  );
}
