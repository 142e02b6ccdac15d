// Per-Service traffic counters of the ebpf mode, platform side: after each
// successful map sync, the family's kpt_traffic entries follow the counted
// service ports (TrafficCounterPlan, src/dataplane/ebpf/traffic.ts); at each
// scrape, every counted entry is read, summed over the CPUs. A write that
// fails never fails the sync: it is reported and the next sync starts again
// from the ids the map holds.
import type { IPFamily, SyncState } from '../../core/types.js';
import * as L from '../../dataplane/ebpf/layout.js';
import { TrafficCounterPlan } from '../../dataplane/ebpf/traffic.js';
import type { ServiceTraffic, TrafficSource } from '../traffic.js';
import type { EbpfRuntime } from './runtime.js';

export class EbpfTrafficCounters implements TrafficSource {
  private readonly plan: TrafficCounterPlan;
  private rt: EbpfRuntime | null = null;

  constructor(
    readonly family: IPFamily,
    max: number,
  ) {
    this.plan = new TrafficCounterPlan(family, max);
  }

  get untracked(): number {
    return this.plan.untracked;
  }

  /** Bring kpt_traffic in step with this sync; throws (after forgetting its memory) when a write fails. */
  update(rt: EbpfRuntime, state: SyncState, full: boolean, idOf: (key: string) => number | undefined): number {
    this.rt = rt;
    const live = this.plan.needsLive() ? trafficIds(rt) : undefined;
    const ops = this.plan.update(state, full, idOf, live);
    try {
      rt.apply(ops);
    } catch (err) {
      this.plan.reset();
      throw err;
    }
    return ops.length;
  }

  async read(): Promise<ServiceTraffic[]> {
    const rt = this.rt;
    if (!rt || this.plan.needsLive()) return [];
    const out: ServiceTraffic[] = [];
    for (const [id, slot] of this.plan.counted) {
      const v = rt.lookup('traffic', L.encodeU32(id));
      if (!v) continue;
      const d = L.decodeTrafficValue(v);
      out.push({
        servicePort: slot.servicePort,
        protocol: slot.protocol,
        newConnections: Number(d.conns),
        bytes: Number(d.bytes),
      });
    }
    return out;
  }
}

/** The svc ids that have a kpt_traffic entry (both families). */
export function trafficIds(rt: EbpfRuntime): number[] {
  return rt.dump('traffic').map(([k]) => L.decodeU32(k));
}
