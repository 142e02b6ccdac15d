// Upstream ProxyHealthServer state (pkg/proxy/healthcheck/proxy_health.go),
// without the sockets: platform/healthz.ts serves what this computes.
//
// Contract:
//  - queuedUpdate(family) records the OLDEST unprocessed request per family;
//    updated(family) clears it and records the success time.
//  - A family is unhealthy iff it has synced at least once (has a lastUpdated)
//    AND a queued update has been pending for >= healthTimeout. Families that
//    never synced are healthy (start-up), as upstream iterates lastUpdatedMap,
//    UNLESS they are listed in options.families: then they are unhealthy
//    until their first sync (our deliberate, stricter start-up; see below).
//  - /livez = all families healthy; /healthz additionally requires
//    nodeEligible() (Node known, no deletionTimestamp, no
//    ToBeDeletedByClusterAutoscaler taint).
//  - A family whose datapath canary fails (datapathFailed, src/engine/canary.ts
//    decides when) is unhealthy in /healthz and isHealthy() (so the service
//    health-check node ports answer 503), but NOT in /livez: livez restarts
//    the proxy, and a restart cannot remove another actor's DROP rule, so it
//    would only add a restart loop to the outage. Our deliberate difference.
//  - Bodies are Go json.Marshal of ProxyHealth: field order lastUpdated,
//    currentTime, nodeEligible (healthz only), healthy, status (omitted when
//    empty; keys sorted); times are RFC3339Nano in UTC; the zero time is
//    "0001-01-01T00:00:00Z". On 200, lastUpdated is replaced by the current time.

import type { Node } from '../core/api.js';
import { TAINT_TO_BE_DELETED } from '../core/api.js';
import type { IPFamily } from '../core/types.js';
import type { Clock } from '../core/clock.js';
import { nullObserver, type ProxierObserver } from './observer.js';

export interface ProxierHealth {
  /** Epoch ms of the last successful sync of this family; null before the first. */
  readonly lastUpdated: number | null;
  readonly healthy: boolean;
}

export interface ProxyHealth {
  /** Epoch ms of the most recent success of any family; null = never (Go zero time). */
  readonly lastUpdated: number | null;
  readonly currentTime: number;
  readonly healthy: boolean;
  readonly status: ReadonlyMap<IPFamily, ProxierHealth>;
}

export interface HealthResponse {
  readonly status: 200 | 503;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export const HEALTH_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'application/json',
  'X-Content-Type-Options': 'nosniff',
};

/** Upstream: healthTimeout = 2 x syncPeriod. */
export function healthTimeoutFor(syncPeriodMs: number): number {
  return 2 * syncPeriodMs;
}

/** Upstream NodeEligible: the Node exists, is not being deleted and is not tainted for autoscaler deletion. */
export function isNodeEligible(node: Node | null | undefined): boolean {
  if (!node || typeof node !== 'object') return false;
  if (node.metadata?.deletionTimestamp) return false;
  const taints = node.spec?.taints;
  if (Array.isArray(taints) && taints.some((t) => t?.key === TAINT_TO_BE_DELETED)) return false;
  return true;
}

/**
 * Go's time.Time JSON form (RFC3339Nano) in UTC: fractional seconds without
 * trailing zeros, none at all when whole; null is the zero time.
 */
export function formatRFC3339Nano(ms: number | null): string {
  if (ms === null) return '0001-01-01T00:00:00Z';
  const iso = new Date(ms).toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
  const [whole, frac = ''] = iso.slice(0, -1).split('.');
  const trimmed = frac.replace(/0+$/, '');
  return trimmed === '' ? `${whole}Z` : `${whole}.${trimmed}Z`;
}

/**
 * Observer timestamps are epoch milliseconds (Clock.now()); values small
 * enough to be epoch seconds (before 1973 as ms) are taken as seconds, so a
 * caller passing SyncReport.finishedAt style seconds still works.
 */
export function toEpochMs(at: number): number {
  return at < 1e11 ? at * 1000 : at;
}

export interface ProxyHealthOptions {
  readonly clock: Clock;
  /** Milliseconds; use healthTimeoutFor(syncPeriod). */
  readonly healthTimeout: number;
  /** Node eligibility (e.g. the proxier's nodeEligible()); defaults to eligible. */
  readonly nodeEligible?: () => boolean;
  /**
   * Families that must have completed one sync before the proxy reports
   * healthy. Deliberately stricter than upstream (healthy during start-up): a
   * load balancer probing /healthz should not send traffic to a node whose
   * rules are not programmed yet.
   */
  readonly families?: readonly IPFamily[];
}

export class ProxyHealthState {
  private readonly lastUpdated = new Map<IPFamily, number>();
  private readonly oldestPendingQueued = new Map<IPFamily, number>();
  /** Families whose datapath canary fails, with why. */
  private readonly datapathBroken = new Map<IPFamily, string>();

  constructor(private readonly opts: ProxyHealthOptions) {}

  /** A change for this family was recorded and awaits a sync (keeps the oldest). */
  queuedUpdate(family: IPFamily, at: number = this.opts.clock.now()): void {
    if (!this.oldestPendingQueued.has(family)) this.oldestPendingQueued.set(family, toEpochMs(at));
  }

  /** This family's rules now reflect the current state. */
  updated(family: IPFamily, at: number = this.opts.clock.now()): void {
    this.oldestPendingQueued.delete(family);
    this.lastUpdated.set(family, toEpochMs(at));
  }

  /** The family's canary says traffic does not get through what it programmed. */
  datapathFailed(family: IPFamily, reason: string): void {
    this.datapathBroken.set(family, reason);
  }

  datapathRecovered(family: IPFamily): void {
    this.datapathBroken.delete(family);
  }

  /** Families whose datapath canary fails, with why. */
  datapathFailures(): ReadonlyMap<IPFamily, string> {
    return this.datapathBroken;
  }

  /** Sync health; with datapath, a family whose canary fails is unhealthy too. */
  health(datapath = false): ProxyHealth {
    const now = this.opts.clock.now();
    const status = new Map<IPFamily, ProxierHealth>();
    let healthy = true;
    let last: number | null = null;
    for (const [family, lastUpdated] of this.lastUpdated) {
      if (last === null || lastUpdated > last) last = lastUpdated;
      const queued = this.oldestPendingQueued.get(family);
      const late = queued !== undefined && now - queued >= this.opts.healthTimeout;
      const bad = late || (datapath && this.datapathBroken.has(family));
      if (bad) healthy = false;
      status.set(family, { lastUpdated, healthy: !bad });
    }
    for (const family of this.opts.families ?? []) {
      if (this.lastUpdated.has(family)) continue;
      healthy = false;
      status.set(family, { lastUpdated: null, healthy: false });
    }
    return { lastUpdated: last, currentTime: now, healthy, status };
  }

  /** Proxy health ignoring the node (upstream IsHealthy; used by service health checks), with the canary. */
  isHealthy(): boolean {
    return this.health(true).healthy;
  }

  nodeEligible(): boolean {
    return this.opts.nodeEligible ? this.opts.nodeEligible() : true;
  }

  healthzResponse(): HealthResponse {
    const h = this.health(true);
    const eligible = this.nodeEligible();
    return respond(h, h.healthy && eligible, eligible);
  }

  livezResponse(): HealthResponse {
    const h = this.health();
    return respond(h, h.healthy, undefined);
  }
}

function respond(h: ProxyHealth, ok: boolean, nodeEligible: boolean | undefined): HealthResponse {
  const body: Record<string, unknown> = {
    lastUpdated: formatRFC3339Nano(ok ? h.currentTime : h.lastUpdated),
    currentTime: formatRFC3339Nano(h.currentTime),
  };
  if (nodeEligible !== undefined) body.nodeEligible = nodeEligible;
  body.healthy = h.healthy;
  if (h.status.size > 0) {
    const status: Record<string, unknown> = {};
    for (const family of [...h.status.keys()].sort()) {
      const s = h.status.get(family)!;
      status[family] = { lastUpdated: formatRFC3339Nano(s.lastUpdated), healthy: s.healthy };
    }
    body.status = status;
  }
  return { status: ok ? 200 : 503, headers: HEALTH_HEADERS, body: JSON.stringify(body) };
}

/**
 * The health side of a ProxierObserver: queuedUpdate -> QueuedUpdate,
 * syncSucceeded -> Updated. Compose it with the metrics/logging observers.
 */
export function healthObserver(state: ProxyHealthState): ProxierObserver {
  return {
    ...nullObserver,
    queuedUpdate: (family, at) => state.queuedUpdate(family, at),
    syncSucceeded: (report) => state.updated(report.family, report.finishedAt),
  };
}
