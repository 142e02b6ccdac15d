// Faults in the kernel state and in our own tools, per mode, against the
// real proxy in the namespace cluster, with a stable Service probed
// throughout through node1 (from its pod to the ClusterIP, from outside to
// the NodePort), where every fault happens:
//   - rules wiped by another actor (iptables: `iptables -t nat -F`, and
//     KUBE-SERVICES deleted with its jumps: repaired within the sync period,
//     5 s here; nftables: `nft delete table ip kube-proxy`, seen by the
//     nf_tables monitor and repaired within 5 s); the probes that fail while
//     the rules are gone are counted and reported, and the repair time is
//     measured;
//   - our own tools failing once (a one-shot fault hook, src/platform/faults.ts:
//     iptables: iptables-restore; nftables: the nf_tables netlink batch; ebpf:
//     a BPF map write): the next
//     sync is full and succeeds, the mode's failure metric counts each
//     failure, and no probe fails;
//   - SIGKILL in the middle of a sync (the first, full sync of a restarted
//     proxy, killed while its iptables-restore child runs, or, for
//     nftables and ebpf, which sync in-process, while a pause fault holds it): the
//     next start repairs everything (`kube-proxy-ts diff` finds nothing to
//     change), and no probe fails.
// The wipes run last: the un-NATed conntrack entries a rule gap leaves can
// fail later connections that reuse their ports, so every probe failure after
// the first wipe is the wipes'. The cases before them require none.
// In every case, foreign state (other tables, chains, sets, interfaces,
// routes, rules) is identical before and after.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts, type PortSpec } from '../netns/fixtures.js';
import { dumpAllForeign, foreignDiff, plantForeignState } from '../netns/foreign.js';
import { describeProbes, Prober } from '../netns/prober.js';
import { E2E_MODES, proxyArgv, type E2EMode, type ProxyProcess } from '../netns/proxy.js';
import { nsRun } from '../netns/spawn.js';
import { run } from '../../src/platform/exec.js';

const STABLE_IP = '10.96.60.10';
const STABLE_NODEPORT = 30600;
const SYNC_PERIOD_S = 5;
const TCP_ONLY: PortSpec[] = [{ name: 'tcp', port: 80, targetPort: 8080, protocol: 'TCP' }];

/** What each mode is put through. */
interface ModePlan {
  /** Another actor's commands that remove our state in node1, and what they are called in the report. */
  readonly wipes: ReadonlyArray<{ readonly name: string; readonly commands: string[][] }>;
  /** The repair deadline after a wipe (default twice the sync period). */
  readonly repairWithinMs?: number;
  /** Fault points armed together for the tool-failure case (each fires once). */
  readonly toolFaults: readonly string[];
  /** The failure counter of the mode (upstream's name), counting each failed sync. */
  readonly failureMetric: string;
  /**
   * How the proxy is caught in the middle of its first sync: while one of
   * these commands (as /proc comm shows them, 15 chars) runs as its child, or,
   * for a mode that syncs in-process, while a `pause` fault holds the sync at
   * this fault point.
   */
  readonly midSync: { readonly tools: readonly string[] } | { readonly pauseAt: string };
}

const PLANS: Partial<Record<E2EMode, ModePlan>> = {
  iptables: {
    wipes: [
      { name: 'iptables -t nat -F', commands: [['iptables', '-t', 'nat', '-F']] },
      {
        name: 'KUBE-SERVICES deleted (jumps removed, chain flushed and deleted)',
        commands: [
          ['iptables', '-t', 'nat', '-D', 'PREROUTING', ...portalsJump()],
          ['iptables', '-t', 'nat', '-D', 'OUTPUT', ...portalsJump()],
          ['iptables', '-t', 'nat', '-F', 'KUBE-SERVICES'],
          ['iptables', '-t', 'nat', '-X', 'KUBE-SERVICES'],
        ],
      },
    ],
    toolFaults: ['exec-iptables-restore'],
    failureMetric: 'kubeproxy_sync_proxy_rules_iptables_restore_failures_total',
    midSync: { tools: ['iptables-restor'] },
  },
  nftables: {
    // The nf_tables monitor (src/platform/nftables/monitor.ts) sees the deletion at once: repaired within 5 s.
    wipes: [{ name: 'nft delete table ip kube-proxy', commands: [['nft', 'delete', 'table', 'ip', 'kube-proxy']] }],
    repairWithinMs: 5000,
    // Every sync is one nf_tables netlink batch (no nft process on the sync path).
    toolFaults: ['netlink-netfilter'],
    failureMetric: 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total',
    // The first netlink send of the first sync (its read-back of the table) waits; the kill lands there.
    midSync: { pauseAt: 'netlink-netfilter' },
  },
  ebpf: {
    wipes: [],
    // A map write fails (nothing else in a sync can: the mode runs no tool and writes no netfilter state).
    toolFaults: ['bpf-maps'],
    failureMetric: 'kubeproxy_ts_sync_failures_total',
    // The first map write of the restarted proxy's first sync (the new Services' entries) waits; the kill lands there.
    midSync: { pauseAt: 'bpf-maps' },
  },
};

function portalsJump(): string[] {
  return ['-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES'];
}

for (const mode of E2E_MODES) {
  const plan = PLANS[mode];
  if (!plan) continue;
  describe(`faults in the rules and in our tools (${mode})`, { concurrency: false }, () => {
    let env: E2EEnv;
    let faultRoot = '';
    let probers: Prober[] = [];
    let baseline: Map<string, string>;
    let wipeWindowFailures = 0;
    const report: string[] = [];

    before(async () => {
      faultRoot = mkdtempSync(join(tmpdir(), 'kpt-faults-'));
      env = await E2EEnv.start(mode, {
        proxyArgs: ['--iptables-sync-period', `${SYNC_PERIOD_S}s`],
        beforeProxies: async (c) => {
          for (const n of c.nodes) await plantForeignState(n.ns);
        },
        proxyEnv: (n) => {
          mkdirSync(join(faultRoot, n.name), { recursive: true });
          return { KPT_FAULT_DIR: join(faultRoot, n.name) };
        },
      });
      const pods = env.cluster.pods;
      await env.apply(
        service({ name: 'stable', clusterIP: STABLE_IP, type: 'NodePort', ports: webPorts(STABLE_NODEPORT) }),
        endpointSlice('stable', [{ pod: pods[1]! }, { pod: pods[pods.length - 1]! }], webPorts()),
      );
      await env.waitReachable('node1-a', 'tcp', STABLE_IP, 80);
      await env.waitReachable('ext', 'tcp', node1().ip, STABLE_NODEPORT);
      baseline = await dumpAllForeign(env.cluster.namespaces());
      probers = [
        await Prober.start(env.cluster, 'node1-a', STABLE_IP, 80, { intervalMs: 50, timeoutMs: 2000 }),
        await Prober.start(env.cluster, 'ext', node1().ip, STABLE_NODEPORT, { intervalMs: 50, timeoutMs: 2000 }),
      ];
    });

    after(async () => {
      const stats = await Promise.all(probers.map((p) => p.stop().catch(() => null)));
      const foreignAfter = env ? await dumpAllForeign(env.cluster.namespaces()).catch(() => null) : null;
      for (const line of report) console.log(`faults-rules ${mode}: ${line}`);
      await env?.dispose();
      rmSync(faultRoot, { recursive: true, force: true });
      const failed = stats.reduce((n, s) => n + (s?.failed ?? 0), 0);
      stats.forEach((s, i) => {
        if (s)
          console.log(
            `faults-rules ${mode}: prober ${probers[i]!.from} -> ${probers[i]!.target}: ${describeProbes(s)}`,
          );
      });
      // The wipes run last: every failure is theirs (the cases before them require none, each on its own).
      console.log(
        `faults-rules ${mode}: ${failed} probes failed in all, ${failed - wipeWindowFailures} of them after the ` +
          `repairs (new connections meeting the un-NATed conntrack entries the rule gap left)`,
      );
      if (foreignAfter) assert.equal(foreignDiff(baseline, foreignAfter), '', 'foreign state changed');
    });

    const node1 = () => env.cluster.node('node1');
    async function failedProbes(): Promise<number> {
      const s = await Promise.all(probers.map((p) => p.stats()));
      return s.reduce((n, x) => n + x.failed, 0);
    }

    it(`our tools fail once (${plan.toolFaults.join(', ')}): the next sync is full and succeeds, the failure is counted`, async () => {
      const failed0 = await failedProbes();
      const before = await scrape(env, 'node1');
      const dir = join(faultRoot, 'node1');
      for (const f of plan.toolFaults) writeFileSync(join(dir, f), '');
      const t0 = Date.now();
      await env.apply(
        service({ name: 'after-fault', clusterIP: '10.96.60.20', ports: TCP_ONLY }),
        endpointSlice('after-fault', [{ pod: env.cluster.pod('node2-b') }], TCP_ONLY),
      );
      await env.waitReachable('node1-a', 'tcp', '10.96.60.20', 80, {}, 20_000);
      const ms = Date.now() - t0;
      const fired = plan.toolFaults.filter((f) => !existsSync(join(dir, f)));
      for (const f of plan.toolFaults) rmSync(join(dir, f), { force: true });
      const fullSince = (text: string) =>
        metric(text, 'kubeproxy_sync_full_proxy_rules_duration_seconds_count', 'IPv4') -
        metric(before, 'kubeproxy_sync_full_proxy_rules_duration_seconds_count', 'IPv4');
      // The rules answer probes before the sync that wrote them has recorded its duration, so a scrape
      // right after the change is reachable can miss the full sync: look again for up to 5 s.
      let after = await scrape(env, 'node1');
      for (let i = 0; i < 50 && fullSince(after) < 1; i++) {
        await new Promise((r) => setTimeout(r, 100));
        after = await scrape(env, 'node1');
      }
      const failures = metric(after, plan.failureMetric) - metric(before, plan.failureMetric);
      const fullSyncs = fullSince(after);
      report.push(
        `tool faults ${fired.join(' + ')}: change applied ${ms} ms after it was made; ${failures} failed syncs counted, ${fullSyncs} full syncs`,
      );
      assert.deepEqual(fired, [...plan.toolFaults], 'every armed fault fired');
      assert.equal(failures, plan.toolFaults.length, `${plan.failureMetric} counts each failed sync`);
      assert.ok(fullSyncs >= 1, 'the sync after the failure was full');
      assert.equal(await failedProbes(), failed0, 'stable Services kept serving');
    });

    it('SIGKILL in the middle of a sync: the next start repairs everything; stable Services never fail', async () => {
      const failed0 = await failedProbes();
      const proxy = env.proxy('node1');
      await proxy.stop();
      // Enough new Services that the first sync of the next start is a long one, caught mid-way.
      const n = 120;
      await env.cp.createMany(
        Array.from({ length: n }, (_, i) => [
          service({ name: `burst-${i}`, clusterIP: `10.96.61.${i + 1}`, ports: TCP_ONLY }),
          endpointSlice(`burst-${i}`, [{ pod: env.cluster.pod(i % 2 ? 'node2-a' : 'node1-b') }], TCP_ONLY),
        ]).flat(),
      );
      const pauseFile = 'pauseAt' in plan.midSync ? join(faultRoot, 'node1', plan.midSync.pauseAt) : null;
      if (pauseFile) writeFileSync(pauseFile, 'pause 30000');
      await proxy.spawn();
      const tool =
        'tools' in plan.midSync
          ? await killMidSync(proxy, plan.midSync.tools, 60_000)
          : await killWhenFired(proxy, pauseFile!, 60_000);
      const t0 = Date.now();
      await proxy.start();
      const healthyMs = Date.now() - t0;
      const diff = await runTool(proxy, ['diff', ...proxy.flags()]);
      assert.equal(diff.code, 0, `the kernel holds exactly what the proxy wants:\n${diff.stdout}\n${diff.stderr}`);
      for (const i of [0, 73, n - 1]) await env.waitReachable('node1-a', 'tcp', `10.96.61.${i + 1}`, 80, {}, 10_000);
      report.push(
        `SIGKILL while ${tool} (the first sync after a restart): restart healthy in ${healthyMs} ms, diff clean`,
      );
      await new Promise((r) => setTimeout(r, 2500)); // probes in flight settle
      const stats = await Promise.all(probers.map((p) => p.stats()));
      assert.equal(
        stats.reduce((n, x) => n + x.failed, 0),
        failed0,
        `stable Services kept serving through the kill and the restart: ${stats.map(describeProbes).join('; ')} (killed at ${new Date(t0).toISOString()})\n${proxy.lastLog.slice(-3000)}\n${proxy.log().slice(0, 6000)}`,
      );
    });

    for (const wipe of plan.wipes) {
      it(`rules wiped by another actor (${wipe.name}) are repaired in time`, async () => {
        const failed0 = await failedProbes();
        const t0 = Date.now();
        for (const c of wipe.commands) await nsRun(node1().ns, c);
        // The actor's own change to foreign state (a flush takes other rules too) is the new baseline.
        const afterWipe = await dumpAllForeign(env.cluster.namespaces());
        const { ms } = await env.waitReachable('node1-a', 'tcp', STABLE_IP, 80, { timeoutMs: 300 }, 30_000);
        const repairMs = Date.now() - t0;
        await env.waitReachable('ext', 'tcp', node1().ip, STABLE_NODEPORT, { timeoutMs: 300 }, 10_000);
        await new Promise((r) => setTimeout(r, 2500)); // probes in flight at the repair settle
        const lost = (await failedProbes()) - failed0;
        wipeWindowFailures += lost;
        report.push(`${wipe.name}: repaired in ${repairMs} ms (seen after ${ms} ms of polling); ${lost} probes failed`);
        const within = plan.repairWithinMs ?? 2 * SYNC_PERIOD_S * 1000;
        assert.ok(repairMs <= within, `repaired after ${repairMs} ms (deadline ${within} ms)`);
        assert.match(env.proxy('node1').log(), /changed by someone else|canary missing|changed by another actor/);
        assert.equal(foreignDiff(afterWipe, await dumpAllForeign(env.cluster.namespaces())), '');
        baseline = afterWipe;
      });
    }
  });
}

/** The node's /metrics text (fetched from inside the node: the server binds 127.0.0.1). */
async function scrape(env: E2EEnv, node: string): Promise<string> {
  const r = await (await env.cluster.agent(node)).http('http://127.0.0.1:10249/metrics', 3000);
  if (r.status !== 200) throw new Error(`metrics of ${node}: ${JSON.stringify(r)}`);
  return r.body ?? '';
}

/** The sum of a metric's samples (optionally only those whose labels mention `label`). */
function metric(text: string, name: string, label = ''): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== ' ' && rest[0] !== '{') continue;
    if (label && !rest.includes(label)) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** The commands (comm) of a process's children. */
function childCommands(pid: number): string[] {
  const out: string[] = [];
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const kids = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
      for (const k of kids) {
        try {
          out.push(readFileSync(`/proc/${k}/comm`, 'utf8').trim());
        } catch {
          // gone already
        }
      }
    }
  } catch {
    // the process is gone
  }
  return out;
}

/** SIGKILL the proxy the moment one of `tools` runs as its child; resolves with that tool's name. */
async function killMidSync(proxy: ProxyProcess, tools: readonly string[], timeoutMs: number): Promise<string> {
  const pid = proxy.pid;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const running = childCommands(pid).find((c) => tools.includes(c));
    if (running) {
      await proxy.kill();
      return `${running} ran`;
    }
    if (!proxy.running()) throw new Error(`proxy exited before its sync:\n${proxy.lastLog || proxy.log()}`);
    await new Promise((r) => setTimeout(r, 2));
  }
  throw new Error(`no ${tools.join('/')} child of the proxy within ${timeoutMs} ms:\n${proxy.log()}`);
}

/** SIGKILL the proxy once it has consumed the fault file (it is paused there); resolves with a description. */
async function killWhenFired(proxy: ProxyProcess, file: string, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!existsSync(file)) {
      await proxy.kill();
      return `its sync was paused at ${file.slice(file.lastIndexOf('/') + 1)}`;
    }
    if (!proxy.running()) throw new Error(`proxy exited before its sync:\n${proxy.lastLog || proxy.log()}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  rmSync(file, { force: true });
  throw new Error(`the proxy never reached ${file} within ${timeoutMs} ms:\n${proxy.log()}`);
}

/** `kube-proxy-ts <args>` in the proxy's node (and, in ebpf mode, its bpf filesystem). */
async function runTool(proxy: ProxyProcess, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const bpf = proxy.bpfNode;
  const r = bpf
    ? await bpf.exec([...proxyArgv(), ...args], { allowFailure: true })
    : await run('ip', ['netns', 'exec', proxy.node.ns, ...proxyArgv(), ...args], { allowFailure: true });
  return { code: r.code, stdout: r.stdout, stderr: r.stderr };
}
