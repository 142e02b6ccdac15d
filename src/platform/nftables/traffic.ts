// Per-Service traffic counters, platform side: keeps the
// `kube-proxy-ts-traffic` table (src/dataplane/nftables/traffic.ts) in step
// with each successful sync of the nftables datapath, and reads its
// per-element counters when Prometheus scrapes. A counter table that cannot
// be written never fails a sync: the error is reported and the next sync
// rebuilds the table.

import { withSidecar } from '../sidecar.js';
import type { Dataplane, IPFamily, SyncState } from '../../core/types.js';
import {
  planTrafficCounters,
  trafficElements,
  trafficTable,
  TRAFFIC_TABLE,
  type TrafficElement,
} from '../../dataplane/nftables/traffic.js';
import type { CommandRunner } from '../exec.js';
import type { ServiceTraffic, TrafficSource } from '../traffic.js';

export class ServiceTrafficCounters implements TrafficSource {
  private elements: ReadonlyMap<string, TrafficElement> | null = null;
  private untrackedPorts = 0;

  constructor(
    readonly family: IPFamily,
    private readonly run: CommandRunner,
    private readonly max: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  get untracked(): number {
    return this.untrackedPorts;
  }

  async update(state: SyncState): Promise<void> {
    const plan = planTrafficCounters(state, this.max);
    try {
      const script = (
        this.elements === null
          ? trafficTable(this.family, plan)
          : trafficElements(this.family, this.elements, plan.elements)
      ).toString();
      if (script !== '') await this.run('nft', ['-f', '-'], { input: script });
      this.elements = plan.elements;
      this.untrackedPorts = plan.untracked;
    } catch (err) {
      this.elements = null; // rebuild from nothing next time
      this.onError(err);
    }
  }

  /** Counter values summed per Service port (all its addresses and its node port). */
  async read(): Promise<ServiceTraffic[]> {
    const els = this.elements;
    if (els === null) return [];
    const fam = this.family === 'IPv4' ? 'ip' : 'ip6';
    const byKey = new Map<string, TrafficElement>();
    for (const e of els.values()) byKey.set(`${e.set} ${e.key}`, e);
    const sums = new Map<string, { servicePort: string; protocol: string; newConnections: number; bytes: number }>();
    for (const set of ['conns', 'bytes', 'nodeport-conns', 'nodeport-bytes']) {
      const r = await this.run('nft', ['-j', 'list', 'set', fam, TRAFFIC_TABLE, set], { allowFailure: true });
      if (r.code !== 0) continue;
      for (const { key, packets, bytes } of parseCountedElements(r.stdout)) {
        const e = byKey.get(`${set} ${key}`);
        if (!e) continue;
        const s = sums.get(e.servicePort) ?? {
          servicePort: e.servicePort,
          protocol: e.protocol,
          newConnections: 0,
          bytes: 0,
        };
        if (set.endsWith('conns')) s.newConnections += packets;
        else s.bytes += bytes;
        sums.set(e.servicePort, s);
      }
    }
    return [...sums.values()];
  }

  async cleanup(): Promise<void> {
    const fam = this.family === 'IPv4' ? 'ip' : 'ip6';
    await this.run('nft', ['delete', 'table', fam, TRAFFIC_TABLE], { allowFailure: true });
    this.elements = null;
  }
}

/** `--cleanup`: the counter tables of both families, whether or not the flag was ever on. */
export async function cleanupTrafficCounters(run: CommandRunner): Promise<void> {
  for (const fam of ['ip', 'ip6']) {
    const r = await run('nft', ['list', 'table', fam, TRAFFIC_TABLE], { allowFailure: true });
    if (r.code === 0) await run('nft', ['delete', 'table', fam, TRAFFIC_TABLE]);
  }
}

/** Elements of `nft -j list set` output with their counters, keys written as nft writes them. */
export function parseCountedElements(json: string): Array<{ key: string; packets: number; bytes: number }> {
  type Elem = { elem?: { val?: unknown; counter?: { packets?: number; bytes?: number } } };
  const doc = JSON.parse(json) as { nftables?: Array<{ set?: { elem?: Elem[] } }> };
  const out: Array<{ key: string; packets: number; bytes: number }> = [];
  for (const item of doc.nftables ?? [])
    for (const el of item.set?.elem ?? []) {
      const v = el.elem?.val;
      const fields = typeof v === 'object' && v !== null && 'concat' in v ? (v as { concat: unknown[] }).concat : [v];
      out.push({
        key: fields.map(String).join(' . '),
        packets: el.elem?.counter?.packets ?? 0,
        bytes: el.elem?.counter?.bytes ?? 0,
      });
    }
  return out;
}

/** The datapath, with the counter table updated after each successful sync and removed by cleanup. */
export function withTrafficCounters(dp: Dataplane, counters: ServiceTrafficCounters): Dataplane {
  return withSidecar(dp, { sync: (state) => counters.update(state), cleanup: () => counters.cleanup() });
}
