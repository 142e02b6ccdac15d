// The pure half of upstream's service health server
// (pkg/proxy/healthcheck/service_health.go): which healthCheckNodePorts to
// open or close, the local endpoint counts, and the exact response for a
// request. platform/servicehealth.ts owns the sockets.
//
// Contract (upstream):
//  - syncServices: a service whose port changed or that disappeared is closed;
//    a service not currently open is opened (so one that failed to open is
//    retried on the next sync).
//  - syncEndpoints: counts for open services; open services missing from the
//    map drop to 0. Counts are LOCAL READY endpoints (terminating not counted).
//  - Response: 200 iff count > 0 and the proxy is healthy (/livez), else 503;
//    headers Content-Type application/json, X-Content-Type-Options nosniff,
//    X-Load-Balancing-Endpoint-Weight <count>; body tab-indented JSON as
//    upstream's dedented template.

import { cidrContains, parseCIDR, parseIP } from '../core/ip.js';
import type { IPFamily } from '../core/types.js';
import type { HealthResponse } from './health.js';

export interface HealthCheckPlan {
  /** Service keys whose listeners must close. */
  readonly close: readonly string[];
  /** Service keys to open, with their port. */
  readonly open: ReadonlyArray<readonly [string, number]>;
}

/** Diff the open listeners against the wanted svcKey -> healthCheckNodePort map. */
export function planServices(open: ReadonlyMap<string, number>, wanted: ReadonlyMap<string, number>): HealthCheckPlan {
  const close: string[] = [];
  const toOpen: Array<[string, number]> = [];
  for (const [key, port] of open) {
    if (wanted.get(key) !== port) close.push(key);
  }
  for (const [key, port] of wanted) {
    if (!Number.isInteger(port) || port <= 0 || port > 65535) continue;
    if (open.get(key) === port) continue;
    toOpen.push([key, port]);
  }
  close.sort();
  toOpen.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return { close, open: toOpen };
}

/**
 * Which local IPs the listeners bind (upstream nodePortAddresses.GetNodeIPs):
 * null CIDRs (match all) -> null, meaning "every address". A CIDR list that
 * matches no local IP also falls back to every address, as upstream does when
 * GetNodeIPs fails.
 */
export function selectNodeIPs(cidrs: readonly string[] | null, localIPs: readonly string[]): string[] | null {
  if (cidrs === null) return null;
  const parsed = cidrs.map((c) => parseCIDR(c)).filter((c) => c !== null);
  const out: string[] = [];
  for (const ip of localIPs) {
    const p = parseIP(ip);
    if (p && parsed.some((c) => cidrContains(c, p))) out.push(ip);
  }
  return out.length > 0 ? out : null;
}

/**
 * The addresses the health-check listeners bind, one set per IP family
 * (kubernetes #137370): each family's own nodePortAddresses selection, or
 * that family's wildcard ("0.0.0.0" / "::", the latter bound IPv6-only) when
 * it selects every address. Two families never share a socket, so neither
 * can take the other's port, and a family's CIDRs never hide the other's.
 */
export function healthCheckListenAddresses(
  families: ReadonlyArray<{
    readonly family: IPFamily;
    readonly nodePortAddresses: readonly string[] | null;
    readonly localIPs: readonly string[];
  }>,
): string[] {
  return families.flatMap(
    (f) => selectNodeIPs(f.nodePortAddresses, f.localIPs) ?? [f.family === 'IPv4' ? '0.0.0.0' : '::'],
  );
}

/** The per-service health check answer, exactly as upstream formats it. */
export function serviceHealthResponse(svcKey: string, localEndpoints: number, proxyHealthy: boolean): HealthResponse {
  const slash = svcKey.indexOf('/');
  const namespace = slash >= 0 ? svcKey.slice(0, slash) : '';
  const name = slash >= 0 ? svcKey.slice(slash + 1) : svcKey;
  const body = [
    '{',
    '\t"service": {',
    `\t\t"namespace": ${JSON.stringify(namespace)},`,
    `\t\t"name": ${JSON.stringify(name)}`,
    '\t},',
    `\t"localEndpoints": ${localEndpoints},`,
    `\t"serviceProxyHealthy": ${proxyHealthy}`,
    '}',
  ].join('\n');
  return {
    status: localEndpoints > 0 && proxyHealthy ? 200 : 503,
    headers: {
      'Content-Type': 'application/json',
      'X-Content-Type-Options': 'nosniff',
      'X-Load-Balancing-Endpoint-Weight': String(localEndpoints),
    },
    body,
  };
}

/** Local endpoint counts of the open health checks (upstream hcInstance.endpoints). */
export class ServiceEndpointCounts {
  private readonly counts = new Map<string, number>();
  /** The last map given to sync(), so a service opened later starts with its count. */
  private last: ReadonlyMap<string, number> = new Map();

  /** Track a newly opened service, with its count from the last sync() (else 0). */
  opened(svcKey: string): void {
    if (!this.counts.has(svcKey)) this.counts.set(svcKey, validCount(this.last.get(svcKey)));
  }

  closed(svcKey: string): void {
    this.counts.delete(svcKey);
  }

  /** Upstream SyncEndpoints: set known services' counts, zero the rest; unknown keys are ignored. */
  sync(counts: ReadonlyMap<string, number>): void {
    this.last = new Map(counts);
    for (const key of this.counts.keys()) this.counts.set(key, validCount(counts.get(key)));
  }

  /** undefined when the service has no open health check. */
  get(svcKey: string): number | undefined {
    return this.counts.get(svcKey);
  }
}

function validCount(n: number | undefined): number {
  return n !== undefined && Number.isInteger(n) && n > 0 ? n : 0;
}
