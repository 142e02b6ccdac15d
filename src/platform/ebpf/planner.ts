// One family's BPF map entries under the one reconciler: the ebpf driver
// (src/dataplane/ebpf/driver.ts) says what each service port and the node
// want, the reconciler (src/engine/reconciler.ts) what must be written for
// that, and toMapOps() turns its answer into map writes. EbpfDataplane
// applies them to the kernel; diff, the tests and the benchmarks apply them
// to a Fake.
//
// The failure rule is the reconciler's: memory advances with every plan, so
// when applying a plan's writes fails the caller calls failed(). The next
// plan is then full, and wants the live entries (needsLive(): read them and
// pass them as `live`), which both the reconciler and the driver's ids
// start over from.
//
// A cold start (the first plan, or the first after a failure, over maps
// that hold none of this family's entries) only puts. With `packed` asked
// for, a plan of puts only hands the reconciler's operations over as they
// are (`puts`), for the runtime to pack into one batch per map, instead of
// a MapOp per entry; the reconciler still remembers every entry, so the
// partial syncs that follow diff as always. Over such empty maps the
// driver's reads of what is held (endpoint slots, live ids) are answered
// without asking the reconciler.
import type { ObjectOp, PutOp } from '../../core/objects.js';
import type { DataplaneConfig } from '../../core/types.js';
import {
  EbpfDriver,
  EBPF_SPEC,
  liveObjects,
  toMapOps,
  type EbpfDesiredInput,
  type EbpfDesired,
  type EbpfDriverOptions,
  type EbpfMemory,
  type LiveEntries,
  type Skipped,
} from '../../dataplane/ebpf/driver.js';
import * as L from '../../dataplane/ebpf/layout.js';
import type { MapOp } from '../../dataplane/ebpf/store.js';
import { Reconciler } from '../../engine/reconciler.js';
import { finish, type Steps } from '../../core/steps.js';

export interface EbpfPlanInput extends EbpfDesiredInput {
  /** This family's entries in the kernel, when needsLive() says so. Absent: the maps are taken as empty. */
  readonly live?: LiveEntries;
  /** The caller writes a plan of puts only itself (EbpfPlan.puts) instead of taking MapOps. */
  readonly packed?: boolean;
}

export interface EbpfPlan {
  readonly ops: MapOp[];
  /**
   * Set instead of `ops` when the input asked (`packed`) and there are
   * writes, every one a put (always so on a cold start): the reconciler's
   * puts in write order.
   */
  readonly puts?: readonly PutOp<L.MapName, string>[];
  readonly full: boolean;
  /** Keys of the service ports this plan recomputed (every port on a full plan). */
  readonly ports: readonly string[];
  /** Service ports left out, with the reason (e.g. an address another port already serves). */
  readonly skipped: readonly Skipped[];
  readonly counters: { readonly servicePorts: number; readonly writes: number };
}

export class EbpfPlanner {
  private readonly reconciler = new Reconciler<L.MapName, string>(EBPF_SPEC);
  private readonly driver: EbpfDriver;
  /** True while a plan renders over maps that hold nothing but array slots: the driver's reads need not look. */
  private unheld = false;

  constructor(config: DataplaneConfig, opts: EbpfDriverOptions = {}) {
    const r = this.reconciler;
    const memory: EbpfMemory = {
      applied: (kind, key) => (this.unheld && L.MAPS[kind].kind !== 'array' ? undefined : r.applied(kind, key)),
      ownersOf: (kind, key) => r.ownersOf(kind, key),
    };
    this.driver = new EbpfDriver(config, memory, opts);
  }

  /** True when the next plan is full and wants the live entries. */
  needsLive(): boolean {
    return this.reconciler.needsLive();
  }

  /** The id of a service port programmed here (undefined for ports that are not, e.g. SCTP). */
  idOf(servicePortKey: string): number | undefined {
    return this.driver.idOf(servicePortKey);
  }

  /**
   * The map writes for this state: full when the state asks or after a
   * failure, else only the ports of changed Services and the node's entries.
   */
  plan(input: EbpfPlanInput): EbpfPlan {
    return finish(this.planSteps(input));
  }

  /**
   * plan() as resumable steps (src/core/steps.ts), for the dataplane to run a
   * slice at a time. Until the plan is returned nothing else may use this
   * planner (the dataplane defers failed() and node refreshes meanwhile).
   */
  *planSteps(input: EbpfPlanInput): Steps<EbpfPlan> {
    const full = input.state.fullSync || this.reconciler.needsLive();
    const adopting = this.reconciler.needsLive();
    if (adopting) {
      this.reconciler.adopt(liveObjects(input.live));
      this.driver.restart(input.live);
    }
    this.unheld = adopting && holdsNothing(input.live);
    let want: EbpfDesired;
    try {
      want = yield* this.driver.renderSteps(input, full);
    } finally {
      this.unheld = false;
    }
    const planned = (yield* this.reconciler.planSteps(want.owners, full)).ops;
    const base = { full, ports: want.ports, skipped: want.skipped };
    const counters = { servicePorts: input.state.services.size, writes: planned.length };
    if (input.packed && planned.length > 0 && allPuts(planned)) return { ...base, ops: [], puts: planned, counters };
    return { ...base, ops: toMapOps(planned), counters };
  }

  /** Applying the last plan's writes failed: forget; the next plan is full, from the live entries. */
  failed(): void {
    this.reconciler.failed();
  }
}

function allPuts(ops: readonly ObjectOp<L.MapName, string>[]): ops is PutOp<L.MapName, string>[] {
  // Indexed: on a process's first sync this runs unoptimised, where for-of allocates per step.
  for (let i = 0; i < ops.length; i++) if (ops[i]!.op !== 'put') return false;
  return true;
}

/** No entry in the live maps but array slots (which always exist): what a fresh datapath holds. */
function holdsNothing(live: LiveEntries | undefined): boolean {
  for (const [map, entries] of live ?? []) if (entries.size > 0 && L.MAPS[map].kind !== 'array') return false;
  return true;
}
