// The IPVS driver (src/dataplane/ipvs/driver.ts) on the one reconciler: a
// SyncState in; the IPVS requests, ipset script, address changes, rules
// text and real servers to drain that bring one family there out (planOps,
// src/dataplane/ipvs/plan.ts). No I/O: IpvsDataplane reads the kernel back
// and applies the plan; the tests and the benchmarks run the same planner
// against the IPVS Fake.
//
// A plan is full when the caller asks (the engine's full syncs, the sync
// period), after failed() (or before the first plan), and when the node's
// addresses changed. A full plan starts from what the kernel holds (`live`:
// the reconciler adopts it, so leftovers are deleted and anything changed
// behind our back is written again); only our virtual servers are adopted
// (ownedVirtualServer, or one a Service wants), so others' are never
// deleted. Memory advances when the plan is made: if applying it fails, or
// another actor changed what we wrote, call failed().
import type { ObjectOp } from '../../core/objects.js';
import type { DataplaneConfig, SyncState } from '../../core/types.js';
import { IPVS_SPEC, IpvsDriver, renderedVirtualServers, setsWithMembers } from '../../dataplane/ipvs/driver.js';
import { excludedVirtualServer, liveObjects, ownedVirtualServer, type IpvsCurrent } from '../../dataplane/ipvs/live.js';
import {
  virtualServerKey,
  type IpvsKind,
  type IpvsObject,
  type IpvsValue,
  type VirtualServer,
} from '../../dataplane/ipvs/objects.js';
import { planOps, type IpvsPlan, type PlanOptions } from '../../dataplane/ipvs/plan.js';
import type { IpvsOptions, SkippedServicePort } from '../../dataplane/ipvs/serviceport.js';
import { Reconciler } from '../../engine/reconciler.js';

export interface IpvsPlannerOptions extends Partial<IpvsOptions> {
  /** --ipvs-exclude-cidrs: virtual servers there are never deleted. */
  readonly excludeCIDRs?: readonly string[];
  /**
   * Every virtual server of the family is ours: what the kernel holds was
   * written by this planner alone (a Fake in tests), so all are adopted.
   */
  readonly adoptAll?: boolean;
}

export interface IpvsPlanInput {
  readonly state: SyncState;
  /** The caller asks for a full plan (needsLive() forces one too). */
  readonly full: boolean;
  /** This family's addresses on every link but kube-ipvs0; default config.localIPs. */
  readonly nodeAddresses?: readonly string[];
  /** What the kernel holds, read back for a full plan; null: not read (memory stands for it). */
  readonly live: IpvsCurrent | null;
  /** The real servers being drained (GracefulTermination.draining()). */
  readonly draining?: PlanOptions['draining'];
}

export interface IpvsPlanned {
  /** The reconciler's answer, as planOps got it. */
  readonly ops: readonly ObjectOp<IpvsKind, IpvsValue>[];
  readonly plan: IpvsPlan;
  readonly full: boolean;
  /** The rules' restore text when it must be written (full, a rule came or went, a set filled or emptied). */
  readonly rules: string | null;
  readonly skipped: readonly SkippedServicePort[];
  /** Virtual servers wanted after this plan. */
  readonly virtualServers: number;
}

export class IpvsPlanner {
  private readonly driver: IpvsDriver;
  private readonly reconciler = new Reconciler<IpvsKind, IpvsValue>(IPVS_SPEC);

  constructor(
    private readonly config: DataplaneConfig,
    private readonly opts: IpvsPlannerOptions = {},
  ) {
    this.driver = new IpvsDriver(config, {
      scheduler: opts.scheduler ?? 'rr',
      randomFully: opts.randomFully ?? true,
    });
  }

  /** True when the next plan is full and wants what the kernel holds. */
  needsLive(): boolean {
    return this.reconciler.needsLive();
  }

  plan(i: IpvsPlanInput): IpvsPlanned {
    const r = this.reconciler;
    const family = this.config.family;
    const desired = this.driver.render({
      state: i.state,
      full: i.full || r.needsLive(),
      nodeAddresses: i.nodeAddresses,
    });
    const full = desired.full;
    if (full && (i.live !== null || r.needsLive())) {
      const live = i.live ?? { virtualServers: new Map(), ipsets: new Map(), addresses: new Set<string>() };
      r.adopt(liveObjects(live, family, this.adoptable(live, desired.owners, i.nodeAddresses)));
    }
    const count = (kind: IpvsKind) => r.countOf(kind);
    const sets = setsWithMembers(count);
    const exclude = this.opts.excludeCIDRs ?? [];
    const ops = r.plan(desired.owners, full).ops;
    const plan = planOps(ops, {
      family,
      desired,
      draining: i.draining,
      deletable: (vs) => !excludedVirtualServer(vs, exclude),
    });
    const rules =
      full || plan.rulesChanged || setsWithMembers(count) !== sets
        ? this.driver.rulesText(count, r.wantedOf('rule'))
        : null;
    return { ops, plan, full, rules, skipped: desired.skipped, virtualServers: r.countOf('vs') };
  }

  /** The last plan did not reach the kernel, or another actor changed it: the next plan is full. */
  failed(): void {
    this.reconciler.failed();
  }

  /** The rules' restore text for what is wanted now. */
  rules(): string {
    return this.driver.rulesText((k) => this.reconciler.countOf(k), this.reconciler.wantedOf('rule'));
  }

  /** How many objects of a kind are wanted now. */
  count(kind: IpvsKind): number {
    return this.reconciler.countOf(kind);
  }

  /** A kind's wanted objects, with their values. */
  wanted(kind: IpvsKind): IterableIterator<IpvsObject> {
    return this.reconciler.wantedOf(kind);
  }

  /**
   * The wanted objects of a kind that `present` (keys read from the kernel)
   * lacks. Counted first, a lookup per present key, so the walk that names
   * them happens only when something is missing.
   */
  missing(kind: 'vs' | 'bind', present: ReadonlySet<string>): string[] {
    const r = this.reconciler;
    let found = 0;
    for (const key of present) if (r.wanted(kind, key)) found++;
    if (found === r.countOf(kind)) return [];
    const out: string[] = [];
    for (const o of r.wantedOf(kind)) if (!present.has(o.key)) out.push(o.key);
    return out;
  }

  /** Which virtual servers a full plan adopts: ours by the rules of ownedVirtualServer, or one a Service wants. */
  private adoptable(
    live: IpvsCurrent,
    owners: Parameters<typeof renderedVirtualServers>[0],
    nodeAddresses: readonly string[] = this.config.localIPs,
  ): (vs: VirtualServer) => boolean {
    if (this.opts.adoptAll) return () => true;
    const ownership = { family: this.config.family, nodeAddresses, excludeCIDRs: this.opts.excludeCIDRs ?? [] };
    let wanted: Set<string> | null = null;
    return (vs) =>
      ownedVirtualServer(vs, live, ownership) || (wanted ??= renderedVirtualServers(owners)).has(virtualServerKey(vs));
  }
}
