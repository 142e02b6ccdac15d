// Structured JSON logs to stderr (pino), with klog-like verbosity: -v N maps
// to a pino level (0-1 info, 2-3 debug, 4+ trace). The engine never logs; it
// publishes to a ProxierObserver, and loggingObserver() turns that into lines.

import { pino, type DestinationStream, type Level, type Logger } from 'pino';
import type { ProxierObserver } from '../engine/observer.js';

export type { Logger };

/** klog -v N -> pino level. Negative or non-numbers count as 0. */
export function levelForVerbosity(v: number): Level {
  if (!(v >= 2)) return 'info';
  return v >= 4 ? 'trace' : 'debug';
}

export interface LoggerOptions {
  /** klog-style verbosity (--v). */
  readonly verbosity?: number;
  /** Where JSON lines go; stderr (fd 2, synchronous) by default. */
  readonly destination?: DestinationStream;
  /** Extra fields on every line. */
  readonly base?: Record<string, unknown>;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const dest = opts.destination ?? pino.destination({ fd: 2, sync: true });
  return pino(
    {
      level: levelForVerbosity(opts.verbosity ?? 0),
      base: { component: 'kube-proxy', ...opts.base },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    dest,
  );
}

/**
 * A ProxierObserver that logs: sync results at debug (upstream V(2)
 * "SyncProxyRules complete"), failures at error, skipped input at warn,
 * queued updates and change counts at trace.
 */
export function loggingObserver(log: Logger): ProxierObserver {
  return {
    queuedUpdate: (family, at) => log.trace({ ipFamily: family, at }, 'sync queued'),
    syncSucceeded: (r) =>
      log.debug(
        { ipFamily: r.family, elapsed: r.durationSeconds, partial: r.partial, noLocalEndpoints: r.noLocalEndpoints },
        'SyncProxyRules complete',
      ),
    syncFailed: (family, err, elapsed) => log.error({ ipFamily: family, elapsed, err }, 'SyncProxyRules failed'),
    pendingChanges: (kind, pending) => log.trace({ kind, pending }, 'pending changes'),
    changeRecorded: (kind) => log.trace({ kind }, 'change recorded'),
    networkProgrammingLatency: (family, seconds) =>
      log.trace({ ipFamily: family, seconds }, 'network programming latency'),
    inputSkipped: (kind, key, reason) => log.warn({ kind, key, reason }, 'skipping invalid object'),
    driftDetected: (d) =>
      log.warn(
        { ipFamily: d.family, mode: d.mode, reason: d.reason, detail: d.detail },
        'Rules changed by another actor; resyncing fully',
      ),
    datapathRepaired: (r) =>
      log.info(
        { ipFamily: r.family, mode: r.mode, reason: r.reason, detail: r.detail, seconds: r.seconds },
        'Datapath repaired',
      ),
    event: (level, fields, msg) => log[level](fields, msg),
  };
}

/**
 * Fan one set of observations out to several observers (e.g. metrics,
 * health, logging). An observer that throws does not stop the others.
 */
export function teeObservers(...observers: ProxierObserver[]): ProxierObserver {
  const each = <K extends keyof ProxierObserver>(k: K) =>
    ((...args: unknown[]) => {
      for (const o of observers) {
        try {
          (o[k] as (...a: unknown[]) => void)(...args);
        } catch {
          // observability must never break the sync path
        }
      }
    }) as ProxierObserver[K];
  return {
    queuedUpdate: each('queuedUpdate'),
    syncSucceeded: each('syncSucceeded'),
    syncFailed: each('syncFailed'),
    pendingChanges: each('pendingChanges'),
    changeRecorded: each('changeRecorded'),
    networkProgrammingLatency: each('networkProgrammingLatency'),
    inputSkipped: each('inputSkipped'),
    driftDetected: each('driftDetected'),
    datapathRepaired: each('datapathRepaired'),
    event: each('event'),
  };
}
