// Early syncs (src/engine/earlystart.ts) on the real kernel, in the modes that
// offer them (nftables, ebpf): node2's proxy is stopped and its datapath
// removed with --cleanup, 1,200 Services are added, and the API server is
// made to stream a watch-list's initial events slowly (30 every 100 ms, so
// each list takes about 4 s). The proxy started again on its empty datapath
// must:
//   - make the first Service of the list answer through its ClusterIP while
//     /healthz still says it is not synced (asked before each connection, so
//     a 503 seen before a success means the success came first);
//   - log that it programmed the Services seen so far;
//   - once healthy, hold exactly what a start without early syncs would write
//     (`kube-proxy-ts diff` with its flags: no changes).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, NAMESPACE, service, webPorts } from '../netns/fixtures.js';
import type { KubeObject } from '../netns/kube.js';
import { E2E_MODES, HEALTHZ_PORT, proxyArgv } from '../netns/proxy.js';
import { nsRun } from '../netns/spawn.js';

const FILLERS = 1200;
const PROBE_IP = '10.96.70.10';

/** A Service with one made-up endpoint (never connected to): what makes the lists long. */
function filler(i: number): KubeObject[] {
  const name = `fill-${String(i).padStart(4, '0')}`;
  const ip = (base: number) => `10.${base}.${Math.floor(i / 250)}.${(i % 250) + 1}`;
  const ports = [{ name: 'tcp', port: 80, targetPort: 8080, protocol: 'TCP' as const }];
  const svc = service({ name, clusterIP: ip(97), ports });
  const slice: KubeObject = {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${name}-1`, namespace: NAMESPACE, labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    endpoints: [{ addresses: [ip(251)], conditions: { ready: true } }],
    ports: [{ name: 'tcp', port: 8080, protocol: 'TCP' }],
  };
  return [svc, slice];
}

for (const mode of ['nftables', 'ebpf'] as const) {
  if (!E2E_MODES.includes(mode)) continue;
  describe(`early syncs on an empty datapath (${mode})`, { concurrency: false }, () => {
    let env: E2EEnv;
    before(async () => {
      env = await E2EEnv.start(mode, { proxyArgs: [] });
    });
    after(async () => {
      await env?.cp.paceInitialEvents(0, 0).catch(() => {});
      await env?.dispose();
    });

    it('answers for the first Services while the lists still come in, and ends where a plain start would', async () => {
      const p = env.proxy('node2');
      await p.stop();
      const c = await p.cleanup();
      assert.equal(c.code, 0, c.output);
      const pods = [env.cluster.pod('node1-a'), env.cluster.pod('node2-a')];
      // First in the store, so first in the stream.
      await env.cp.createMany([
        service({ name: 'aaa-early', clusterIP: PROBE_IP, ports: webPorts() }),
        endpointSlice(
          'aaa-early',
          pods.map((pod) => ({ pod })),
          webPorts(),
        ),
      ]);
      const objs: KubeObject[] = [];
      for (let i = 0; i < FILLERS; i++) objs.push(...filler(i));
      await env.cp.createMany(objs);
      await env.cp.paceInitialEvents(30, 100);

      const node = env.cluster.node('node2');
      const agent = await env.cluster.agent('node2');
      const mark = p.logMark();
      const t0 = Date.now();
      await p.spawn();
      let answeredAt = -1;
      let unhealthySeen = false;
      for (let i = 0; i < 300 && answeredAt < 0; i++) {
        const h = await agent.http(`http://${node.ip}:${HEALTHZ_PORT}/healthz`, 1000);
        const r = await env.send('node2-a', 'tcp', PROBE_IP, 80, { timeoutMs: 300 });
        if (r.ok) {
          answeredAt = Date.now() - t0;
          unhealthySeen = h.status !== 200;
        }
        await new Promise((res) => setTimeout(res, 100));
      }
      assert.ok(answeredAt >= 0, `the first Service never answered:\n${p.logSince(mark)}`);
      assert.ok(unhealthySeen, `answered only once healthy (${answeredAt} ms):\n${p.logSince(mark)}`);
      await p.waitHealthy(60_000);
      const healthyAt = Date.now() - t0;
      const log = p.logSince(mark);
      assert.match(log, /Programmed the Services seen so far/);
      console.log(`# ${mode}: first Service answered after ${answeredAt} ms, healthy after ${healthyAt} ms`);

      // Everything in place, as a start without early syncs would have written it.
      const argv = [...proxyArgv(), 'diff', ...p.flags()];
      const bpf = p.bpfNode;
      const d = bpf ? await bpf.exec(argv, { allowFailure: true }) : await nsRun(node.ns, argv, { allowFailure: true });
      assert.equal(d.code, 0, `${d.stdout}\n${d.stderr}`);
      assert.match(d.stdout, new RegExp(`# ${mode} IPv4: no changes`));
    });
  });
}
