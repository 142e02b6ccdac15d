// Benchmark (never a test): what one proxy's sources ask of the API server to
// sync, and to relist after a compacted watch, at N Services (one
// EndpointSlice of 5 endpoints each, shaped as a real server's objects:
// bench/lib/objects.ts). In process, no root: the test API server over HTTPS
// with a token, closing the connection after a watch ends as the real one may,
// and the proxy's own client and sources (startSources). Reported per phase:
// list requests, watch requests, reply bytes, the time from the 410 to the
// last relist's synced(), the requests sent again on a new connection, and
// the TLS handshakes the server saw aborted. Also prints what client-go's
// reflector would send for the same relist (tools/cache/reflector.go:
// with WatchListClient, on by default since 1.35, one watch-list per
// resource; without it, resourceVersion 0 first, the last version without a
// limit after a 410, both served by the watch cache in one reply). Runs the
// sources with the streaming watch-list (`on`, the default) and without it
// (`off`: list and watch), each against a fresh server; a watch-list's
// bytes are those of its stream (the state, its end bookmark, anything
// after until the next relist).
//
//   node --import tsx bench/relist.ts [--services 10000] [--repeat 3] [--watch-list on,off]
import { startSources } from '../src/platform/k8s/sources.js';
import { Recorder } from '../test/apiserver/recorder.js';
import { clientFor } from '../test/apiserver/kubeconfig.js';
import { type RequestRecord, TestApiServer } from '../test/apiserver/server.js';
import { arg, median, runBench } from './lib/cluster.js';
import { BENCH_NODE, benchNode, endpointSlice, service } from './lib/objects.js';

const SERVICES = Number(arg('services', '10000'));
const REPEAT = Number(arg('repeat', '3'));
const WATCH_LIST = arg('watch-list', 'on,off').split(',');

interface Phase {
  /** Requests that fetched a state: lists and watch-lists. */
  lists: number;
  /** Plain watches (resumes). */
  watches: number;
  bytes: number;
  byPath: Record<string, { lists: number; bytes: number }>;
}

function phase(reqs: readonly RequestRecord[]): Phase {
  const p: Phase = { lists: 0, watches: 0, bytes: 0, byPath: {} };
  for (const r of reqs) {
    if (r.method !== 'GET') continue;
    if (r.query['watch'] === 'true' && r.query['sendInitialEvents'] !== 'true') {
      p.watches++;
      continue;
    }
    p.lists++;
    p.bytes += r.replyBytes;
    const e = (p.byPath[r.path] ??= { lists: 0, bytes: 0 });
    e.lists++;
    e.bytes += r.replyBytes;
  }
  return p;
}

const mib = (b: number): string => (b / 2 ** 20).toFixed(1);

interface Result {
  watchList: string;
  initial: Phase;
  relist: Phase;
  medianS: number;
  aborted: number;
  failures: number;
}

async function main(): Promise<void> {
  const results: Result[] = [];
  for (const wl of WATCH_LIST) results.push(await run(wl === 'on'));
  console.log(`\n${SERVICES} Services x 5 endpoints, ${REPEAT} relists after a 410 (connection closed after it)`);
  console.log('| watch-list | phase | state requests | reply MiB | s (median) | aborted handshakes | failures |');
  console.log('|---|---|---:|---:|---:|---:|---:|');
  for (const r of results) {
    console.log(`| ${r.watchList} | initial sync | ${r.initial.lists} | ${mib(r.initial.bytes)} | | | |`);
    console.log(
      `| ${r.watchList} | relist after 410 | ${r.relist.lists} | ${mib(r.relist.bytes)} | ${r.medianS.toFixed(2)} | ${r.aborted} | ${r.failures} |`,
    );
  }
  console.log(
    `client-go 1.37 (WatchListClient on by default since 1.35) would send: 4 watch-lists for the initial sync ` +
      `(sendInitialEvents=true, resourceVersion="") and 4 for the relist (resourceVersion=<last>); with the gate off, ` +
      `4 lists (resourceVersion=0, limit=500, which the watch cache ignores) and 4 for the relist ` +
      `(resourceVersion=<last>, no limit); the same objects, in protobuf (we speak JSON).`,
  );
}

async function run(watchList: boolean): Promise<Result> {
  console.log(`--- watch-list ${watchList ? 'on' : 'off'}`);
  const server = new TestApiServer({ bookmarkIntervalMs: 0, connectionClose: { afterWatch: true } });
  for (let i = 0; i < SERVICES; i++) {
    server.create('services', service(i));
    server.create('endpointslices', endpointSlice(i, 5));
  }
  server.create('nodes', benchNode());
  await server.start();
  const client = clientFor(server);
  const rec = new Recorder();
  const ac = new AbortController();
  const done = startSources({
    client,
    nodeName: BENCH_NODE,
    handlers: rec.handlers,
    signal: ac.signal,
    onEvent: rec.onEvent,
    backoff: { initialMs: 1000, maxMs: 30_000, factor: 2, jitter: 0.5 },
    watchList,
  });
  const listed = (): number => rec.events.filter((e) => e.type === 'listed').length;
  try {
    await rec.until(() => rec.events.filter((e) => e.type === 'watching').length >= 4, 'initial sync', 600_000);
    const initial = phase(server.requests);
    console.log(
      `initial sync: ${initial.lists} lists or watch-lists, ${initial.watches} watches, ${mib(initial.bytes)} MiB of state`,
    );
    const times: number[] = [];
    let relist: Phase | undefined;
    for (let r = 0; r < REPEAT; r++) {
      // Longer than a "very short watch" (1 s): the watches to be ended are healthy ones.
      await new Promise((res) => setTimeout(res, 1500));
      // Writes no source watches, then a compaction past them: each resume gets a 410 and relists.
      server.create('nodes', { ...benchNode(), metadata: { name: `other-${r}` } });
      server.compact();
      const before = server.requests.length;
      const lists = listed();
      const aborted = server.abortedHandshakes;
      const t0 = performance.now();
      server.closeWatches();
      await rec.until(() => listed() >= lists + 4, 'relist', 600_000);
      times.push((performance.now() - t0) / 1000);
      relist = phase(server.requests.slice(before));
      console.log(
        `relist ${r + 1}: ${relist.lists} lists or watch-lists (${Object.entries(relist.byPath)
          .map(([p, e]) => `${p} ${e.lists}: ${mib(e.bytes)} MiB`)
          .join(', ')}), ${mib(relist.bytes)} MiB, ${times.at(-1)!.toFixed(2)} s, ` +
          `${server.abortedHandshakes - aborted} aborted handshakes, ${client.staleRetries} requests sent again so far`,
      );
    }
    const failed = rec.events.filter((e) => e.type === 'error' || e.type === 'backoff');
    for (const e of failed) console.log(`  ${JSON.stringify(e)}`);
    return {
      watchList: watchList ? 'on' : 'off',
      initial,
      relist: relist!,
      medianS: median(times),
      aborted: server.abortedHandshakes,
      failures: failed.length,
    };
  } finally {
    ac.abort();
    await done;
    client.close();
    await server.dispose();
  }
}

runBench(main);
