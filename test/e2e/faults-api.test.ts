// API-server faults against the real proxy in the namespace cluster, with a
// stable Service probed throughout (from a pod to its ClusterIP through
// node2's rules, and from outside to its NodePort through node1's):
//   - a black hole: every packet to and from the API server dropped for
//     longer than the proxy's dead-connection detection, then the path
//     returns; a change made after that must be applied within 10 s;
//   - 500s on every request, 429s with Retry-After, a list stalled mid-body
//     (during a relist after 410), and very slow replies.
// Stable Services must never stop serving, and nothing outside the proxy's
// own rules may change (foreign-state dumps before and after).
// The API client is the same in every mode, so this runs in iptables mode.
// The API server here refuses the streaming watch-list (its WatchList gate
// off), so every relist is a list, as the stalled-list case needs; the
// other suites run against one that offers it.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { dumpAllForeign, foreignDiff, plantForeignState } from '../netns/foreign.js';
import { describeProbes, Prober } from '../netns/prober.js';
import { nsRun } from '../netns/spawn.js';
import { API_PORT } from '../netns/topology.js';
import type { RequestRecord } from '../apiserver/server.js';

const STABLE_IP = '10.96.50.10';
const STABLE_NODEPORT = 30500;

describe('API server faults: the proxy keeps serving and recovers on its own', { concurrency: false }, () => {
  let env: E2EEnv;
  let probers: Prober[] = [];
  let foreignBefore: Map<string, string>;
  const report: string[] = [];

  before(async () => {
    env = await E2EEnv.start('iptables', {
      apiWatchList: 'off',
      beforeProxies: async (c) => {
        for (const n of c.nodes) await plantForeignState(n.ns);
      },
    });
    const pods = env.cluster.pods;
    await env.apply(
      service({ name: 'stable', clusterIP: STABLE_IP, type: 'NodePort', ports: webPorts(STABLE_NODEPORT) }),
      endpointSlice('stable', [{ pod: pods[0]! }, { pod: pods[pods.length - 1]! }], webPorts()),
    );
    await env.waitReachable('node2-b', 'tcp', STABLE_IP, 80);
    await env.waitReachable('ext', 'tcp', env.cluster.nodes[0]!.ip, STABLE_NODEPORT);
    foreignBefore = await dumpAllForeign(env.cluster.namespaces());
    probers = [
      await Prober.start(env.cluster, 'node2-b', STABLE_IP, 80, { intervalMs: 50, timeoutMs: 2000 }),
      await Prober.start(env.cluster, 'ext', env.cluster.nodes[0]!.ip, STABLE_NODEPORT, {
        intervalMs: 50,
        timeoutMs: 2000,
      }),
    ];
  });

  after(async () => {
    const stats = await Promise.all(probers.map((p) => p.stop().catch(() => null)));
    const foreignAfter = env ? await dumpAllForeign(env.cluster.namespaces()).catch(() => null) : null;
    for (const line of report) console.log(`faults-api: ${line}`);
    await env?.dispose();
    stats.forEach((s, i) => {
      if (!s) return;
      console.log(`faults-api: prober ${probers[i]!.from} -> ${probers[i]!.target}: ${describeProbes(s)}`);
      assert.equal(s.failed, 0, `stable Service failed probes: ${describeProbes(s)}`);
      assert.ok(s.answered > 100, `the prober ran: ${describeProbes(s)}`);
    });
    if (foreignAfter) assert.equal(foreignDiff(foreignBefore, foreignAfter), '', 'foreign state changed');
  });

  /** Probe failures so far (checked after each fault, so a failure is attributed to it). */
  async function failedProbes(): Promise<number> {
    const s = await Promise.all(probers.map((p) => p.stats()));
    return s.reduce((n, x) => n + x.failed, 0);
  }

  /** A new Service backed by a node1 pod; resolves with the ms until it answers from node2-a. */
  async function changeApplied(name: string, ip: string, timeoutMs = 20_000): Promise<number> {
    const t0 = Date.now();
    await env.apply(
      service({ name, clusterIP: ip, ports: webPorts() }),
      endpointSlice(name, [{ pod: env.cluster.pod('node1-b') }], webPorts()),
    );
    await env.waitReachable('node2-a', 'tcp', ip, 80, {}, timeoutMs);
    return Date.now() - t0;
  }

  const cpNs = (): string => env.cluster.controlPlane.ns;
  const blackHole = (op: '-I' | '-D'): Promise<unknown> =>
    Promise.all([
      nsRun(cpNs(), ['iptables', op, 'INPUT', '-i', 'eth0', '-p', 'tcp', '--dport', String(API_PORT), '-j', 'DROP']),
      nsRun(cpNs(), ['iptables', op, 'OUTPUT', '-o', 'eth0', '-p', 'tcp', '--sport', String(API_PORT), '-j', 'DROP']),
    ]);

  it('black hole: dead watches are noticed without the server, and a change after the path returns is applied within 10 s', async () => {
    const failed0 = await failedProbes();
    const logMark = env.proxy('node2').logMark();
    await blackHole('-I');
    try {
      // Longer than keepalive needs (10 s idle + 10 probes 1 s apart) and than a connect timeout:
      // the watches die and the reconnects hit the black hole too.
      await new Promise((r) => setTimeout(r, 30_000));
      const during = env.proxy('node2').logSince(logMark);
      assert.match(during, /"phase":"watch".*(ETIMEDOUT|timed out)/, 'the watches noticed the dead path by themselves');
    } finally {
      await blackHole('-D');
    }
    const ms = await changeApplied('after-hole', '10.96.50.20');
    report.push(`black hole 30 s: change after the path returned applied in ${ms} ms`);
    assert.ok(ms <= 10_000, `applied ${ms} ms after the path returned (target 10 s)`);
    assert.equal(await failedProbes(), failed0, 'stable Service probes failed during the black hole');
  });

  it('500s on every request: the proxy backs off (no request storm) and resumes when they stop', async () => {
    const failed0 = await failedProbes();
    const t0 = Date.now();
    await env.cp.injectFault({ kind: 'status', code: 500 });
    try {
      await env.cp.closeWatches(); // every reflector must come back and meet the 500s
      await new Promise((r) => setTimeout(r, 6000));
    } finally {
      await env.cp.clearFaults();
    }
    const { requests, fired } = await env.cp.requests(t0);
    const during = requests.filter((r) => r.at < t0 + 6000);
    report.push(`500s for 6 s: ${fired['status']} refused, ${during.length} requests from 2 proxies`);
    // 2 proxies x 4 resources, backoff from 200 ms doubling: ~6 tries each in 6 s. A client without
    // backoff would send hundreds.
    assert.ok(during.length <= 2 * 4 * 10, `${during.length} requests in 6 s of 500s`);
    assert.ok((fired['status'] ?? 0) >= 8, 'every reflector met the 500s');
    const ms = await changeApplied('after-500s', '10.96.50.21');
    report.push(`500s: change after they stopped applied in ${ms} ms`);
    assert.equal(await failedProbes(), failed0);
  });

  it('429 with Retry-After: the next attempt waits at least Retry-After', async () => {
    const failed0 = await failedProbes();
    const t0 = Date.now();
    // One 429 per re-watch of each reflector of both proxies (2 x 4).
    await env.cp.injectFault({ kind: 'status', code: 429, retryAfterSeconds: 3, verb: 'watch', times: 8 });
    await env.cp.closeWatches();
    const ms = await changeApplied('after-429', '10.96.50.22');
    // The change needs only the Service watches back; the other reflectors' retries may come a moment later
    // (each re-watches on its own 100-200 ms backoff before its 429), so wait for them, bounded.
    let seen: number[] = [];
    const { value: gaps } = await env.waitFor(
      'a retry after at least 4 of the 429s',
      async () => {
        const { requests } = await env.cp.requests(t0);
        seen = retryGaps(requests.filter((r) => r.query['watch'] === 'true'));
        return seen.length >= 4 ? seen : undefined;
      },
      10_000,
      () => `retries after the 429s seen: ${seen.length}`,
    );
    report.push(`429 Retry-After 3 s: waits before the retry ${gaps.map((g) => `${g} ms`).join(', ')}`);
    assert.ok(
      gaps.every((g) => g >= 2900),
      `every retry waited Retry-After (3 s; backoff alone: 100-200 ms): ${gaps}`,
    );
    report.push(`429: change made with the 429s armed applied in ${ms} ms`);
    assert.equal(await failedProbes(), failed0);
  });

  it('a list stalled mid-body (relist after 410) is abandoned and retried; state is kept meanwhile', async () => {
    const failed0 = await failedProbes();
    const logMark = env.proxy('node2').logMark();
    await env.cp.injectFault({ kind: 'stall', verb: 'list', resource: 'services', times: 2 });
    await env.cp.expireWatches(); // re-watch from an expired version: 410, relist, stalled list
    const ms = await changeApplied('after-stall', '10.96.50.23', 30_000);
    report.push(`stalled list: a change made at the stall applied in ${ms} ms`);
    const log = env.proxy('node2').logSince(logMark);
    assert.match(log, /"phase":"list".*stalled/, 'the stalled list was abandoned by its body deadline');
    assert.equal(await failedProbes(), failed0);
  });

  it('the API server saw no TLS handshake opened and dropped, through every fault so far', async () => {
    const api = await env.cp.stats();
    report.push(
      `API host: ${api.handshakes} handshakes, ${api.closedByServer} connections it closed, ${api.abortedHandshakes} aborted`,
    );
    assert.ok(api.closedByServer > 0, 'it closed connections (after watches, idle, at random)');
    assert.equal(api.abortedHandshakes, 0);
  });

  it('very slow replies (2 s each): the proxy waits for them and converges', async () => {
    const failed0 = await failedProbes();
    await env.cp.injectFault({ kind: 'delay', delayMs: 2000 });
    try {
      await env.cp.closeWatches();
      const ms = await changeApplied('while-slow', '10.96.50.24', 30_000);
      report.push(`2 s replies: change applied in ${ms} ms`);
    } finally {
      await env.cp.clearFaults();
    }
    assert.equal(await failedProbes(), failed0);
    for (const n of env.cluster.nodes) assert.ok(env.proxy(n.name).running(), `proxy on ${n.name} is up`);
  });
});

/**
 * For each client address + path that got a 429, the time to its next request there
 * (the server records no status per request: a 429 is the first watch
 * request after the fault was armed from that client for that path).
 */
function retryGaps(watches: readonly RequestRecord[]): number[] {
  const byKey = new Map<string, RequestRecord[]>();
  for (const r of watches) {
    const k = `${r.remote} ${r.path}`;
    byKey.set(k, [...(byKey.get(k) ?? []), r]);
  }
  const gaps: number[] = [];
  for (const rs of byKey.values()) if (rs.length >= 2) gaps.push(rs[1]!.at - rs[0]!.at);
  return gaps;
}
