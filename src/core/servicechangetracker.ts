// Upstream servicechangetracker.go: Service handlers record previous/current
// ServicePorts per Service; the sync checks the changes out and applies them
// to its ServicePortMap (applyServiceChanges). A change that returns a Service
// to what it was before the pending change cancels out.

import type { Service } from './api.js';
import type { SkipReporter } from './serviceport.js';
import { noSkipReporter, objectKey, serviceToServicePorts } from './serviceport.js';
import type { IPFamily, ServicePort } from './types.js';

/** ServicePorts keyed by ServicePort.key. */
export type ServicePortMap = Map<string, ServicePort>;

export interface ServiceChange {
  readonly previous: ReadonlyMap<string, ServicePort>;
  readonly current: ReadonlyMap<string, ServicePort>;
}

/** Upstream UpdateServiceMapResult. */
export interface UpdateServiceMapResult {
  /** Service keys (namespacedName) whose ports changed. */
  readonly updatedServices: Set<string>;
  /**
   * UDP service ports that went away (Service deleted or port removed), keyed
   * by ServicePort.key: every conntrack entry to their frontends is stale
   * (upstream DeletedServices, kubernetes #141371).
   */
  readonly deletedUDPServicePorts: Map<string, ServicePort>;
}

function portsEqual(a: ReadonlyMap<string, ServicePort>, b: ReadonlyMap<string, ServicePort>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, sp] of a) {
    const o = b.get(k);
    // ServicePorts are plain data built in one field order, so JSON is a faithful deep-equal.
    if (!o || JSON.stringify(o) !== JSON.stringify(sp)) return false;
  }
  return true;
}

export class ServiceChangeTracker {
  private items = new Map<string, ServiceChange>();

  constructor(
    readonly family: IPFamily,
    private readonly onSkip: SkipReporter = noSkipReporter,
    /** This proxy's service-proxy-name ("" = upstream: ignore labelled Services). */
    private readonly proxyName = '',
    /** Feature gate AllowServiceExternalIPs. */
    private readonly allowExternalIPs = true,
  ) {}

  /**
   * Record an add (prev null), update, or delete (cur null). Returns whether
   * any change is pending afterwards (upstream semantics: the caller syncs
   * when true). Garbage objects are reported and ignored.
   */
  update(prev: Service | null, cur: Service | null): boolean {
    const key = (cur ? objectKey(cur) : null) ?? (prev ? objectKey(prev) : null);
    if (key === null) {
      if (prev || cur) this.onSkip('', 'service without valid metadata.namespace/name');
      return this.items.size > 0;
    }
    const existing = this.items.get(key);
    const previous = existing ? existing.previous : this.portsOf(prev, noSkipReporter);
    const current = this.portsOf(cur, this.onSkip);
    if (portsEqual(previous, current)) this.items.delete(key);
    else this.items.set(key, { previous, current });
    return this.items.size > 0;
  }

  /** Services with a pending change (upstream ServiceChangesPending). */
  pendingCount(): number {
    return this.items.size;
  }

  /** Take every pending change. */
  checkout(): Map<string, ServiceChange> {
    const out = this.items;
    this.items = new Map();
    return out;
  }

  /**
   * Skips are reported only for the current object, so a bad object is
   * counted once, on arrival (its later "previous" role is silent).
   */
  private portsOf(svc: Service | null, onSkip: SkipReporter): Map<string, ServicePort> {
    return svc ? serviceToServicePorts(svc, this.family, onSkip, this.proxyName, this.allowExternalIPs) : new Map();
  }
}

/** Service key -> the keys of its ports in a ServicePortMap. */
export type PortKeysByService = Map<string, ReadonlySet<string>>;

/**
 * Apply checked-out changes to `map` (upstream ServicePortMap.Update): the
 * current ports of a Service replace its previous ones. `index`, when given,
 * follows the map (so a partial sync finds a Service's ports without a walk).
 */
export function applyServiceChanges(
  map: ServicePortMap,
  changes: ReadonlyMap<string, ServiceChange>,
  index?: PortKeysByService,
): UpdateServiceMapResult {
  const updatedServices = new Set<string>();
  const deletedUDPServicePorts = new Map<string, ServicePort>();
  for (const [serviceKey, change] of changes) {
    updatedServices.add(serviceKey);
    if (change.current.size > 0) index?.set(serviceKey, new Set(change.current.keys()));
    else index?.delete(serviceKey);
    for (const [k, sp] of change.current) map.set(k, sp);
    for (const [k, sp] of change.previous) {
      if (change.current.has(k)) continue;
      map.delete(k);
      if (sp.protocol === 'UDP') deletedUDPServicePorts.set(k, sp);
    }
  }
  return { updatedServices, deletedUDPServicePorts };
}
