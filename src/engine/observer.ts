// What the proxier publishes about its work (published, not hard-wired): the
// engine never imports a logger or a metrics library. platform/metrics.ts and
// the health state implement this; tests record it.

import type { DriftReason, IPFamily, ProxyMode } from '../core/types.js';

export interface SyncReport {
  readonly family: IPFamily;
  readonly durationSeconds: number;
  readonly partial: boolean;
  /** Wall-clock seconds (epoch) when the sync finished. */
  readonly finishedAt: number;
  /** Per-mode counters from the datapath (e.g. rules per table). */
  readonly counters?: Readonly<Record<string, number>>;
  /** Services whose Local traffic policy has no local endpoints (while having endpoints elsewhere). */
  readonly noLocalEndpoints: { readonly internal: number; readonly external: number };
}

/** A datapath reported drift (another actor changed what it wrote); a full sync follows. */
export interface DriftReport {
  readonly family: IPFamily;
  readonly mode: ProxyMode;
  readonly reason: DriftReason;
  readonly detail: string;
}

/** The full sync that followed drift succeeded: the datapath is as we wrote it again. */
export interface RepairReport extends DriftReport {
  /** Seconds from the first report of the drift to the end of the sync that repaired it. */
  readonly seconds: number;
  /** Wall-clock epoch ms when the repair finished. */
  readonly at: number;
}

export interface ProxierObserver {
  /** A sync was requested (upstream healthz QueuedUpdate). */
  queuedUpdate(family: IPFamily, at: number): void;
  /** A sync completed (upstream healthz Updated). */
  syncSucceeded(report: SyncReport): void;
  syncFailed(family: IPFamily, error: unknown, durationSeconds: number): void;
  /** Pending change counts, after each handler call and each sync. */
  pendingChanges(kind: 'service' | 'endpoint', pending: number): void;
  /** A change was recorded (counter). */
  changeRecorded(kind: 'service' | 'endpoint'): void;
  /** Seconds from an EndpointSlice's last-change-trigger-time to the rules being in place. */
  networkProgrammingLatency(family: IPFamily, seconds: number): void;
  /** Bad input that was skipped (logged and counted, never fatal). */
  inputSkipped(kind: 'service' | 'endpointslice' | 'node', key: string, reason: string): void;
  /** A datapath noticed drift (Dataplane.watchDrift); the repair is reported by datapathRepaired. */
  driftDetected(report: DriftReport): void;
  /** The datapath was repaired after drift (counted, posted as an Event, shown in /statusz). */
  datapathRepaired(report: RepairReport): void;
  /** Anything else worth a log line. */
  event(level: 'debug' | 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string): void;
}

/** An observer that ignores everything (for tests and tools). */
export const nullObserver: ProxierObserver = {
  queuedUpdate() {},
  syncSucceeded() {},
  syncFailed() {},
  pendingChanges() {},
  changeRecorded() {},
  networkProgrammingLatency() {},
  inputSkipped() {},
  driftDetected() {},
  datapathRepaired() {},
  event() {},
};
