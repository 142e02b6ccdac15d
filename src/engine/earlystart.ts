// Programming Services while the first lists are still coming in. In a large
// cluster the lists alone take seconds (about 14 s for 100k Services and
// their EndpointSlices), and upstream programs nothing until both are in,
// then everything in one sync (kubernetes #139328). Here, on a node whose
// datapath holds nothing of an earlier run, the engine syncs what it has seen
// so far ("early syncs"), so the first Services answer within a second or
// two of the start.
//
// Why only on an empty datapath: after a restart the kernel still serves the
// last run's rules, which are nearly right; an early sync there would have
// to leave alone everything it has not seen yet, and gains little. On an
// empty datapath each early sync only adds to what the last one wrote (the
// first lists only ever add objects), so nothing of an earlier run is kept
// or removed by mistake.
//
// Rules:
//  - Early syncs begin once the lists have been coming in for `afterMs`: in a
//    small cluster they are in at once and nothing changes.
//  - A Service waits here ("parked") until the first EndpointSlice for it
//    arrives. An early sync of a Service with no endpoints yet would reject
//    connections (upstream's REJECT for Services without endpoints) to a
//    Service whose endpoints are merely still on their way; unprogrammed,
//    a client's SYN is only retried. Whatever is still parked when both
//    lists are in joins then (a Service that really has no endpoints).
//  - Health, sync metrics, conntrack cleanup and the start-up cleanup of
//    other modes wait for the first sync after the lists (proxier.ts).
//
// No timers and no sockets: the proxier asks it and feeds it.

import type { Service } from '../core/api.js';
import { endpointSliceKeys } from '../core/endpointslicecache.js';
import { namespacedName } from '../core/types.js';

export interface EarlyStartOptions {
  /** Monotonic ms the proxier started at. */
  readonly startedAt: number;
  /** How long the lists must have been coming in before the first early sync (ms). */
  readonly afterMs: number;
}

/** What the trackers are to see of a Service change: as given, or nothing yet. */
export type ServicePass = { prev: Service | null; cur: Service | null } | null;

export class EarlyStart {
  /** Whether every datapath started empty: unknown until they answered. */
  private empty: boolean | null = null;
  private over = false;
  private readonly parked = new Map<string, Service>();
  /** Services the trackers have seen (passed through or released). */
  private readonly passed = new Set<string>();
  /** Services with at least one EndpointSlice seen. */
  private readonly sliced = new Set<string>();

  constructor(private readonly opts: EarlyStartOptions) {}

  /** Still holding Services back (until the lists are in, or the datapaths turned out not empty). */
  active(): boolean {
    return !this.over;
  }

  /** Early syncs may run now. */
  ready(now: number): boolean {
    return !this.over && this.empty === true && now - this.opts.startedAt >= this.opts.afterMs;
  }

  parkedCount(): number {
    return this.parked.size;
  }

  /**
   * The datapaths' answer. Not empty: no early syncs; returns every parked
   * Service for the trackers now (the lists' pace then decides nothing).
   */
  datapathsEmpty(empty: boolean): Service[] {
    if (this.over) return [];
    this.empty = empty;
    return empty ? [] : this.finish();
  }

  /** A Service change while active: what the trackers get now. */
  service(prev: Service | null, cur: Service | null): ServicePass {
    const key = keyOf(cur ?? prev);
    if (key === null || this.passed.has(key)) {
      if (key !== null && cur === null) this.passed.delete(key);
      return { prev, cur };
    }
    if (cur === null) {
      this.parked.delete(key);
      return null;
    }
    if (this.sliced.has(key)) {
      this.parked.delete(key);
      this.passed.add(key);
      return { prev: null, cur };
    }
    this.parked.set(key, cur);
    return null;
  }

  /** An EndpointSlice arrived: the Service it names, if it was parked, goes to the trackers now. */
  slice(slice: unknown): Service | null {
    const keys = endpointSliceKeys(slice);
    if (!keys) return null;
    this.sliced.add(keys.serviceKey);
    const svc = this.parked.get(keys.serviceKey);
    if (!svc) return null;
    this.parked.delete(keys.serviceKey);
    this.passed.add(keys.serviceKey);
    return svc;
  }

  /** Both lists are in: nothing is held back from now on; returns what was parked. */
  finish(): Service[] {
    this.over = true;
    const out = [...this.parked.values()];
    this.parked.clear();
    this.passed.clear();
    this.sliced.clear();
    return out;
  }
}

function keyOf(svc: Service | null): string | null {
  const md = svc?.metadata;
  if (!md || typeof md.namespace !== 'string' || typeof md.name !== 'string') return null;
  return namespacedName(md.namespace, md.name);
}
