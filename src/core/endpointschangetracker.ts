// Upstream endpointschangetracker.go: EndpointSlice handlers record slices in
// the EndpointSliceCache; the sync checks out previous/current endpoints per
// Service and applies them to its EndpointsMap (applyEndpointsChanges).
// Also collects the endpoints.kubernetes.io/last-change-trigger-time of each
// changed slice for the network-programming-latency metric.

import type { EndpointSlice } from './api.js';
import { ANNOTATION_LAST_CHANGE_TRIGGER_TIME } from './api.js';
import type { EndpointsChange, PortEndpoints } from './endpointslicecache.js';
import { EndpointSliceCache, endpointSliceKeys } from './endpointslicecache.js';
import type { SkipReporter } from './serviceport.js';
import { noSkipReporter } from './serviceport.js';
import type { IPFamily } from './types.js';
import { finish, type Steps } from './steps.js';

/** Endpoints keyed by endpointsKey(ServicePortName). */
export type MutableEndpointsMap = Map<string, PortEndpoints>;

export interface EndpointsCheckout {
  readonly changes: ReadonlyMap<string, EndpointsChange>;
  /** Per Service key, trigger times (epoch ms) of the changes checked out. */
  readonly lastChangeTriggerTimes: ReadonlyMap<string, readonly number[]>;
}

/** Upstream UpdateEndpointsMapResult. */
export interface UpdateEndpointsMapResult {
  readonly updatedServices: Set<string>;
  readonly lastChangeTriggerTimes: Map<string, number[]>;
  /** Some changed Service has a UDP port before or after the change. */
  readonly conntrackCleanupRequired: boolean;
}

/** Epoch ms of the annotation, or null when absent/unparseable. */
export function lastChangeTriggerTime(slice: EndpointSlice): number | null {
  const ann = slice.metadata?.annotations;
  const v = ann && typeof ann === 'object' ? ann[ANNOTATION_LAST_CHANGE_TRIGGER_TIME] : undefined;
  if (typeof v !== 'string' || !/^\d{4}-\d\d-\d\dT/.test(v)) return null;
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : null;
}

export class EndpointsChangeTracker {
  private readonly cache: EndpointSliceCache;
  private triggerTimes = new Map<string, number[]>();

  /**
   * `startTime` (epoch ms): trigger times at or before it are ignored, since
   * they describe changes made before this proxy could have seen them.
   */
  constructor(
    nodeName: string,
    readonly family: IPFamily,
    private readonly startTime: number,
    onSkip: SkipReporter = noSkipReporter,
  ) {
    this.cache = new EndpointSliceCache(nodeName, family, onSkip);
  }

  /** Record a slice add/update (remove=false) or delete. Returns whether it changed anything. */
  endpointSliceUpdate(slice: EndpointSlice, remove: boolean): boolean {
    const changed = this.cache.updatePending(slice, remove);
    if (!changed) return false;
    const keys = endpointSliceKeys(slice)!; // updatePending returned true, so keys exist
    if (remove) {
      // A deletion's trigger time is that of its last update: not what we measure.
      this.triggerTimes.delete(keys.serviceKey);
    } else {
      const t = lastChangeTriggerTime(slice);
      if (t !== null && t > this.startTime) {
        const list = this.triggerTimes.get(keys.serviceKey) ?? [];
        list.push(t);
        this.triggerTimes.set(keys.serviceKey, list);
      }
    }
    return true;
  }

  /** Services with pending slice changes (upstream EndpointChangesPending). */
  pendingCount(): number {
    return this.cache.pendingCount();
  }

  checkout(): EndpointsCheckout {
    return finish(this.checkoutSteps());
  }

  /** checkout as steps (EndpointSliceCache.checkoutChangesSteps): what is pending is taken in the first. */
  *checkoutSteps(): Steps<EndpointsCheckout> {
    const lastChangeTriggerTimes = this.triggerTimes;
    this.triggerTimes = new Map();
    return { changes: yield* this.cache.checkoutChangesSteps(), lastChangeTriggerTimes };
  }
}

function hasUDPPort(m: ReadonlyMap<string, PortEndpoints>): boolean {
  for (const pe of m.values()) if (pe.name.protocol === 'UDP') return true;
  return false;
}

/** Apply a checkout to `map` (upstream EndpointsMap.Update). */
export function applyEndpointsChanges(map: MutableEndpointsMap, checkout: EndpointsCheckout): UpdateEndpointsMapResult {
  const updatedServices = new Set<string>();
  let conntrackCleanupRequired = false;
  for (const [serviceKey, change] of checkout.changes) {
    updatedServices.add(serviceKey);
    for (const k of change.previous.keys()) if (!change.current.has(k)) map.delete(k);
    for (const [k, pe] of change.current) map.set(k, pe);
    if (hasUDPPort(change.previous) || hasUDPPort(change.current)) conntrackCleanupRequired = true;
  }
  const lastChangeTriggerTimes = new Map<string, number[]>();
  for (const [k, v] of checkout.lastChangeTriggerTimes) lastChangeTriggerTimes.set(k, [...v]);
  return { updatedServices, lastChangeTriggerTimes, conntrackCleanupRequired };
}
