// 5,000 hostile objects against the real proxy in the namespace cluster
// (iptables and nftables modes, see MODES; the fuzz tests in test/fuzz drive every
// mode's renderer with the same generators in-process). The objects come
// from the fuzz generators (test/fuzz/hostile.ts, a fixed seed): Services,
// EndpointSlices and other Nodes with invalid and non-canonical IPs, bad and
// duplicate ports, 1,000-port Services, wrong types, unicode, missing fields,
// and garbage slices naming the valid Services. Each gets a unique valid name
// (the API server would refuse others; the fuzz tests cover hostile names)
// and a spec object; the first ten keep their 1 MiB strings, later ones have
// strings cut to 8 KiB (5,000 MiB strings would be gigabytes in every proxy
// of the shared machine). Required, per mode:
//   - the proxy stays up (same process, /healthz 200, no restart);
//   - every valid Service answers throughout (probed from a pod and from
//     outside) and after, and a Service created after the flood is served;
//   - memory stays bounded (RSS growth reported and capped);
//   - the bad input is logged (bounded line length) and counted.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, NAMESPACE, service, type PortSpec } from '../netns/fixtures.js';
import { describeProbes, Prober } from '../netns/prober.js';
import { E2E_MODES, type E2EMode } from '../netns/proxy.js';
import type { KubeObject } from '../netns/kube.js';
import { memoryOf } from '../../bench/lib/cluster.js';
import { hostileAny, VALID_NS, type Json } from '../fuzz/hostile.js';

const COUNT = 5000;
const SEED = 13;
// nftables found two bugs here: syncs of 1-2.5 s ran back to back and left the intake a fraction of the
// thread (the runner now idles minInterval after a run longer than that), and hostile ClusterIPs 127.0.0.1
// made nftables reject every connection to the node's loopback (special addresses are now refused).
// ebpf and ipvs: not run here (the fuzz covers their renderers; ipvs needs the guest).
const MODES: readonly E2EMode[] = E2E_MODES.filter((m) => m === 'iptables' || m === 'nftables');
const TCP: PortSpec[] = [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }];
/** The valid Services a..f of the fuzz cluster, here real ones (a garbage slice may name any of them). */
const VALID = ['a', 'b', 'c', 'd', 'e', 'f'].map((name, i) => ({ name, ip: `10.96.70.${i + 1}` }));
const NODE_PORT = 30080; // one the hostile generators never use
// The flood's valid part is itself large: ~110k service ports without endpoints (1,000-port Services),
// whose state, chain names and remembered rules are ~1 KB a port live, and V8 keeps up to twice the live
// heap between collections. Measured growth on a 2-vCPU machine: iptables 178-207 MiB, nftables 204-251
// (5 runs each); on CI's machine an earlier build grew 36 % more than here. The cap leaves room for that,
// and still fails on growth out of proportion to the valid Services (something kept per event or per
// skipped object, or the ten 1 MiB strings kept in copies).
const RSS_GROWTH_CAP_MIB = 400;

/** The hostile objects as the API server would store them: valid unique names, a spec object. */
function hostileObjects(): KubeObject[] {
  const sample = fc.sample(hostileAny, { seed: SEED, numRuns: COUNT });
  return sample.map((h, i) => {
    const o = (i < 10 ? h.obj : cutStrings(h.obj, 8192)) as Json;
    const md = (typeof o['metadata'] === 'object' && o['metadata'] !== null ? o['metadata'] : {}) as Json;
    const labels =
      typeof md['labels'] === 'object' && md['labels'] !== null && !Array.isArray(md['labels']) ? md['labels'] : {};
    const kind = h.kind === 'service' ? 'Service' : h.kind === 'endpointslice' ? 'EndpointSlice' : 'Node';
    const meta: Json = { name: `hostile-${i}`, labels: stringValues(labels as Json) };
    if (kind !== 'Node') meta['namespace'] = NAMESPACE;
    if (kind === 'EndpointSlice') {
      // Garbage slices for the valid Services keep pointing at them; the others at a hostile Service.
      const target = (labels as Json)['kubernetes.io/service-name'];
      const svc = md['namespace'] === VALID_NS && VALID.some((v) => v.name === target) ? target : `hostile-${i % 977}`;
      (meta['labels'] as Json)['kubernetes.io/service-name'] = svc;
    }
    const out: Json = {
      ...o,
      apiVersion: kind === 'EndpointSlice' ? 'discovery.k8s.io/v1' : 'v1',
      kind,
      metadata: meta,
    };
    if (
      kind !== 'EndpointSlice' &&
      (typeof out['spec'] !== 'object' || out['spec'] === null || Array.isArray(out['spec']))
    )
      out['spec'] = {};
    return out as unknown as KubeObject;
  });
}

function cutStrings(v: unknown, max: number): unknown {
  if (typeof v === 'string') return v.length > max ? v.slice(0, max) : v;
  if (Array.isArray(v)) return v.map((x) => cutStrings(x, max));
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [cutStrings(k, max) as string, cutStrings(x, max)]));
  return v;
}

/** Label values the API server would store (strings); the rest dropped. */
function stringValues(labels: Json): Json {
  return Object.fromEntries(Object.entries(labels).filter(([k, v]) => typeof v === 'string' && k.length < 64));
}

for (const mode of MODES) {
  describe(`5,000 hostile objects (${mode})`, { concurrency: false }, () => {
    let env: E2EEnv;
    let probers: Prober[] = [];
    const report: string[] = [];

    before(async () => {
      env = await E2EEnv.start(mode);
      const pods = env.cluster.pods;
      await env.apply(
        ...VALID.flatMap((v, i) => [
          service({
            name: v.name,
            clusterIP: v.ip,
            ...(i === 3 ? { type: 'NodePort' as const } : {}),
            ports: i === 3 ? [{ ...TCP[0]!, nodePort: NODE_PORT }] : TCP,
          }),
          endpointSlice(v.name, [{ pod: pods[i % pods.length]! }, { pod: pods[(i + 1) % pods.length]! }], TCP),
        ]),
      );
      await env.waitReachable('node1-a', 'tcp', VALID[0]!.ip, 80);
      await env.waitReachable('ext', 'tcp', env.cluster.node('node1').ip, NODE_PORT);
      probers = [
        await Prober.start(env.cluster, 'node1-a', VALID[0]!.ip, 80, { intervalMs: 50, timeoutMs: 2000 }),
        await Prober.start(env.cluster, 'ext', env.cluster.node('node1').ip, NODE_PORT, {
          intervalMs: 50,
          timeoutMs: 2000,
        }),
      ];
    });

    after(async () => {
      const stats = await Promise.all(probers.map((p) => p.stop().catch(() => null)));
      stats.forEach((s, i) => s && report.push(`prober ${probers[i]!.target}: ${describeProbes(s)}`));
      for (const l of report) console.log(`hostile ${mode}: ${l}`);
      await env?.dispose();
    });

    it('the proxy stays up, every valid Service answers, memory stays bounded, the bad input is logged and counted', async () => {
      const proxy = env.proxy('node1');
      const pid = proxy.pid;
      const rss0 = memoryOf(pid).rssMiB;
      const objects = hostileObjects();
      const t0 = Date.now();
      await env.cp.createMany(objects);
      // A Service created after the flood is served: the proxy took the whole flood in and synced past it.
      await env.apply(
        service({ name: 'after-flood', clusterIP: '10.96.70.99', ports: TCP }),
        endpointSlice('after-flood', [{ pod: env.cluster.pod('node2-b') }], TCP),
      );
      const { ms } = await env.waitReachable('node1-a', 'tcp', '10.96.70.99', 80, {}, 120_000);
      const settled = Date.now() - t0;
      for (const v of VALID) await env.waitReachable('node1-a', 'tcp', v.ip, 80, {}, 10_000);
      await env.waitReachable('ext', 'tcp', env.cluster.node('node1').ip, NODE_PORT, {}, 10_000);
      await new Promise((r) => setTimeout(r, 3000));
      assert.ok(proxy.running(), `the proxy is running:\n${proxy.lastLog.slice(-4000) || proxy.log().slice(-4000)}`);
      const mem = memoryOf(pid);
      const metrics = await scrape(env, 'node1');
      const skipped = sum(metrics, 'kubeproxy_ts_input_skipped_total');
      const lines = proxy.log().split('\n');
      const longest = Math.max(...lines.map((l) => l.length));
      report.push(
        `${objects.length} objects: a Service created after them served ${settled} ms after the flood began ` +
          `(${ms} ms of polling); RSS ${rss0.toFixed(1)} -> ${mem.rssMiB.toFixed(1)} MiB (peak ${mem.hwmMiB.toFixed(1)}); ` +
          `${skipped} skips counted; longest log line ${longest} bytes`,
      );
      assert.equal(proxy.pid, pid, 'the same proxy process');
      assert.ok(proxy.running(), 'the proxy is running');
      const healthz = await (
        await env.cluster.agent('node1')
      ).http(`http://${env.cluster.node('node1').ip}:10256/healthz`, 3000);
      assert.equal(healthz.status, 200, `healthz: ${JSON.stringify(healthz)}`);
      assert.ok(mem.rssMiB - rss0 < RSS_GROWTH_CAP_MIB, `RSS grew ${(mem.rssMiB - rss0).toFixed(1)} MiB`);
      assert.ok(skipped > 0, 'the bad input is counted');
      assert.match(proxy.log(), /skipping invalid object/);
      assert.ok(longest < 16_384, `a log line of ${longest} bytes`);
      const stats = await Promise.all(probers.map((p) => p.stats()));
      assert.equal(
        stats.reduce((n, s) => n + s.failed, 0),
        0,
        `valid Services answered throughout: ${stats.map(describeProbes).join('; ')}`,
      );
    });
  });
}

async function scrape(env: E2EEnv, node: string): Promise<string> {
  const r = await (await env.cluster.agent(node)).http('http://127.0.0.1:10249/metrics', 5000);
  if (r.status !== 200) throw new Error(`metrics of ${node}: ${JSON.stringify(r).slice(0, 300)}`);
  return r.body ?? '';
}

function sum(text: string, name: string): number {
  let n = 0;
  for (const line of text.split('\n')) if (line.startsWith(name)) n += Number(line.slice(line.lastIndexOf(' ') + 1));
  return n;
}
