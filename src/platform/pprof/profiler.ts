// V8's profilers through an in-process inspector session (node:inspector):
// a CPU profile over a span of time, the sampling heap profile, and a full
// heap snapshot. One CPU profile and one heap snapshot at a time; a second
// request is refused (KPT_BUSY) rather than queued, as Go's runtime refuses a
// second CPU profile.
//
// Heap sampling starts with the session, so a heap profile fetched later has
// the allocations made since start-up that are still alive. V8 samples one
// allocation per HEAP_INTERVAL_BYTES on average (Go's runtime.MemProfileRate
// is the same 512 KiB); the bench in bench/README.md ("profiling") measures
// what it costs.

import { Session } from 'node:inspector/promises';
import type { Readable } from 'node:stream';
import { getHeapSnapshot } from 'node:v8';
import { ProxyError } from '../../core/errors.js';
import type { V8CpuProfile, V8HeapProfile } from './convert.js';

/** Bytes between heap samples, on average. */
export const HEAP_INTERVAL_BYTES = 512 * 1024;
/** Microseconds between CPU samples: 1 kHz, V8's default (Go samples at 100 Hz). */
export const CPU_INTERVAL_MICROS = 1000;

export interface CpuProfileResult {
  readonly profile: V8CpuProfile;
  /** Wall-clock start in nanoseconds since the epoch (V8's own times are monotonic). */
  readonly timeNanos: bigint;
}

export interface HeapProfileResult {
  readonly profile: V8HeapProfile;
  readonly timeNanos: bigint;
}

const nowNanos = () => BigInt(Date.now()) * 1_000_000n;

export class V8Profiler {
  private readonly session = new Session();
  private cpuBusy = false;
  private snapshotBusy = false;
  private closed = false;
  private readonly started: Promise<void>;

  constructor() {
    this.session.connect();
    this.started = (async () => {
      await this.session.post('HeapProfiler.enable');
      await this.session.post('HeapProfiler.startSampling', { samplingInterval: HEAP_INTERVAL_BYTES });
      await this.session.post('Profiler.enable');
      await this.session.post('Profiler.setSamplingInterval', { interval: CPU_INTERVAL_MICROS });
    })();
    // A failure here surfaces on the first request; keep it from being an unhandled rejection now.
    this.started.catch(() => undefined);
  }

  /** Resolves once heap sampling runs (or rejects with why it could not start). */
  ready(): Promise<void> {
    return this.started;
  }

  /** Sample the CPU for `seconds`, or until `signal` aborts (then the profile is cut short). */
  async cpuProfile(seconds: number, signal?: AbortSignal): Promise<CpuProfileResult> {
    if (this.cpuBusy) throw new ProxyError('KPT_BUSY', 'a CPU profile is already being taken; try again when it ends');
    this.cpuBusy = true;
    try {
      await this.started;
      const timeNanos = nowNanos();
      await this.session.post('Profiler.start');
      let profile: V8CpuProfile;
      try {
        await sleep(seconds * 1000, signal);
      } finally {
        // Stop even when aborted, so the next profile can start.
        ({ profile } = await this.session.post('Profiler.stop'));
      }
      return { profile, timeNanos };
    } finally {
      this.cpuBusy = false;
    }
  }

  /** The sampled allocations still alive; with `gc`, after a full garbage collection (as Go's ?gc=1). */
  async heapProfile(gc = false): Promise<HeapProfileResult> {
    await this.started;
    if (gc) await this.session.post('HeapProfiler.collectGarbage');
    const { profile } = await this.session.post('HeapProfiler.getSamplingProfile');
    // The protocol sends node ids and samples; Node 20's typings leave both out.
    return { profile: profile as unknown as V8HeapProfile, timeNanos: nowNanos() };
  }

  /**
   * A full heap snapshot as a stream of `.heapsnapshot` JSON. V8 stops the
   * process while it walks the heap, and the stream holds a copy of it until read.
   */
  heapSnapshot(): Readable {
    if (this.snapshotBusy) throw new ProxyError('KPT_BUSY', 'a heap snapshot is already being written');
    this.snapshotBusy = true;
    try {
      const stream = getHeapSnapshot();
      stream.once('close', () => (this.snapshotBusy = false));
      return stream;
    } catch (err) {
      this.snapshotBusy = false;
      throw err;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.started.catch(() => undefined);
    await this.session.post('HeapProfiler.stopSampling').catch(() => undefined);
    this.session.disconnect();
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
