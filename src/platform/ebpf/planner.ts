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
import type { DataplaneConfig } from '../../core/types.js';
import {
  EbpfDriver,
  EBPF_SPEC,
  liveObjects,
  toMapOps,
  type EbpfDesiredInput,
  type EbpfDriverOptions,
  type LiveEntries,
  type Skipped,
} from '../../dataplane/ebpf/driver.js';
import type * as L from '../../dataplane/ebpf/layout.js';
import type { MapOp } from '../../dataplane/ebpf/store.js';
import { Reconciler } from '../../engine/reconciler.js';

export interface EbpfPlanInput extends EbpfDesiredInput {
  /** This family's entries in the kernel, when needsLive() says so. Absent: the maps are taken as empty. */
  readonly live?: LiveEntries;
}

export interface EbpfPlan {
  readonly ops: MapOp[];
  readonly full: boolean;
  /** Keys of the service ports this plan recomputed (every port on a full plan). */
  readonly ports: readonly string[];
  /** Service ports left out, with the reason (e.g. an address another port already serves). */
  readonly skipped: readonly Skipped[];
  readonly counters: { readonly servicePorts: number; readonly writes: number };
}

export class EbpfPlanner {
  private readonly reconciler = new Reconciler<L.MapName, Uint8Array>(EBPF_SPEC);
  private readonly driver: EbpfDriver;

  constructor(config: DataplaneConfig, opts: EbpfDriverOptions = {}) {
    this.driver = new EbpfDriver(config, this.reconciler, opts);
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
    const full = input.state.fullSync || this.reconciler.needsLive();
    if (this.reconciler.needsLive()) {
      this.reconciler.adopt(liveObjects(input.live));
      this.driver.restart(input.live);
    }
    const want = this.driver.render(input, full);
    const ops = toMapOps(this.reconciler.plan(want.owners, full).ops);
    return {
      ops,
      full,
      ports: want.ports,
      skipped: want.skipped,
      counters: { servicePorts: input.state.services.size, writes: ops.length },
    };
  }

  /** Applying the last plan's writes failed: forget; the next plan is full, from the live entries. */
  failed(): void {
    this.reconciler.failed();
  }
}
