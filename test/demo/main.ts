// The demo (scripts/demo): build a two-node cluster of network namespaces,
// start the test API server and one kube-proxy-ts per node, create a few
// Services, send real traffic and print which endpoint served each request
// and which source IP it saw. Exits 1 if any request was not handled the
// way kube-proxy must handle it; everything is removed at the end (also on
// Ctrl-C: test/netns/cleanup.ts).
//
//   node dist/test/demo/main.js [--mode iptables|nftables]
import { parseArgs } from 'node:util';
import type { ClientResult } from '../netns/agentclient.js';
import { E2EEnv, srcIP } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { ALL_E2E_MODES, type E2EMode } from '../netns/proxy.js';

interface Row {
  readonly request: string;
  readonly path: string;
  readonly result: ClientResult | { ok: boolean; status?: number; body?: string; error?: string; http: true };
  readonly expect: string;
  readonly pass: boolean;
}

function servedBy(r: Row['result']): string {
  if ('http' in r) return r.ok ? `HTTP ${r.status}` : `(${r.error})`;
  return r.ok ? r.reply.pod : `(${r.error})`;
}
function seenSrc(r: Row['result']): string {
  if ('http' in r)
    return r.ok ? `localEndpoints=${(JSON.parse(r.body ?? '{}') as { localEndpoints?: number }).localEndpoints}` : '';
  return r.ok ? srcIP(r.reply) : '';
}

function printTable(rows: readonly Row[]): void {
  const head = ['#', 'request', 'path', 'served by', 'source IP seen', 'expected', ''];
  const cells = rows.map((r, i) => [
    String(i + 1),
    r.request,
    r.path,
    servedBy(r.result),
    seenSrc(r.result),
    r.expect,
    r.pass ? 'ok' : 'FAIL',
  ]);
  const widths = head.map((h, c) => Math.max(h.length, ...cells.map((row) => row[c]!.length)));
  const line = (row: string[]): string =>
    row
      .map((v, c) => v.padEnd(widths[c]!))
      .join('  ')
      .trimEnd();
  console.log(line(head));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of cells) console.log(line(row));
}

async function demo(mode: E2EMode): Promise<boolean> {
  const t0 = Date.now();
  const step = (msg: string): void => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${msg}`);
  step(`building a two-node cluster of network namespaces; proxy mode ${mode}`);
  const env = await E2EEnv.start(mode);
  try {
    const c = env.cluster;
    const [node1, node2] = [c.node('node1'), c.node('node2')];
    const ext = c.external;
    step(
      `cluster up: ${c.nodes.map((n) => `${n.name} ${n.ip} (pods ${n.pods.map((p) => `${p.name} ${p.ip}`).join(', ')})`).join('; ')}; external client ${ext.ip}`,
    );
    step('kube-proxy-ts is healthy on both nodes; creating Services');
    const pod = (n: string) => ({ pod: c.pod(n) });
    const npPorts = webPorts(30080);
    const localPorts = webPorts(30280);
    await env.apply(
      service({ name: 'web', clusterIP: '10.96.0.10', ports: webPorts() }),
      endpointSlice('web', [pod('node1-a'), pod('node2-a')], webPorts()),
      service({ name: 'web-nodeport', type: 'NodePort', clusterIP: '10.96.0.11', ports: npPorts }),
      endpointSlice('web-nodeport', [pod('node1-b'), pod('node2-b')], npPorts),
      service({
        name: 'web-local',
        type: 'LoadBalancer',
        clusterIP: '10.96.0.12',
        ports: localPorts,
        externalTrafficPolicy: 'Local',
        healthCheckNodePort: 32100,
      }),
      endpointSlice('web-local', [pod('node2-a')], localPorts),
      service({ name: 'no-endpoints', clusterIP: '10.96.0.13', ports: webPorts() }),
    );
    const conv = await env.waitReachable('node1-b', 'tcp', '10.96.0.10', 80);
    await env.waitReachable('ext', 'tcp', node2.ip, 30280);
    step(`Services programmed (first one answered ${conv.ms} ms after creation); sending traffic`);

    const rows: Row[] = [];
    const add = async (
      request: string,
      path: string,
      expect: string,
      run: () => Promise<Row['result']>,
      ok: (r: Row['result']) => boolean,
    ): Promise<void> => {
      const result = await run();
      rows.push({ request, path, result, expect, pass: ok(result) });
    };
    const isPod = (r: Row['result'], pods: string[], src?: string): boolean =>
      !('http' in r) && r.ok && pods.includes(r.reply.pod) && (src === undefined || srcIP(r.reply) === src);
    const masqueraded = (r: Row['result'], pods: string[]): boolean =>
      isPod(r, pods) && !('http' in r) && r.ok && srcIP(r.reply) !== ext.ip;

    for (let i = 0; i < 4; i++) {
      await add(
        'pod node1-b -> web ClusterIP 10.96.0.10:80/TCP',
        'ClusterIP',
        'node1-a|node2-a, pod IP',
        () => env.send('node1-b', 'tcp', '10.96.0.10', 80),
        (r) => isPod(r, ['node1-a', 'node2-a'], c.pod('node1-b').ip),
      );
    }
    await add(
      'pod node2-b -> web ClusterIP 10.96.0.10:53/UDP',
      'ClusterIP',
      'node1-a|node2-a, pod IP',
      () => env.send('node2-b', 'udp', '10.96.0.10', 53),
      (r) => isPod(r, ['node1-a', 'node2-a'], c.pod('node2-b').ip),
    );
    for (let i = 0; i < 3; i++) {
      await add(
        `external -> node1 ${node1.ip}:30080/TCP`,
        'NodePort',
        'node1-b|node2-b, SNAT',
        () => env.send('ext', 'tcp', node1.ip, 30080),
        (r) => masqueraded(r, ['node1-b', 'node2-b']),
      );
    }
    for (let i = 0; i < 2; i++) {
      await add(
        `external -> node2 ${node2.ip}:30280/TCP`,
        'LB NodePort, eTP=Local',
        'node2-a, client IP',
        () => env.send('ext', 'tcp', node2.ip, 30280),
        (r) => isPod(r, ['node2-a'], ext.ip),
      );
    }
    await add(
      `external -> node1 ${node1.ip}:30280/TCP`,
      'LB NodePort, eTP=Local',
      'dropped (no local ep)',
      () => env.send('ext', 'tcp', node1.ip, 30280, { timeoutMs: 1000 }),
      (r) => !r.ok && r.error === 'ETIMEDOUT',
    );
    const extAgent = await c.agent('ext');
    for (const n of [node2, node1]) {
      const code = n === node2 ? 200 : 503;
      await add(
        `external -> ${n.name} health check :32100`,
        'healthCheckNodePort',
        `HTTP ${code}`,
        async () => ({ ...(await extAgent.http(`http://${n.ip}:32100/`)), http: true as const }),
        (r) => 'http' in r && r.status === code,
      );
    }
    await add(
      'pod node1-a -> no-endpoints 10.96.0.13:80/TCP',
      'ClusterIP, no endpoints',
      'refused (REJECT)',
      () => env.send('node1-a', 'tcp', '10.96.0.13', 80, { timeoutMs: 3000 }),
      (r) => !r.ok && r.error === 'ECONNREFUSED',
    );

    console.log('');
    printTable(rows);
    console.log('');
    const failed = rows.filter((r) => !r.pass).length;
    const servedPods = new Set(rows.flatMap((r) => ('http' in r.result || !r.result.ok ? [] : [r.result.reply.pod])));
    step(
      `${rows.length - failed}/${rows.length} requests handled as expected; endpoints that served traffic: ${[...servedPods].sort().join(', ')}`,
    );
    if (failed) console.log(env.proxyLogs());
    return failed === 0;
  } finally {
    await env.dispose();
    step('cleaned up: every namespace and process removed');
  }
}

const { values } = parseArgs({ options: { mode: { type: 'string', default: 'iptables' } } });
const mode = values.mode as E2EMode;
if (!(ALL_E2E_MODES as readonly string[]).includes(mode)) {
  console.error(`demo: --mode must be one of ${ALL_E2E_MODES.join(', ')}`);
  process.exit(2);
}
if (process.getuid?.() !== 0) {
  console.error('demo: needs root (it creates network namespaces)');
  process.exit(2);
}
demo(mode).then(
  (ok) => {
    console.log(ok ? 'demo: PASS' : 'demo: FAIL');
    process.exit(ok ? 0 : 1);
  },
  (err: unknown) => {
    console.error(`demo: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(1);
  },
);
