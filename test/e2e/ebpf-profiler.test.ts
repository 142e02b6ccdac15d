// The BPF programs load while V8's CPU profiler samples the proxy.
//
// V8 samples a thread by sending it SIGPROF (every 1 ms by default; our
// /debug/pprof/profile starts that profiler, and so does `node --cpu-prof`).
// The kernel's verifier gives up with EAGAIN when a signal is pending on the
// loading thread, and libbpf's five retries each verify the whole object
// again, which takes longer than one sampling interval: without the signal
// blocked around the load, a profiled ebpf-mode proxy could not load its
// programs (every sync failed with "load BPF programs: errno (11)"). Nothing
// is pinned or attached here: the object is loaded privately and closed.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Session } from 'node:inspector/promises';
import { loadObject } from '../../src/platform/ebpf/object.js';

let session: Session;
before(async () => {
  session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  // Every 100 us, so that a signal lands in any verification, however fast this machine is.
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
});
after(() => session?.disconnect());

test('the tc and socket programs load while the CPU profiler samples this thread', async () => {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < 3; i++) {
    // No pins: nothing outlives the object, and nothing attaches (loading is not attaching).
    const obj = loadObject({ pins: null, socketLB: true, maglevM: 251 });
    obj.close();
  }
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const { profile } = await session.post('Profiler.stop');
  // The profiler ran across the loads and took samples (the signals held back during a load arrive after
  // it): without it running, this test would prove nothing.
  assert.ok((profile.samples?.length ?? 0) > 0, 'no samples');
  assert.ok(
    profile.endTime - profile.startTime >= ms * 1000,
    `profile ${profile.startTime}-${profile.endTime}, loads ${ms} ms`,
  );
});
