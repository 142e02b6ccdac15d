// Which Service ports the opt-in per-Service traffic counters
// (--service-traffic-metrics N) count, for every mode that counts them
// (nftables: src/dataplane/nftables/traffic.ts; ebpf:
// src/dataplane/ebpf/traffic.ts). The first N in key order
// ("namespace/name:port"), so the same ones stay counted from sync to sync
// and a new Service changes the selection only where it sorts in; the rest
// are reported as untracked. Pure.
import type { ServicePort, SyncState } from '../core/types.js';

export interface CountedServicePorts {
  /** The counted ports, in key order. */
  readonly counted: readonly ServicePort[];
  /** Service ports past the cap, not counted. */
  readonly untracked: number;
}

export function selectCountedServicePorts(state: SyncState, max: number): CountedServicePorts {
  const keys = [...state.services.keys()].sort();
  const counted = keys.slice(0, Math.max(0, max)).map((k) => state.services.get(k)!);
  return { counted, untracked: Math.max(0, keys.length - Math.max(0, max)) };
}
