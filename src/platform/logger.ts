// Structured JSON logs to stderr (pino), with klog-like verbosity: -v N maps
// to a pino level (0-1 info, 2-3 debug, 4+ trace). With the alpha logging
// options, info lines go to stdout, optionally buffered (outputStream). The engine never logs; it
// publishes to a ProxierObserver, and loggingObserver() turns that into lines.

import { pino, type DestinationStream, type Level, type Logger } from 'pino';
import type { LogOutput } from '../core/config/logging.js';
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
  /** Where JSON lines go; stderr (fd 2, synchronous) by default. Overrides output. */
  readonly destination?: DestinationStream;
  /** Split stream and info buffer (logging.options, core/config/logging.ts); default: all to stderr. */
  readonly output?: LogOutput;
  /** Extra fields on every line. */
  readonly base?: Record<string, unknown>;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const dest = opts.destination ?? outputStream(opts.output);
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

/** Writes text to a file descriptor; injectable so the buffer is tested without one. */
export type WriteFn = (text: string) => void;

/** A synchronous writer on fd (sonic-boom, which retries a full pipe instead of failing). */
function writeFd(fd: number): WriteFn {
  let dest: ReturnType<typeof pino.destination> | undefined;
  return (text) => {
    (dest ??= pino.destination({ fd, sync: true })).write(text);
  };
}

/**
 * component-base's bufferedWriter (logs/api/v1/text.go): lines are held until
 * the next one would not fit in `size` bytes, then written in one go; a line
 * bigger than the whole buffer goes straight out after what is held. Lines
 * are never split, so a reader sees whole lines only.
 */
export class BufferedLineWriter {
  private held: string[] = [];
  private bytes = 0;

  constructor(
    private readonly write: WriteFn,
    readonly size: number,
  ) {}

  /** pino's DestinationStream. */
  readonly writeLine = (line: string): void => {
    const len = Buffer.byteLength(line);
    if (len > this.size - this.bytes && this.bytes > 0) this.flush();
    if (len > this.size) return this.write(line);
    this.held.push(line);
    this.bytes += len;
  };

  flush(): void {
    if (this.bytes === 0) return;
    const text = this.held.join('');
    this.held = [];
    this.bytes = 0;
    this.write(text);
  }

  /** Bytes waiting to be written. */
  get pending(): number {
    return this.bytes;
  }
}

/**
 * The stream pino writes to for a LogOutput: stderr alone, or stdout for
 * lines below `errorsFrom` and stderr for the rest (multistream with dedupe
 * hands each line to the one stream with the highest level it reaches).
 * A buffered stdout is flushed every flushFrequencyMs and when the process
 * exits, so no line is lost on a normal exit or process.exit().
 */
export function outputStream(output?: LogOutput, fds: { out: WriteFn; err: WriteFn } = STD): DestinationStream {
  const err: DestinationStream = { write: fds.err };
  if (!output?.splitStream) return err;
  let info: DestinationStream = { write: fds.out };
  if (output.infoBufferBytes > 0) {
    const buffered = new BufferedLineWriter(fds.out, output.infoBufferBytes);
    setInterval(() => buffered.flush(), Math.max(output.flushFrequencyMs, 1)).unref();
    process.once('exit', () => buffered.flush());
    info = { write: buffered.writeLine };
  }
  return pino.multistream(
    [
      { level: 'trace', stream: info },
      { level: output.errorsFrom, stream: err },
    ],
    { dedupe: true },
  );
}

const STD = { out: writeFd(1), err: writeFd(2) };

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
        {
          ipFamily: r.family,
          elapsed: r.durationSeconds,
          partial: r.partial,
          noLocalEndpoints: r.noLocalEndpoints,
          // The datapath's own figures (rules written, its steps' times): where a slow sync went.
          ...(r.counters ? { counters: r.counters } : {}),
        },
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
