// V8's profiles turned into pprof's (the profile.proto that `go tool pprof`
// reads), built with pprof-format. Pure: no inspector, no I/O; the caller
// samples (profiler.ts) and gzips. This module is imported only when a pprof
// profile is asked for, so a proxy that never serves one never loads the encoder.
//
// CPU: V8 records one sample per tick with the node (call stack) it was in
// and the time since the previous tick. Each sample becomes one pprof sample
// [1 sample, nanoseconds until the next tick] on its stack, leaf first.
// "(idle)" ticks (the event loop waiting) are dropped: they are not CPU time,
// and Go's CPU profile has nothing like them. "(program)" and "(garbage
// collector)" stay: V8 spends CPU there.
//
// Heap: V8's sampling heap profiler keeps the sampled allocations still alive
// (in use, as Go's inuse_* values). It reports each sample's bytes already
// scaled to the allocations it stands for (size × count, count =
// round(1 / (1 - e^(-size/interval)))); objectsInSample estimates the count.

import {
  Function as PprofFunction,
  Location,
  Profile,
  Sample,
  StringTable,
  ValueType,
  type ProfileInput,
} from 'pprof-format';

/** V8's call frame (the inspector's Runtime.CallFrame). Line and column are 0-based, -1 when unknown. */
export interface V8CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
  readonly columnNumber: number;
  readonly scriptId?: string;
}

/** The inspector's Profiler.Profile (a `.cpuprofile`), as much of it as the conversion reads. */
export interface V8CpuProfile {
  readonly nodes: readonly {
    readonly id: number;
    readonly callFrame: V8CallFrame;
    readonly children?: readonly number[];
  }[];
  /** Microseconds, monotonic. */
  readonly startTime: number;
  readonly endTime: number;
  /** Node id per tick. */
  readonly samples?: readonly number[];
  /** Microseconds between a tick and the one before it (the first: since startTime). */
  readonly timeDeltas?: readonly number[];
}

export interface V8HeapNode {
  readonly id: number;
  readonly callFrame: V8CallFrame;
  readonly selfSize: number;
  readonly children: readonly V8HeapNode[];
}

/** The inspector's HeapProfiler.SamplingHeapProfile (a `.heapprofile`). */
export interface V8HeapProfile {
  readonly head: V8HeapNode;
  /** Each sample's size is already scaled (size × count); see the file comment. */
  readonly samples?: readonly { readonly size: number; readonly nodeId: number }[];
}

export interface CpuConvertOptions {
  /** Wall-clock time the profile started, in nanoseconds since the epoch. */
  readonly timeNanos: bigint;
  /** The sampling interval V8 was given, in microseconds. */
  readonly intervalMicros: number;
}

export interface HeapConvertOptions {
  readonly timeNanos: bigint;
  /** The heap sampling interval V8 was given, in bytes. */
  readonly intervalBytes: number;
}

/** V8's names for frames that are not JavaScript functions. */
const IDLE = '(idle)';
const ROOT = '(root)';

/** Interns functions and locations: one location per distinct call frame. */
class Frames {
  readonly strings = new StringTable();
  readonly functions: PprofFunction[] = [];
  readonly locations: Location[] = [];
  private readonly byKey = new Map<string, number>();

  /** The location id of a call frame. */
  location(f: V8CallFrame): number {
    const line = f.lineNumber >= 0 ? f.lineNumber + 1 : 0;
    const name = f.functionName === '' ? '(anonymous)' : f.functionName;
    const key = `${name}\0${f.url}\0${line}\0${f.columnNumber}`;
    let id = this.byKey.get(key);
    if (id !== undefined) return id;
    id = this.locations.length + 1;
    this.byKey.set(key, id);
    // V8 gives the line where the function starts, not the line of the tick: it is both the
    // function's start line and the location's line.
    this.functions.push(
      new PprofFunction({
        id,
        name: this.strings.dedup(name),
        systemName: this.strings.dedup(name),
        filename: this.strings.dedup(f.url),
        startLine: line,
      }),
    );
    this.locations.push(
      new Location({ id, line: [{ functionId: id, line, column: Math.max(f.columnNumber + 1, 0) }] }),
    );
    return id;
  }

  profile(init: ProfileInput): Profile {
    return new Profile({ ...init, function: this.functions, location: this.locations, stringTable: this.strings });
  }

  valueType(type: string, unit: string): ValueType {
    return new ValueType({ type: this.strings.dedup(type), unit: this.strings.dedup(unit) });
  }
}

/** A V8 CPU profile as a pprof profile with sample types samples/count and cpu/nanoseconds. */
export function cpuProfileToPprof(p: V8CpuProfile, opts: CpuConvertOptions): Profile {
  const frames = new Frames();
  const sampleType = [frames.valueType('samples', 'count'), frames.valueType('cpu', 'nanoseconds')];
  const periodType = frames.valueType('cpu', 'nanoseconds');

  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  // Stacks (leaf first) per node id, and the values summed per node: pprof merges equal stacks anyway.
  const stacks = new Map<number, number[] | null>();
  const stackOf = (id: number): number[] | null => {
    let s = stacks.get(id);
    if (s !== undefined) return s;
    const leaf = byId.get(id);
    if (!leaf || leaf.callFrame.functionName === IDLE) s = null;
    else {
      s = [];
      for (
        let n: typeof leaf | undefined = leaf;
        n && n.callFrame.functionName !== ROOT;
        n = byId.get(parent.get(n.id) ?? -1)
      )
        s.push(frames.location(n.callFrame));
    }
    stacks.set(id, s);
    return s;
  };

  const ids = p.samples ?? [];
  const deltas = p.timeDeltas ?? [];
  const totals = new Map<number, { count: number; micros: number }>();
  // A tick's time is the time until the next one, as DevTools counts it; the last runs to endTime.
  let at = p.startTime;
  const times = ids.map((_, i) => (at += deltas[i] ?? 0));
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    const until = i + 1 < ids.length ? times[i + 1]! : Math.max(p.endTime, times[i]!);
    const t = totals.get(id) ?? { count: 0, micros: 0 };
    t.count++;
    t.micros += Math.max(until - times[i]!, 0);
    totals.set(id, t);
  }
  const sample: Sample[] = [];
  for (const [id, t] of totals) {
    const stack = stackOf(id);
    if (!stack || stack.length === 0) continue;
    sample.push(new Sample({ locationId: stack, value: [t.count, Math.round(t.micros * 1000)] }));
  }
  return frames.profile({
    sampleType,
    sample,
    periodType,
    period: Math.round(opts.intervalMicros * 1000),
    timeNanos: opts.timeNanos,
    durationNanos: Math.max(Math.round((p.endTime - p.startTime) * 1000), 0),
    defaultSampleType: sampleType[1]!.type,
  });
}

/** A V8 sampling heap profile as a pprof profile with sample types objects/count and space/bytes (in use). */
export function heapProfileToPprof(p: V8HeapProfile, opts: HeapConvertOptions): Profile {
  const frames = new Frames();
  const sampleType = [frames.valueType('objects', 'count'), frames.valueType('space', 'bytes')];
  const periodType = frames.valueType('space', 'bytes');

  const objects = new Map<number, number>();
  for (const s of p.samples ?? [])
    objects.set(s.nodeId, (objects.get(s.nodeId) ?? 0) + objectsInSample(s.size, opts.intervalBytes));

  const sample: Sample[] = [];
  const walk = (n: V8HeapNode, above: number[]): void => {
    const stack =
      n.callFrame.functionName === ROOT && above.length === 0 ? above : [frames.location(n.callFrame), ...above];
    if (n.selfSize > 0 && stack.length > 0) {
      // Without per-sample data (older V8), count each node as one object rather than none.
      const count = p.samples ? (objects.get(n.id) ?? 0) : 1;
      sample.push(new Sample({ locationId: stack, value: [Math.round(count), Math.round(n.selfSize)] }));
    }
    for (const c of n.children) walk(c, stack);
  };
  walk(p.head, []);
  return frames.profile({
    sampleType,
    sample,
    periodType,
    period: opts.intervalBytes,
    timeNanos: opts.timeNanos,
    defaultSampleType: sampleType[1]!.type,
  });
}

/** V8's count for one sampled object of `size` bytes: how many allocations it stands for. */
export function sampleCount(size: number, intervalBytes: number): number {
  return Math.floor(1 / (1 - Math.exp(-size / intervalBytes)) + 0.5);
}

/** The smallest V8 heap object: one 8-byte word. */
const MIN_OBJECT_BYTES = 8;

/**
 * How many objects a sample of `scaled` bytes (size × sampleCount(size))
 * stands for. V8 sends only the product, and for objects much smaller than
 * the interval several sizes give the same one (16 × 32769 = 24 × 21846 =
 * 48 × 10923 at 512 KiB; 150000 × 4 = 300000 × 2), so the count is an
 * estimate within a factor of two, exact only for objects of several intervals
 * (sampled once each). The size taken is the one whose unrounded product is `scaled`.
 */
export function objectsInSample(scaled: number, intervalBytes: number): number {
  if (!(scaled > 0) || !(intervalBytes > 0)) return 0;
  // size / (1 - e^(-size/interval)) grows with size: bisect for the one that gives `scaled`.
  let lo = MIN_OBJECT_BYTES;
  let hi = Math.max(scaled, MIN_OBJECT_BYTES);
  for (let i = 0; i < 64 && hi - lo > 1e-6; i++) {
    const mid = (lo + hi) / 2;
    if (mid / (1 - Math.exp(-mid / intervalBytes)) < scaled) lo = mid;
    else hi = mid;
  }
  return Math.max(1, Math.round(scaled / hi));
}
