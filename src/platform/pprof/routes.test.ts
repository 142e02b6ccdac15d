// /debug/pprof/ served by a real metrics server in this process, read back over HTTP.
import { after, before, describe, it, test } from 'node:test';
import assert from 'node:assert/strict';
import { gunzipSync } from 'node:zlib';
import { Profile } from 'pprof-format';
import { ProxyMetrics } from '../metrics.js';
import { startMetricsServer, type RetryingServer } from '../metricsserver.js';
import { isLoopback, MAX_SECONDS, parseSeconds, startProfiling, type PprofRoutes } from './routes.js';

const names = (p: Profile) => p.function.map((f) => p.stringTable.strings[Number(f.name)]!);
const types = (p: Profile) =>
  p.sampleType.map((t) => `${p.stringTable.strings[Number(t.type)]}/${p.stringTable.strings[Number(t.unit)]}`);

/**
 * Burns CPU in a function the profile should name. One per test: V8 counts
 * ticks in code it optimized before the profile started (on-stack
 * replacement, inlining) in the caller, so a second profile of the same hot
 * loop would not name it.
 */
function spinForTheProfile(ms: number): number {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1);
  return x;
}
function spinForTheCpuprofile(ms: number): number {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1);
  return x;
}

function metricsServer(pprof?: PprofRoutes): RetryingServer {
  const srv = startMetricsServer({
    bindAddress: '127.0.0.1:0',
    metrics: new ProxyMetrics({ defaultMetrics: false }),
    proxyMode: 'nftables',
    config: {},
    ...(pprof ? { pprof } : {}),
  });
  assert.ok(srv);
  return srv;
}

test('parseSeconds: default 30, whole numbers from 1 to the limit, anything else refused with why', () => {
  assert.equal(parseSeconds(null), 30);
  assert.equal(parseSeconds(''), 30);
  assert.equal(parseSeconds('1'), 1);
  assert.equal(parseSeconds(String(MAX_SECONDS)), MAX_SECONDS);
  for (const bad of ['0', '-1', '1.5', 'abc', ' 5', String(MAX_SECONDS + 1), '1e3'])
    assert.match(String(parseSeconds(bad)), /^invalid seconds .*: want a whole number from 1 to 300$/, bad);
});

test('isLoopback', () => {
  for (const a of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1']) assert.ok(isLoopback(a), a);
  for (const a of ['10.0.0.1', '::', '0.0.0.0', '::ffff:10.0.0.1', 'fe80::1', undefined]) assert.ok(!isLoopback(a), a);
});

test('without profiling, /debug/pprof/ is 404', async (t) => {
  const srv = metricsServer();
  t.after(() => srv.close());
  const { port } = await srv.ready;
  for (const p of ['/debug/pprof/', '/debug/pprof/profile?seconds=1', '/debug/pprof/heap']) {
    const r = await fetch(`http://127.0.0.1:${port}${p}`);
    assert.equal(r.status, 404, p);
    await r.arrayBuffer();
  }
});

describe('with profiling', () => {
  let pprof: PprofRoutes;
  let srv: RetryingServer;
  let base = '';
  before(async () => {
    pprof = startProfiling();
    srv = metricsServer(pprof);
    base = `http://127.0.0.1:${(await srv.ready).port}/debug/pprof`;
  });
  after(async () => {
    await srv.close();
    await pprof.close();
  });

  it('lists what it serves', async () => {
    const r = await fetch(`${base}/`);
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^text\/html/);
    const html = await r.text();
    for (const name of ['profile', 'heap', 'heapsnapshot', 'cmdline'])
      assert.ok(html.includes(`href="/debug/pprof/${name}"`), name);
    const unknown = await fetch(`${base}/goroutine`);
    assert.equal(unknown.status, 404);
    assert.match(await unknown.text(), /unknown profile "goroutine"/);
  });

  it('refuses bad seconds and formats with 400 and says why', async () => {
    for (const [q, why] of [
      ['profile?seconds=0', /want a whole number from 1 to 300/],
      ['profile?seconds=301', /want a whole number from 1 to 300/],
      ['profile?seconds=ten', /invalid seconds "ten"/],
      ['profile?seconds=1&format=svg', /want pprof or cpuprofile/],
      ['heap?format=svg', /want pprof or heapprofile/],
      ['heap?seconds=5', /not supported/],
    ] as const) {
      const r = await fetch(`${base}/${q}`);
      assert.equal(r.status, 400, q);
      assert.match(await r.text(), why, q);
    }
  });

  /**
   * Start a CPU profile and resolve once it runs, with the response to come:
   * it runs once another is refused (until then the other may be the one that
   * starts; it is then awaited and the check repeated).
   */
  async function profiling(query: string): Promise<{ response: Promise<Response>; refusal: string }> {
    const response = fetch(`${base}/profile?${query}`);
    for (;;) {
      const other = await fetch(`${base}/profile?seconds=1`);
      if (other.status === 409) return { response, refusal: await other.text() };
      assert.equal(other.status, 200);
      await other.arrayBuffer();
    }
  }

  it('a CPU profile in pprof format (gzipped) names the functions that ran; a second one at once is 409', async () => {
    const { response, refusal } = await profiling('seconds=1');
    assert.match(refusal, /already being taken/);
    spinForTheProfile(300);
    const r = await response;
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-disposition'), 'attachment; filename="profile"');
    const body = Buffer.from(await r.arrayBuffer());
    assert.deepEqual([...body.subarray(0, 2)], [0x1f, 0x8b], 'gzip magic');
    const p = Profile.decode(gunzipSync(body));
    assert.deepEqual(types(p), ['samples/count', 'cpu/nanoseconds']);
    assert.ok(p.sample.length > 0);
    assert.ok(names(p).includes('spinForTheProfile'), names(p).join(', '));
  });

  it('a CPU profile as V8 .cpuprofile JSON', async () => {
    const { response } = await profiling('seconds=1&format=cpuprofile');
    spinForTheCpuprofile(200);
    const r = await response;
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-disposition'), 'attachment; filename="profile.cpuprofile"');
    const prof = (await r.json()) as { nodes: { callFrame: { functionName: string } }[]; samples: number[] };
    assert.ok(prof.samples.length > 0);
    assert.ok(prof.nodes.some((n) => n.callFrame.functionName === 'spinForTheCpuprofile'));
  });

  it('a heap profile in pprof format, and as V8 .heapprofile JSON', async () => {
    // The profile shows sampled allocations that are still alive; what the
    // test's own requests allocate may all be collected by then, so keep some.
    const kept = Array.from({ length: 64 }, (_, i) => new Array<number>(16 * 1024).fill(i));
    const r = await fetch(`${base}/heap`);
    assert.equal(r.status, 200);
    const p = Profile.decode(gunzipSync(Buffer.from(await r.arrayBuffer())));
    assert.deepEqual(types(p), ['objects/count', 'space/bytes']);
    assert.ok(p.sample.length > 0);
    assert.ok(p.sample.every((s) => Number(s.value[0]) > 0 && Number(s.value[1]) > 0));
    const j = await fetch(`${base}/heap?format=heapprofile&gc=1`);
    assert.equal(j.status, 200);
    const hp = (await j.json()) as { head: { children: unknown[] }; samples: unknown[] };
    assert.ok(hp.head.children.length > 0);
    assert.equal(kept.length, 64);
  });

  it('a heap snapshot to a loopback client', async () => {
    const r = await fetch(`${base}/heapsnapshot`);
    assert.equal(r.status, 200);
    const snap = (await r.json()) as { snapshot: { node_count: number } };
    assert.ok(snap.snapshot.node_count > 1000);
  });

  it('cmdline is this process argv, NUL-separated', async () => {
    const r = await fetch(`${base}/cmdline`);
    assert.equal(await r.text(), process.argv.join('\0'));
  });
});
