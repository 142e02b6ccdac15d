// The test API server (test/apiserver) run inside a network namespace for the
// in-cluster test, laying out its credentials as the kubelet mounts a pod's
// service account: <sa-dir>/token, <sa-dir>/ca.crt, <sa-dir>/namespace.
//
//   ip netns exec <ns> node apihost.js --sa-dir D [--host 127.0.0.1] [--watch-list on|off|unknown]
//
// Prints {"ready":true,"host":...,"port":...} on stdout, then answers one JSON
// line per JSON line on stdin:
//   {"op":"create","resource":"services","object":{...}} -> {"ok":true,"object":...}
//   {"op":"requests"} -> {"ok":true,"requests":[{method,path,query}...]}
//   {"op":"openWatches"} -> {"ok":true,"openWatches":N}
// stdin closing or SIGTERM stops it.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as readline from 'node:readline';
import { parseArgs } from 'node:util';
import type { WatchListSupport } from '../apiserver/listoptions.js';
import { TestApiServer } from '../apiserver/server.js';

const { values } = parseArgs({
  options: {
    'sa-dir': { type: 'string' },
    host: { type: 'string', default: '127.0.0.1' },
    // How it treats a streaming watch-list (test/apiserver/listoptions.ts).
    'watch-list': { type: 'string', default: 'on' },
  },
});
const saDir = values['sa-dir'];
if (!saDir) throw new Error('--sa-dir is required');
const server = new TestApiServer({
  host: values.host!,
  bookmarkIntervalMs: 1000,
  watchList: values['watch-list'] as WatchListSupport,
});
await server.start();
mkdirSync(saDir, { recursive: true });
writeFileSync(join(saDir, 'token'), server.token, { mode: 0o600 });
writeFileSync(join(saDir, 'ca.crt'), server.caCert);
writeFileSync(join(saDir, 'namespace'), 'kube-system');
const port = Number(new URL(server.url).port);
process.stdout.write(JSON.stringify({ ready: true, host: server.host, port }) + '\n');

type Request = { op: 'create'; resource: string; object: object } | { op: 'requests' } | { op: 'openWatches' };

function answer(req: Request): Record<string, unknown> {
  switch (req.op) {
    case 'create':
      return { object: server.create(req.resource, req.object) };
    case 'requests':
      return { requests: server.requests };
    case 'openWatches':
      return { openWatches: server.openWatches };
  }
}

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  let out: Record<string, unknown>;
  try {
    out = { ok: true, ...answer(JSON.parse(line) as Request) };
  } catch (e) {
    out = { ok: false, error: String(e) };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
});
const shutdown = (): void => {
  void server.dispose().then(() => process.exit(0));
};
process.stdin.on('end', shutdown);
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
