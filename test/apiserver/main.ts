// The test API server as a process, so the proxy under test can run elsewhere
// (another process, another network namespace) and tests drive the server
// through its REST API with the token, as kubectl would.
//
//   node dist/test/apiserver/main.js --listen 127.0.0.1:0 --dir /tmp/x [--token T]
//     [--bookmark-interval 1s] [--cert-host 10.0.0.1] [--no-servicecidrs]
//
// It writes <dir>/ca.crt, <dir>/token and <dir>/kubeconfig (token auth, CA by
// path), then prints one JSON line {"ready":true,"url":...,"kubeconfig":...} on
// stdout. SIGINT/SIGTERM stop it.

import { writeFileSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { TestApiServer } from './server.js';
import { RESOURCES } from './resources.js';

function parseDuration(s: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(s);
  if (!m) throw new Error(`bad duration ${s}`);
  const n = Number(m[1]);
  return m[2] === 'ms' ? n : m[2] === 'm' ? n * 60_000 : n * 1000;
}

function parseListen(s: string): { host: string; port: number } {
  const m = /^\[?([^\]]*?)\]?:(\d+)$/.exec(s);
  if (!m) throw new Error(`bad --listen ${s}, want host:port`);
  return { host: m[1]!, port: Number(m[2]) };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      listen: { type: 'string', default: '127.0.0.1:0' },
      token: { type: 'string' },
      dir: { type: 'string' },
      'bookmark-interval': { type: 'string', default: '1s' },
      'cert-host': { type: 'string', multiple: true, default: [] },
      'no-servicecidrs': { type: 'boolean', default: false },
    },
  });
  if (!values.dir) throw new Error('--dir is required');
  const dir = resolve(values.dir);
  const { host, port } = parseListen(values.listen!);
  const server = new TestApiServer({
    host,
    port,
    token: values.token,
    bookmarkIntervalMs: parseDuration(values['bookmark-interval']!),
    certHosts: values['cert-host'],
    resources: RESOURCES.map((r) => r.plural).filter((p) => !(values['no-servicecidrs'] && p === 'servicecidrs')),
  });
  await server.start();
  mkdirSync(dir, { recursive: true });
  const caPath = join(dir, 'ca.crt');
  writeFileSync(caPath, server.caCert);
  writeFileSync(join(dir, 'token'), server.token, { mode: 0o600 });
  const kc = JSON.parse(server.kubeconfig()) as { clusters: Array<{ cluster: Record<string, string> }> };
  const cluster = kc.clusters[0]!.cluster;
  delete cluster['certificate-authority-data'];
  cluster['certificate-authority'] = caPath;
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, JSON.stringify(kc, null, 2), { mode: 0o600 });
  process.stdout.write(JSON.stringify({ ready: true, url: server.url, kubeconfig, token: server.token }) + '\n');

  const shutdown = (): void => {
    void server.dispose().then(() => process.exit(0));
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

main().catch((err: unknown) => {
  process.stderr.write(`apiserver: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
