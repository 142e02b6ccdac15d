// Runs the test API server (test/apiserver) inside the control-plane
// namespace, in-process, so an outage test can stop and restart it with the
// SAME port, CA and stored objects (the CLI would make a new CA and lose its
// state). Control on stdin, one word a line: `stop` / `start`, each answered
// with {"ok":true,...} on stdout. Writes <dir>/ca.crt and <dir>/kubeconfig.
//
//   ip netns exec <cp> node apihost.js --host 192.168.77.2 --port 6443 --dir D --token T
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import * as readline from 'node:readline';
import { parseArgs } from 'node:util';
import { TestApiServer } from '../apiserver/server.js';

const { values } = parseArgs({
  options: { host: { type: 'string' }, port: { type: 'string' }, dir: { type: 'string' }, token: { type: 'string' } },
});
const host = values.host!;
const server = new TestApiServer({
  host,
  port: Number(values.port),
  token: values.token,
  certHosts: [host],
  bookmarkIntervalMs: 1000,
});
await server.start();
const dir = values.dir!;
mkdirSync(dir, { recursive: true });
const caPath = join(dir, 'ca.crt');
writeFileSync(caPath, server.caCert);
const kc = JSON.parse(server.kubeconfig()) as { clusters: Array<{ cluster: Record<string, string> }> };
const cluster = kc.clusters[0]!.cluster;
delete cluster['certificate-authority-data'];
cluster['certificate-authority'] = caPath;
const kubeconfig = join(dir, 'kubeconfig');
writeFileSync(kubeconfig, JSON.stringify(kc, null, 2), { mode: 0o600 });
process.stdout.write(
  JSON.stringify({ ok: true, ready: true, url: server.url, kubeconfig, token: server.token }) + '\n',
);

readline.createInterface({ input: process.stdin }).on('line', (cmd) => {
  const act =
    cmd.trim() === 'stop'
      ? server.stop()
      : cmd.trim() === 'start'
        ? server.start()
        : Promise.reject(new Error(`unknown ${cmd}`));
  act.then(
    () => process.stdout.write(JSON.stringify({ ok: true, cmd, running: server.running }) + '\n'),
    (e: unknown) => process.stdout.write(JSON.stringify({ ok: false, cmd, error: String(e) }) + '\n'),
  );
});
const shutdown = (): void => {
  void server.dispose().then(() => process.exit(0));
};
process.stdin.on('end', shutdown);
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
