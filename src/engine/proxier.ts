// The one sync path every datapath mode plugs into (upstream style: handlers
// record, one function syncs). Handlers only feed change trackers and ask the
// runner for a sync; syncProxyRules (called by the bounded-frequency runner,
// never concurrently) checks the changes out per family, builds a SyncState,
// hands it to that family's Dataplane, and reports to the observer.
//
// Invariants:
// - Nothing is programmed until Services AND EndpointSlices reported Synced
//   (upstream isInitialized). The Node is not waited for here: upstream waits
//   for it in the composition root (NodeManager) before the proxier exists.
// - A family's sync is full on its first run, after any failure of it, after
//   a topology (node labels) change, after its datapath reported drift
//   (Dataplane.watchDrift), and when its last full sync is older than
//   fullSyncPeriodMs (default 1 h) by the clock, unless its Dataplane asks to
//   skip that periodic one (skipsPeriodicFullSync: iptables in large-cluster
//   mode, as upstream).
// - Drift is repaired by the first full sync that starts after its last
//   report and succeeds; that sync reports datapathRepaired once, timed from
//   the first report.
// - Changes checked out for a sync that failed are kept (updated services,
//   trigger times, conntrack cleanup) and reported with the next success.
// - The canary (deps.canary, src/core/canary.ts) joins every family's
//   SyncState like a user's service port, so every mode renders it the same
//   way; it never comes from the informers, so intake never sees it.

import type { EndpointSlice, Node, Service, ServiceCIDR } from '../core/api.js';
import type { ConntrackFlow } from '../core/conntrack.js';
import { staleFlowIndex, isStaleUDPFlow } from '../core/conntrack.js';
import { BugError, ProxyError } from '../core/errors.js';
import { endpointSliceKeys } from '../core/endpointslicecache.js';
import type { SkipReporter } from '../core/serviceport.js';
import type { CanaryTarget } from '../core/canary.js';
import type { ExtraPort } from '../core/livesnapshot.js';
import { cidrsOfServiceCIDRs } from '../core/snapshot.js';
import type { Dataplane, Drift, IPFamily, NodeInfo, ServicePort, SyncState } from '../core/types.js';
import { finish, type Steps } from '../core/steps.js';
import type { Clock } from '../core/clock.js';
import type { FamilyChanges } from './familystate.js';
import { FamilyState } from './familystate.js';
import type { EndpointSliceHandler, NodeHandler, ServiceCIDRHandler, ServiceHandler } from './handlers.js';
import { EarlyStart } from './earlystart.js';
import { NodeTracker } from './nodetracker.js';
import type { NodeAddresses } from './nodewatch.js';
import type { ProxierObserver } from './observer.js';

/**
 * Optional platform hook for stale UDP conntrack entries: list the family's
 * entries, delete those for which isStale returns true, resolve to the number
 * deleted. Called after a successful sync that needs it.
 */
export interface ConntrackHook {
  listAndDelete(family: IPFamily, isStale: (flow: ConntrackFlow) => boolean): Promise<number>;
}

export interface ProxierDeps {
  readonly nodeName: string;
  /** One per IP family (the first is the primary family). */
  readonly dataplanes: readonly Dataplane[];
  readonly clock: Clock;
  readonly observer: ProxierObserver;
  /** The runner's run(): coalesced request for syncProxyRules. */
  readonly requestSync: () => void;
  readonly conntrack?: ConntrackHook;
  /** Primary node IPs that win over the Node's addresses (e.g. --bind-address). */
  readonly nodeIPOverride?: Partial<Record<IPFamily, string>>;
  /** Default 3_600_000 (upstream FullSyncPeriod). */
  readonly fullSyncPeriodMs?: number;
  /** Serve only Services labelled service.kubernetes.io/service-proxy-name=<this>; "" = upstream. */
  readonly serviceProxyName?: string;
  /** Feature gate AllowServiceExternalIPs (default true): false = no externalIP rules in any mode. */
  readonly allowServiceExternalIPs?: boolean;
  /** The datapath canary of a family, or null for none (see src/core/canary.ts). */
  readonly canary?: (family: IPFamily) => CanaryTarget | null;
  /**
   * Runs a sync's long pieces of work (the checkout of a large change) as
   * resumable steps, giving the event loop turns between them (the platform's
   * runSliced). Default: all at once.
   */
  readonly runSteps?: <T>(steps: Steps<T>) => Promise<T>;
  /**
   * Early syncs (earlystart.ts): where every datapath started empty, program
   * the Services seen so far once the first lists have been coming in for
   * this long (ms). Default: off, nothing is programmed before the lists are in.
   */
  readonly earlySyncAfterMs?: number;
}

export const DEFAULT_FULL_SYNC_PERIOD_MS = 60 * 60 * 1000;

export class Proxier implements ServiceHandler, EndpointSliceHandler, NodeHandler, ServiceCIDRHandler {
  private readonly families: FamilyState[];
  private readonly node: NodeTracker;
  private servicesSynced = false;
  private endpointSlicesSynced = false;
  /** Set when both initial lists were in and the first sync was requested. */
  private initializedOnce = false;
  private serviceCIDRs: string[] = [];
  private syncing = false;
  /** Odd while a sync runs; bumped at each start and end (the canary prober discards probes that saw one). */
  private syncEpochCount = 0;
  private readonly reportedThisCall = new Set<string>();
  /** deps.runSteps, or all steps at once. */
  private readonly runSteps: <T>(steps: Steps<T>) => Promise<T>;
  /** Early syncs while the first lists come in (deps.earlySyncAfterMs), null when off. */
  private readonly early: EarlyStart | null;

  constructor(private readonly deps: ProxierDeps) {
    if (deps.dataplanes.length === 0) throw new BugError('Proxier needs at least one dataplane');
    this.runSteps = deps.runSteps ?? (async (steps) => finish(steps));
    if (new Set(deps.dataplanes.map((d) => d.family)).size !== deps.dataplanes.length) {
      throw new BugError('Proxier needs at most one dataplane per IP family');
    }
    const start = deps.clock.now();
    const skip =
      (kind: 'service' | 'endpointslice'): SkipReporter =>
      (key, reason) =>
        this.reportSkip(kind, key, reason);
    this.families = deps.dataplanes.map(
      (dp) =>
        new FamilyState(
          dp,
          deps.nodeName,
          start,
          skip('service'),
          skip('endpointslice'),
          deps.serviceProxyName ?? '',
          deps.allowServiceExternalIPs ?? true,
        ),
    );
    for (const f of this.families) f.dataplane.watchDrift?.((drift) => this.drifted(f, drift));
    this.node = new NodeTracker(deps.nodeName, deps.nodeIPOverride ?? {}, (key, reason) =>
      this.reportSkip('node', key, reason),
    );
    this.early =
      deps.earlySyncAfterMs === undefined
        ? null
        : new EarlyStart({ startedAt: deps.clock.monotonic(), afterMs: deps.earlySyncAfterMs });
    if (this.early) void this.askDatapathsEmpty(this.early);
  }

  /** Whether early syncs may happen: every datapath says it started empty. */
  private async askDatapathsEmpty(early: EarlyStart): Promise<void> {
    let empty = false;
    try {
      const answers = await Promise.all(this.families.map((f) => f.dataplane.startsEmpty?.() ?? false));
      empty = answers.every(Boolean);
    } catch (error) {
      this.deps.observer.event('warn', { err: String(error) }, 'could not tell whether the datapath is empty');
    }
    if (!early.active()) return;
    this.deps.observer.event('debug', { empty }, empty ? 'datapath empty: early syncs allowed' : 'datapath not empty');
    this.release(early.datapathsEmpty(empty));
  }

  /** Parked Services join the trackers (early syncs end, or their first slice came). */
  private release(services: readonly Service[]): void {
    if (services.length === 0) return;
    const touched = new Set<FamilyState>();
    for (const svc of services) {
      for (const f of this.guard('service', svc, () => this.families.filter((f) => f.services.update(null, svc))))
        touched.add(f);
      this.deps.observer.changeRecorded('service');
    }
    this.changed([...touched]);
  }

  // ---- ServiceHandler ----
  onServiceAdd(svc: Service): void {
    this.serviceChange(null, svc);
  }
  onServiceUpdate(oldSvc: Service, svc: Service): void {
    this.serviceChange(oldSvc, svc);
  }
  onServiceDelete(svc: Service): void {
    this.serviceChange(svc, null);
  }
  onServiceSynced(): void {
    this.servicesSynced = true;
    this.maybeInitialized();
  }

  // ---- EndpointSliceHandler ----
  onEndpointSliceAdd(slice: EndpointSlice): void {
    this.sliceChange(slice, false);
  }
  onEndpointSliceUpdate(oldSlice: EndpointSlice, slice: EndpointSlice): void {
    // A slice relabelled to another Service (or family) must leave the old one.
    const before = endpointSliceKeys(oldSlice);
    const after = endpointSliceKeys(slice);
    const moved =
      before !== null &&
      (after === null || before.serviceKey !== after.serviceKey || oldSlice.addressType !== slice?.addressType);
    if (moved) this.sliceChange(oldSlice, true);
    this.sliceChange(slice, false);
  }
  onEndpointSliceDelete(slice: EndpointSlice): void {
    this.sliceChange(slice, true);
  }
  onEndpointSliceSynced(): void {
    this.endpointSlicesSynced = true;
    this.maybeInitialized();
  }

  // ---- NodeHandler (only this proxy's own Node matters) ----
  onNodeAdd(node: Node): void {
    this.nodeChange(node, false);
  }
  onNodeUpdate(_oldNode: Node, node: Node): void {
    this.nodeChange(node, false);
  }
  onNodeDelete(node: Node): void {
    this.nodeChange(node, true);
  }
  onNodeSynced(): void {}

  // ---- ServiceCIDRHandler ----
  onServiceCIDRsChanged(cidrs: readonly ServiceCIDR[]): void {
    const next = cidrsOfServiceCIDRs(Array.isArray(cidrs) ? cidrs : []).sort();
    if (next.join(',') === this.serviceCIDRs.join(',')) return;
    this.serviceCIDRs = next;
    // Rare, and renderers may keep the CIDR rule in base setup that partial syncs skip.
    for (const f of this.families) f.needFullSync = true;
    this.changed(this.families);
  }

  /**
   * Someone else changed what the family's datapath wrote: repair it with a
   * full sync, as soon as the runner allows. Every mode's drift comes here,
   * and the repair is reported from one place (syncFamily).
   */
  private drifted(f: FamilyState, drift: Drift): void {
    this.deps.observer.driftDetected({ family: f.family, mode: f.dataplane.mode, ...drift });
    f.drifted(drift, this.deps.clock.monotonic());
    this.changed([f]);
  }

  /**
   * Queue a sync of every family (upstream Proxier.Sync): publishes
   * queuedUpdate and, once initialized, calls requestSync.
   */
  sync(): void {
    this.changed(this.families);
  }

  /**
   * Counts sync starts and ends: odd while one runs. A probe of the datapath
   * that saw it change overlapped a sync, and its result says nothing.
   */
  syncEpoch(): number {
    return this.syncEpochCount;
  }

  /** Both initial lists are in: syncs may program the datapaths. */
  isInitialized(): boolean {
    return this.servicesSynced && this.endpointSlicesSynced;
  }

  /** Health: true while the Node is known and not deleted, being deleted, or tainted for deletion. */
  nodeEligible(): boolean {
    return this.node.eligible();
  }

  /** What this proxy currently knows about its Node. */
  nodeInfo(): NodeInfo {
    return this.node.info();
  }

  podCIDRs(): readonly string[] {
    return this.node.info().podCIDRs;
  }

  /** The Node's own addresses (no override), null until it is seen: what NodeChangeWatch compares. */
  reportedNode(): NodeAddresses | null {
    return this.node.reported();
  }

  /** The last SyncState handed to (and accepted by) a family's datapath. */
  lastSyncState(family: IPFamily): SyncState | null {
    return this.families.find((f) => f.family === family)?.lastState ?? null;
  }

  /** Service key -> healthCheckNodePort, over every family's last successful state (service health server). */
  healthCheckNodePorts(): Map<string, number> {
    const out = new Map<string, number>();
    for (const f of this.families) {
      const st = f.lastState;
      if (!st) continue;
      for (const k of f.snapshot.healthCheckedPorts()) {
        const sp = st.services.get(k);
        if (sp) out.set(sp.serviceKey, sp.healthCheckNodePort);
      }
    }
    return out;
  }

  /**
   * Service key -> number of distinct local READY endpoint IPs (terminating
   * ones are not ready), over every family (service health server weight),
   * for the Services with a healthCheckNodePort: the server answers only for
   * them, and walking every endpoint after every sync is O(cluster).
   */
  localReadyEndpoints(): Map<string, number> {
    const ips = new Map<string, Set<string>>();
    for (const f of this.families) {
      const st = f.lastState;
      if (!st) continue;
      for (const k of f.snapshot.healthCheckedPorts()) {
        const sp = st.services.get(k);
        if (!sp) continue;
        const set = ips.get(sp.serviceKey) ?? new Set<string>();
        ips.set(sp.serviceKey, set);
        for (const ep of st.endpoints.get(k) ?? []) if (ep.isLocal && ep.ready) set.add(ep.ip);
      }
    }
    const out = new Map<string, number>();
    for (const [k, s] of ips) if (s.size > 0) out.set(k, s.size);
    return out;
  }

  /**
   * Sync every family. Rejects (ProxyError KPT_SYNC_FAILED, cause = the first
   * failure) when any datapath failed, after the other families were synced.
   */
  async syncProxyRules(): Promise<void> {
    const early = !this.isInitialized();
    if (early && !this.earlyDue()) {
      this.deps.observer.event('debug', {}, 'not syncing: services and endpointslices not yet synced');
      return;
    }
    if (this.syncing) throw new BugError('syncProxyRules called concurrently');
    this.syncing = true;
    this.syncEpochCount++;
    const failures: Array<{ family: IPFamily; error: unknown }> = [];
    try {
      for (const f of this.families) {
        const err = await this.syncFamily(f, early);
        if (err !== undefined) failures.push({ family: f.family, error: err });
      }
    } finally {
      this.syncing = false;
      this.syncEpochCount++;
      this.publishPending();
    }
    if (failures.length > 0) {
      const fams = failures.map((x) => x.family).join(',');
      throw new ProxyError('KPT_SYNC_FAILED', `sync failed for ${fams}`, { cause: failures[0]!.error });
    }
  }

  /**
   * One family; resolves to the error when its datapath failed. An early sync
   * (before the lists are in, earlystart.ts) programs and is remembered like
   * any other, but reports no sync to the observer: health, sync metrics and
   * what waits for the first sync wait for the first one after the lists.
   */
  private async syncFamily(f: FamilyState, early: boolean): Promise<unknown> {
    const { clock, observer } = this.deps;
    const t0 = clock.monotonic();
    const driftMark = f.driftMark();
    const changes = await this.runSteps(f.checkoutSteps());
    const periodic = t0 - f.lastFullSyncAt >= (this.deps.fullSyncPeriodMs ?? DEFAULT_FULL_SYNC_PERIOD_MS);
    const fullSync = f.needFullSync || (periodic && f.dataplane.skipsPeriodicFullSync?.() !== true);
    const canary = this.deps.canary?.(f.family) ?? null;
    const state = await this.runSteps(
      f.stateSteps({
        ...(canary ? { extra: new Map([[canary.servicePort.key, canaryPort(canary)]]) } : {}),
        node: this.node.info(),
        changedServices: changes.updatedServices,
        fullSync,
        serviceCIDRs: this.serviceCIDRs,
        growing: early,
      }),
    );
    let outcome;
    try {
      outcome = await f.dataplane.sync(state);
    } catch (error) {
      f.failed(changes);
      observer.syncFailed(f.family, error, (clock.monotonic() - t0) / 1000);
      return error ?? new ProxyError('KPT_SYNC_FAILED', 'datapath sync rejected');
    }
    f.succeeded(state, fullSync ? t0 : null);
    if (early) {
      observer.event(
        'info',
        {
          family: f.family,
          servicePorts: state.services.size,
          full: fullSync,
          seconds: (clock.monotonic() - t0) / 1000,
          parked: this.early?.parkedCount() ?? 0,
        },
        'Programmed the Services seen so far; the initial lists are still coming in',
      );
      return undefined;
    }
    const repair = f.repaired(driftMark, fullSync, clock.monotonic());
    if (repair)
      observer.datapathRepaired({
        family: f.family,
        mode: f.dataplane.mode,
        ...repair.drift,
        seconds: repair.ms / 1000,
        at: clock.now(),
      });
    observer.syncSucceeded({
      family: f.family,
      durationSeconds: (clock.monotonic() - t0) / 1000,
      partial: outcome.partial,
      finishedAt: clock.now() / 1000,
      ...(outcome.counters ? { counters: outcome.counters } : {}),
      noLocalEndpoints: f.snapshot.noLocalEndpoints(),
    });
    this.reportLatency(f.family, changes);
    if (changes.conntrackCleanupRequired) await this.cleanConntrack(state, changes.deletedUDPServicePorts.values());
    return undefined;
  }

  private reportLatency(family: IPFamily, changes: FamilyChanges): void {
    const now = this.deps.clock.now();
    for (const times of changes.lastChangeTriggerTimes.values()) {
      for (const t of times) this.deps.observer.networkProgrammingLatency(family, Math.max(0, (now - t) / 1000));
    }
  }

  /** Conntrack trouble is logged, never a sync failure (upstream logs it too). */
  private async cleanConntrack(state: SyncState, deleted: Iterable<ServicePort>): Promise<void> {
    const hook = this.deps.conntrack;
    if (!hook) return;
    const index = staleFlowIndex(state, deleted);
    if (index.byServiceIP.size === 0 && index.byNodePort.size === 0) return;
    try {
      const n = await hook.listAndDelete(state.family, (flow) => isStaleUDPFlow(index, flow));
      this.deps.observer.event('debug', { family: state.family, deleted: n }, 'stale UDP conntrack entries deleted');
    } catch (error) {
      this.deps.observer.event('warn', { family: state.family, err: String(error) }, 'conntrack cleanup failed');
    }
  }

  /**
   * Every family's intake reports what it finds bad (an IPv6-only Service is
   * only looked at closely by the IPv6 family); within one handler call the
   * same report is published once.
   */
  private reportSkip(kind: 'service' | 'endpointslice' | 'node', rawKey: string, rawReason: string): void {
    // Hostile objects carry fields of any size; a log line quotes at most a screenful of them.
    const key = clip(rawKey);
    const reason = clip(rawReason);
    const id = `${kind}\0${key}\0${reason}`;
    if (this.reportedThisCall.has(id)) return;
    this.reportedThisCall.add(id);
    this.deps.observer.inputSkipped(kind, key, reason);
  }

  private serviceChange(prev: Service | null, cur: Service | null): void {
    const pass = this.early?.active() ? this.early.service(prev, cur) : { prev, cur };
    if (!pass) return;
    const touched = this.guard('service', prev ?? cur, () =>
      this.families.filter((f) => f.services.update(pass.prev, pass.cur)),
    );
    this.deps.observer.changeRecorded('service');
    this.changed(touched);
  }

  private sliceChange(slice: EndpointSlice, remove: boolean): void {
    const touched = this.guard('endpointslice', slice, () =>
      this.families.filter((f) => f.endpointsTracker.endpointSliceUpdate(slice, remove)),
    );
    if (touched.length > 0) this.deps.observer.changeRecorded('endpoint');
    this.changed(touched);
    const parked = !remove && this.early?.active() ? this.early.slice(slice) : null;
    if (parked) this.release([parked]);
  }

  private nodeChange(node: Node, deleted: boolean): void {
    const r = this.guard('node', node, () => [this.node.update(node, deleted)])[0];
    if (!r) return;
    if (r.labelsChanged) {
      this.deps.observer.event('info', { node: this.deps.nodeName }, 'node topology labels changed; next sync is full');
      for (const f of this.families) f.needFullSync = true;
      this.changed(this.families);
    } else if (r.podCIDRsChanged || r.ipsChanged) {
      // Upstream restarts kube-proxy on these, and so do we: NodeChangeWatch (nodewatch.ts)
      // ends the process within a few seconds. Until then the next sync is full, so the
      // rules follow the new addresses at once.
      this.deps.observer.event('warn', { node: this.deps.nodeName }, 'node IPs or podCIDRs changed; next sync is full');
      for (const f of this.families) f.needFullSync = true;
      this.changed(this.families);
    }
  }

  /** Intake never throws by design; this keeps a bug from killing the informer loop. */
  private guard<T>(kind: 'service' | 'endpointslice' | 'node', obj: unknown, fn: () => T[]): T[] {
    this.reportedThisCall.clear();
    try {
      return fn();
    } catch (error) {
      const md = (obj as { metadata?: { namespace?: unknown; name?: unknown } } | null)?.metadata;
      this.reportSkip(
        kind,
        `${String(md?.namespace ?? '')}/${String(md?.name ?? '')}`,
        `intake error: ${String(error)}`,
      );
      return [];
    }
  }

  /**
   * After a handler recorded something for `touched` families: queuedUpdate
   * for each of them (always; the health state ignores families that never
   * synced), and a sync request once initialized.
   */
  private changed(touched: readonly FamilyState[]): void {
    this.publishPending();
    if (touched.length === 0) return;
    const now = this.deps.clock.now();
    for (const f of touched) this.deps.observer.queuedUpdate(f.family, now);
    if (this.isInitialized() || this.earlyDue()) this.deps.requestSync();
  }

  /**
   * An early sync is allowed (earlystart.ts) and worth it: the first one, or
   * one for at least a quarter as many changed Services as are programmed.
   * Every sync of a large table costs something in proportion to the table
   * (nf_tables checks the whole table at each commit), so early syncs a
   * second apart add that cost dozens of times; growing by a quarter adds it
   * about five times the final table's worth in all, and leaves at most a
   * fifth of the Services to the sync after the lists (doubling left half:
   * a long last sync).
   */
  private earlyDue(): boolean {
    if (!this.early?.ready(this.deps.clock.monotonic())) return false;
    let programmed = 0;
    let pending = 0;
    for (const f of this.families) {
      programmed = Math.max(programmed, f.lastState?.services.size ?? 0);
      pending = Math.max(pending, f.services.pendingCount(), f.endpointsTracker.pendingCount());
    }
    return programmed === 0 || pending * 4 >= programmed;
  }

  /**
   * The first time both lists are in, request the first sync. A later relist
   * (after a 410 or an outage) reports Synced again but delivers its changes
   * as the diff, which requested its own sync; syncing again for the Synced
   * alone would only delay the change behind a sync with nothing to do, as
   * upstream's informers report HasSynced once.
   */
  private maybeInitialized(): void {
    if (this.initializedOnce || !this.isInitialized()) return;
    this.initializedOnce = true;
    if (this.early?.active()) this.release(this.early.finish());
    this.changed(this.families);
  }

  private publishPending(): void {
    let svc = 0;
    let ep = 0;
    for (const f of this.families) {
      svc = Math.max(svc, f.services.pendingCount());
      ep = Math.max(ep, f.endpointsTracker.pendingCount());
    }
    this.deps.observer.pendingChanges('service', svc);
    this.deps.observer.pendingChanges('endpoint', ep);
  }
}

/**
 * The canary as a port beside the family's maps: the snapshot counts its
 * Service as changed whenever the last state did not carry this very port and
 * endpoint (first sync, a new listener port), so partial syncs write it too.
 */
function canaryPort(canary: CanaryTarget): ExtraPort {
  return { servicePort: canary.servicePort, endpoints: [canary.endpoint] };
}

/** Longest key or reason a skip report carries (longer ones are cut, with their length noted). */
export const MAX_SKIP_TEXT = 512;

function clip(s: string): string {
  return s.length <= MAX_SKIP_TEXT ? s : `${s.slice(0, MAX_SKIP_TEXT)}...(${s.length} characters)`;
}
