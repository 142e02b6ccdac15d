import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Profile } from 'pprof-format';
import {
  cpuProfileToPprof,
  heapProfileToPprof,
  objectsInSample,
  sampleCount,
  type V8CallFrame,
  type V8CpuProfile,
  type V8HeapProfile,
} from './convert.js';

const frame = (functionName: string, url = '', lineNumber = -1, columnNumber = -1): V8CallFrame => ({
  functionName,
  url,
  lineNumber,
  columnNumber,
});

/** A decoded profile's samples as readable stacks (leaf first) with their values. */
function readBack(bytes: Uint8Array) {
  const p = Profile.decode(bytes);
  const str = (i: number | bigint) => p.stringTable.strings[Number(i)]!;
  const fn = new Map(p.function.map((f) => [Number(f.id), f]));
  const loc = new Map(p.location.map((l) => [Number(l.id), l]));
  const stacks = p.sample
    .map((s) => ({
      stack: s.locationId
        .map((id) => {
          const line = loc.get(Number(id))!.line[0]!;
          const f = fn.get(Number(line.functionId))!;
          return `${str(f.name)} ${str(f.filename)}:${line.line}`;
        })
        .join(' < '),
      value: s.value.map(Number),
    }))
    .sort((a, b) => a.stack.localeCompare(b.stack));
  return {
    p,
    stacks,
    sampleType: p.sampleType.map((v) => `${str(v.type)}/${str(v.unit)}`),
    periodType: p.periodType ? `${str(p.periodType.type)}/${str(p.periodType.unit)}` : '',
    defaultSampleType: str(p.defaultSampleType),
  };
}

// (root) -> main (app.js line 10) -> work (app.js line 20), main -> (anonymous) (app.js 30); (idle); (garbage collector)
const cpu: V8CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame('(root)'), children: [2, 5, 6] },
    { id: 2, callFrame: frame('main', 'file:///app.js', 9, 0), children: [3, 4] },
    { id: 3, callFrame: frame('work', 'file:///app.js', 19, 4), children: [] },
    { id: 4, callFrame: frame('', 'file:///app.js', 29, 2) },
    { id: 5, callFrame: frame('(idle)'), children: [] },
    { id: 6, callFrame: frame('(garbage collector)'), children: [] },
  ],
  startTime: 1_000,
  endTime: 11_000,
  // Ticks at 2000, 3000, 5000, 6000, 8000, 9000, 10500 µs; the last runs to endTime (11000).
  samples: [3, 3, 4, 5, 6, 3, 2],
  timeDeltas: [1_000, 1_000, 2_000, 1_000, 2_000, 1_000, 1_500],
};

test('cpuProfileToPprof: one sample per stack, leaf first, time until the next tick; idle dropped', () => {
  const out = readBack(
    cpuProfileToPprof(cpu, { timeNanos: 1_700_000_000_000_000_000n, intervalMicros: 1000 }).encode(),
  );
  assert.deepEqual(out.sampleType, ['samples/count', 'cpu/nanoseconds']);
  assert.equal(out.periodType, 'cpu/nanoseconds');
  assert.equal(out.defaultSampleType, 'cpu');
  assert.equal(Number(out.p.period), 1_000_000);
  assert.equal(Number(out.p.durationNanos), 10_000_000);
  assert.equal(BigInt(out.p.timeNanos), 1_700_000_000_000_000_000n);
  assert.deepEqual(out.stacks, [
    { stack: '(anonymous) file:///app.js:30 < main file:///app.js:10', value: [1, 1_000_000] },
    { stack: '(garbage collector) :0', value: [1, 1_000_000] },
    { stack: 'main file:///app.js:10', value: [1, 500_000] },
    // work: ticks at 2000 (1 ms), 3000 (2 ms) and 9000 (1.5 ms)
    { stack: 'work file:///app.js:20 < main file:///app.js:10', value: [3, 4_500_000] },
  ]);
  // main is one function and one location, shared by every stack through it.
  const str = (i: number | bigint) => out.p.stringTable.strings[Number(i)];
  assert.equal(out.p.function.filter((f) => str(f.name) === 'main').length, 1);
  assert.equal(Number(out.p.function.find((f) => str(f.name) === 'work')!.startLine), 20);
});

test('cpuProfileToPprof: an empty profile encodes with no samples', () => {
  const out = readBack(
    cpuProfileToPprof(
      { nodes: [{ id: 1, callFrame: frame('(root)') }], startTime: 5, endTime: 5 },
      { timeNanos: 0n, intervalMicros: 1000 },
    ).encode(),
  );
  assert.deepEqual(out.stacks, []);
  assert.deepEqual(out.sampleType, ['samples/count', 'cpu/nanoseconds']);
});

test('sampleCount and objectsInSample: the count V8 folded into a sample size, recovered or estimated', () => {
  const interval = 512 * 1024;
  // V8 reports size × count; what a 16-byte object's sample looks like (seen from Node 20: 524304 = 16 × 32769).
  assert.equal(sampleCount(16, interval), 32769);
  // Objects of several intervals: sampled once each, and the count is recovered.
  for (const size of [2_000_000, 50_000_000]) {
    const count = sampleCount(size, interval);
    assert.equal(objectsInSample(size * count, interval), count, `size ${size} count ${count}`);
  }
  // Small objects: 16 × 32769 = 24 × 21846 = 48 × 10923, so the size is lost; the estimate lies between.
  for (const size of [16, 24, 48]) assert.equal(size * sampleCount(size, interval), 524304);
  const estimate = objectsInSample(524304, interval);
  assert.ok(estimate >= 10923 && estimate <= 32769, `estimate ${estimate}`);
  for (const size of [8, 40, 64, 200, 1024, 4096, 65536, 150_000, 300_000, 524_288, 700_000]) {
    const count = sampleCount(size, interval);
    const got = objectsInSample(size * count, interval);
    assert.ok(got >= count / 2 && got <= count * 2, `size ${size}: ${got} for ${count}`);
  }
  assert.equal(objectsInSample(0, interval), 0);
});

test('heapProfileToPprof: in-use space per stack, objects from the samples', () => {
  const interval = 512 * 1024;
  const heap: V8HeapProfile = {
    head: {
      id: 1,
      callFrame: frame('(root)'),
      selfSize: 0,
      children: [
        {
          id: 2,
          callFrame: frame('load', 'file:///app.js', 4, 0),
          selfSize: 16 * 32769,
          children: [
            { id: 3, callFrame: frame('parse', 'file:///app.js', 14, 0), selfSize: 2 * 2_000_000, children: [] },
          ],
        },
        { id: 4, callFrame: frame('idle', 'file:///app.js', 40, 0), selfSize: 0, children: [] },
      ],
    },
    samples: [
      { nodeId: 2, size: 16 * 32769 },
      { nodeId: 3, size: 2_000_000 },
      { nodeId: 3, size: 2_000_000 },
    ],
  };
  const out = readBack(heapProfileToPprof(heap, { timeNanos: 1n, intervalBytes: interval }).encode());
  assert.deepEqual(out.sampleType, ['objects/count', 'space/bytes']);
  assert.equal(out.periodType, 'space/bytes');
  assert.equal(out.defaultSampleType, 'space');
  assert.equal(Number(out.p.period), interval);
  assert.deepEqual(out.stacks, [
    // 524304 bytes: 16385 objects estimated (the truth could be 32769 of 16 bytes or 10923 of 48).
    { stack: 'load file:///app.js:5', value: [16385, 16 * 32769] },
    { stack: 'parse file:///app.js:15 < load file:///app.js:5', value: [2, 4_000_000] },
  ]);
});
