// ebpf side of `diff`: the maps the proxy pinned are read (this family's
// entries of every map the proxy writes) into a Fake, the real EbpfPlanner
// plans a full sync against them as the dataplane does after a restart, its
// operations run on the Fake, and the two are compared entry by entry. Only
// map reads reach the kernel.
import type { DataplaneConfig, IPFamily, SyncState } from '../../../core/types.js';
import { entryText } from '../../../dataplane/ebpf/describe.js';
import { liveEntries } from '../../../dataplane/ebpf/driver.js';
import { Fake } from '../../../dataplane/ebpf/fake.js';
import * as L from '../../../dataplane/ebpf/layout.js';
import type { EbpfOptions } from '../../../dataplane/ebpf/options.js';
import { listIfaces, netnsCookie, openIfaceSource } from '../../../platform/ebpf/ifaces.js';
import { PinnedMaps } from '../../../platform/ebpf/pinned.js';
import { EbpfPlanner } from '../../../platform/ebpf/planner.js';
import { PinDir } from '../../../platform/ebpf/pins.js';
import type { FamilyDiff } from '../driver.js';

export interface EbpfFamilyInput {
  readonly family: IPFamily;
  readonly config: DataplaneConfig;
  readonly state: SyncState;
  readonly ebpf: Omit<EbpfOptions, 'ctEntries'>;
  readonly localIPs: readonly string[];
  /** --service-traffic-metrics is on: the proxy sets CFG_TRAFFIC, so that is no change. */
  readonly trafficCounters?: boolean;
}

export interface EntryChange {
  readonly map: string;
  readonly change: 'added' | 'removed' | 'changed';
  readonly before?: string;
  readonly after?: string;
}

export async function diffEbpfFamily(i: EbpfFamilyInput): Promise<FamilyDiff> {
  await openIfaceSource();
  let live = new Map<L.MapName, Map<string, string>>();
  if (PinnedMaps.present(i.ebpf.pinRoot)) {
    const maps = new PinnedMaps(new PinDir(i.ebpf.pinRoot));
    try {
      live = liveEntries((m) => maps.dump(m), i.family);
    } finally {
      maps.close();
    }
  }
  const fake = new Fake({ maglevM: i.ebpf.maglevM });
  fake.apply(
    [...live].flatMap(([map, e]) =>
      [...e].map(([k, v]) => ({ map, op: 'update' as const, key: L.keyBytes(k), value: L.keyBytes(v) })),
    ),
  );
  const planner = new EbpfPlanner(i.config, {
    algorithm: i.ebpf.algorithm,
    maglevM: i.ebpf.maglevM,
    trafficCounters: i.trafficCounters ?? false,
    dsr: i.ebpf.lbMode === 'dsr',
  });
  const r = planner.plan({
    state: i.state,
    live,
    localIPs: i.localIPs,
    ifaces: listIfaces(),
    netnsCookie: netnsCookie(),
  });
  fake.apply(r.ops);
  const changes = compare(live, fake);
  const text = changes
    .map((c) =>
      c.change === 'added'
        ? `+${c.map}: ${c.after}`
        : c.change === 'removed'
          ? `-${c.map}: ${c.before}`
          : `-${c.map}: ${c.before}\n+${c.map}: ${c.after}`,
    )
    .join('\n');
  return {
    family: i.family,
    changes: changes.length,
    summary: changes.length === 0 ? 'no changes' : `${changes.length} map entries would change`,
    text: text ? `${text}\n` : '',
    ebpf: changes,
  };
}

function compare(before: ReadonlyMap<L.MapName, ReadonlyMap<string, string>>, after: Fake): EntryChange[] {
  const out: EntryChange[] = [];
  const afterAll = liveEntries((m) => after.dump(m));
  for (const m of L.MAP_NAMES) {
    if (!L.MAPS[m].rendered) continue;
    const b = before.get(m) ?? new Map<string, string>();
    const a = afterAll.get(m)!;
    const name = L.MAPS[m].name;
    const text = (k: string, v: string) => entryText(m, L.keyBytes(k), L.keyBytes(v));
    for (const [k, v] of a) {
      const old = b.get(k);
      if (old === undefined) out.push({ map: name, change: 'added', after: text(k, v) });
      else if (old !== v) out.push({ map: name, change: 'changed', before: text(k, old), after: text(k, v) });
    }
    for (const [k, v] of b) if (!a.has(k)) out.push({ map: name, change: 'removed', before: text(k, v) });
  }
  return out;
}
