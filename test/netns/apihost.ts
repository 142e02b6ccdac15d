// Runs the test API server (test/apiserver) inside the control-plane
// namespace, in-process, so an outage test can stop and restart it with the
// SAME port, CA and stored objects (the CLI would make a new CA and lose its
// state). Control on stdin, one command a line: a word (`stop`, `start`) or
// a JSON object {"id":N,"cmd":...}; each is answered with one JSON line
// {"ok":true,"id":N,...} on stdout. Commands:
//   stop | start                      outage and its end
//   fault {fault: ApiFault}           arm a fault (test/apiserver/faults.ts)
//   clearFaults                       disarm every fault
//   create {objects: [...]}           create many objects at once (Service, EndpointSlice, Node)
//   closeWatches                      end every open watch cleanly (clients re-watch)
//   compact                           drop the history: older watches and lists get 410
//   pace {chunk, delayMs}             stream later watch-lists' initial events chunk at a time, delayMs apart
//   expire                            closeWatches + a write + compact: every client must relist
//   requests {since: epochMs}         the request log from then on, and the faults fired
//   stats                             TLS handshakes completed and aborted, connections it closed
// It closes connections as real API servers and the load balancers in front
// of them do (connectionClose: after a watch ends, after 2 s idle, and after
// a tenth of the replies at random), so every suite run against it shows the
// proxy indifferent to that. --watch-list off|unknown makes it a server with
// the WatchList gate off, or one before 1.27 (test/apiserver/listoptions.ts).
// Writes <dir>/ca.crt and <dir>/kubeconfig.
//
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import * as readline from 'node:readline';
import { parseArgs } from 'node:util';
import { TestApiServer } from '../apiserver/server.js';
import type { ApiFault } from '../apiserver/faults.js';
import type { WatchListSupport } from '../apiserver/listoptions.js';

const { values } = parseArgs({
  options: {
    host: { type: 'string' },
    port: { type: 'string' },
    dir: { type: 'string' },
    token: { type: 'string' },
    'watch-list': { type: 'string', default: 'on' },
  },
});
const host = values.host!;
const server = new TestApiServer({
  host,
  port: Number(values.port),
  token: values.token,
  certHosts: [host],
  bookmarkIntervalMs: 1000,
  connectionClose: { afterWatch: true, idleMs: 2000, randomRate: 0.1 },
  watchList: values['watch-list'] as WatchListSupport,
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

const PLURALS: Record<string, string> = { Service: 'services', EndpointSlice: 'endpointslices', Node: 'nodes' };

async function command(c: Record<string, unknown>): Promise<Record<string, unknown>> {
  switch (c['cmd']) {
    case 'stop':
      await server.stop();
      return {};
    case 'start':
      await server.start();
      return {};
    case 'fault':
      server.faults.add(c['fault'] as ApiFault);
      return {};
    case 'clearFaults':
      server.faults.clear();
      return {};
    case 'create': {
      // Many objects in one step (a burst the REST round trips would spread over seconds).
      const objs = c['objects'] as Array<{ kind: string; metadata: object }>;
      for (const o of objs) {
        const { kind, apiVersion: _v, ...rest } = o as { kind: string; apiVersion?: string; metadata: object };
        server.create(PLURALS[kind] ?? kind, rest);
      }
      return { created: objs.length };
    }
    case 'closeWatches':
      server.closeWatches();
      return {};
    case 'compact':
      server.compact();
      return {};
    case 'pace':
      server.paceInitialEvents(Number(c['chunk'] ?? 0), Number(c['delayMs'] ?? 0));
      return {};
    case 'expire':
      // Close every watch, move the version on (an Event nobody watches) and drop the history, in one
      // step: every client re-watches from a version older than the history and must relist (410).
      server.closeWatches();
      server.create('events', { metadata: { namespace: 'default', name: `kpt-expire-${Date.now()}` } });
      server.compact();
      return {};
    case 'stats':
      return {
        handshakes: server.handshakes,
        abortedHandshakes: server.abortedHandshakes,
        closedByServer: server.closedByServer,
      };
    case 'requests': {
      const since = Number(c['since'] ?? 0);
      return { requests: server.requests.filter((r) => r.at >= since), fired: server.faults.fired };
    }
    default:
      throw new Error(`unknown command ${JSON.stringify(c['cmd'])}`);
  }
}

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const t = line.trim();
  let c: Record<string, unknown>;
  try {
    c = t.startsWith('{') ? (JSON.parse(t) as Record<string, unknown>) : { cmd: t };
  } catch {
    c = { cmd: t };
  }
  command(c).then(
    (extra) =>
      process.stdout.write(
        JSON.stringify({ ok: true, id: c['id'], cmd: c['cmd'], running: server.running, ...extra }) + '\n',
      ),
    (e: unknown) =>
      process.stdout.write(JSON.stringify({ ok: false, id: c['id'], cmd: c['cmd'], error: String(e) }) + '\n'),
  );
});
const shutdown = (): void => {
  void server.dispose().then(() => process.exit(0));
};
process.stdin.on('end', shutdown);
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
