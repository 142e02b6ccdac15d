// Per-IP-family bookkeeping of the Proxier: the change trackers, the applied
// service-port and endpoints maps, the full-sync state, and the changes that
// were checked out for a sync that has not succeeded yet.

import type { MutableEndpointsMap } from '../core/endpointschangetracker.js';
import { applyEndpointsChanges, EndpointsChangeTracker } from '../core/endpointschangetracker.js';
import type { ExtraPort } from '../core/livesnapshot.js';
import { LiveSnapshot } from '../core/livesnapshot.js';
import type { PortKeysByService, ServicePortMap } from '../core/servicechangetracker.js';
import { applyServiceChanges, ServiceChangeTracker } from '../core/servicechangetracker.js';
import type { SkipReporter } from '../core/serviceport.js';
import type { Dataplane, Drift, IPFamily, NodeInfo, ServicePort, SyncState } from '../core/types.js';
import { finish, type Steps } from '../core/steps.js';

/** Everything checked out since the last successful sync of the family. */
export interface FamilyChanges {
  readonly updatedServices: Set<string>;
  /** UDP service ports gone since the last successful sync (their conntrack entries are stale). */
  readonly deletedUDPServicePorts: Map<string, ServicePort>;
  readonly lastChangeTriggerTimes: Map<string, number[]>;
  readonly conntrackCleanupRequired: boolean;
}

const NO_EXTRA: ReadonlyMap<string, ExtraPort> = new Map();

export class FamilyState {
  readonly family: IPFamily;
  readonly services: ServiceChangeTracker;
  readonly endpointsTracker: EndpointsChangeTracker;
  readonly servicePorts: ServicePortMap = new Map();
  /** The keys in servicePorts of each Service's ports. */
  readonly portKeys: PortKeysByService = new Map();
  readonly endpoints: MutableEndpointsMap = new Map();
  /** Starts true: the first sync is full. */
  needFullSync = true;
  /** Monotonic ms of the start of the last successful full sync. */
  lastFullSyncAt = Number.NEGATIVE_INFINITY;
  lastState: SyncState | null = null;
  /** The SyncState kept from sync to sync (src/core/livesnapshot.ts): lastState's maps are its maps. */
  readonly snapshot: LiveSnapshot;
  /** Changes of failed syncs, merged into the next checkout. */
  private carried: FamilyChanges | null = null;
  /** Drift reported and not yet repaired: its first report and when it came (monotonic ms). */
  private drift: { readonly first: Drift; readonly since: number } | null = null;
  /** Reports of drift so far: a sync that started before the latest report has not repaired it. */
  private driftSeq = 0;

  constructor(
    readonly dataplane: Dataplane,
    nodeName: string,
    startTime: number,
    onServiceSkip: SkipReporter,
    onSliceSkip: SkipReporter,
    serviceProxyName = '',
    allowExternalIPs = true,
  ) {
    this.family = dataplane.family;
    this.snapshot = new LiveSnapshot(this.family);
    this.services = new ServiceChangeTracker(this.family, onServiceSkip, serviceProxyName, allowExternalIPs);
    this.endpointsTracker = new EndpointsChangeTracker(nodeName, this.family, startTime, onSliceSkip);
  }

  /** Apply pending tracker changes to the maps; returns them merged with carried ones. */
  checkout(): FamilyChanges {
    return finish(this.checkoutSteps());
  }

  /**
   * checkout as steps: everything pending is taken in the first step (what
   * the informers deliver between steps waits for the next sync), the
   * endpoint maps of a large checkout are built over several.
   */
  *checkoutSteps(): Steps<FamilyChanges> {
    const s = applyServiceChanges(this.servicePorts, this.services.checkout(), this.portKeys);
    const e = applyEndpointsChanges(this.endpoints, yield* this.endpointsTracker.checkoutSteps());
    const c = this.carried;
    this.carried = null;
    const updatedServices = new Set([...(c?.updatedServices ?? []), ...s.updatedServices, ...e.updatedServices]);
    const deletedUDPServicePorts = new Map([...(c?.deletedUDPServicePorts ?? []), ...s.deletedUDPServicePorts]);
    const lastChangeTriggerTimes = new Map<string, number[]>();
    for (const src of [c?.lastChangeTriggerTimes, e.lastChangeTriggerTimes]) {
      for (const [k, v] of src ?? []) lastChangeTriggerTimes.set(k, [...(lastChangeTriggerTimes.get(k) ?? []), ...v]);
    }
    return {
      updatedServices,
      deletedUDPServicePorts,
      lastChangeTriggerTimes,
      conntrackCleanupRequired:
        (c?.conntrackCleanupRequired ?? false) || e.conntrackCleanupRequired || deletedUDPServicePorts.size > 0,
    };
  }

  /**
   * The next SyncState from the maps as they are, as steps: the snapshot
   * changes only the ports of `changedServices` (and of extra ports that
   * changed) unless the sync is full.
   */
  stateSteps(o: {
    readonly node: NodeInfo;
    readonly fullSync: boolean;
    readonly changedServices: ReadonlySet<string>;
    readonly serviceCIDRs: readonly string[];
    /** Ports beside the maps (the canary), by key. */
    readonly extra?: ReadonlyMap<string, ExtraPort>;
    /** An early sync: the state only grows (SnapshotUpdate.growing). */
    readonly growing?: boolean;
  }): Steps<SyncState> {
    return this.snapshot.updateSteps({
      ...o,
      services: this.servicePorts,
      endpoints: this.endpoints,
      portKeysOf: (svc) => this.portKeys.get(svc),
      extra: o.extra ?? NO_EXTRA,
    });
  }

  /** The datapath reported drift at `now`: the next sync is full, and it is timed from the first report. */
  drifted(drift: Drift, now: number): void {
    this.driftSeq++;
    this.drift ??= { first: drift, since: now };
    this.needFullSync = true;
  }

  /** A mark to hand to repaired() after the sync that starts now. */
  driftMark(): number {
    return this.driftSeq;
  }

  /**
   * After a successful sync that started at `mark`: the drift it repaired and
   * how long that took, or null. A report that came during the sync is not
   * repaired by it (the datapath may have read the kernel before the change):
   * the next sync stays full.
   */
  repaired(mark: number, full: boolean, now: number): { drift: Drift; ms: number } | null {
    if (this.driftSeq !== mark) {
      this.needFullSync = true;
      return null;
    }
    if (!full || this.drift === null) return null;
    const out = { drift: this.drift.first, ms: now - this.drift.since };
    this.drift = null;
    return out;
  }

  failed(changes: FamilyChanges): void {
    this.carried = changes;
    this.needFullSync = true;
  }

  /** fullSyncStartedAt: monotonic start of this sync when it was full, else null. */
  succeeded(state: SyncState, fullSyncStartedAt: number | null): void {
    this.lastState = state;
    if (fullSyncStartedAt !== null) {
      this.lastFullSyncAt = fullSyncStartedAt;
      this.needFullSync = false;
    }
  }
}
