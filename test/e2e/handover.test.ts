// Mode switches on a running node (src/cmd/handover.ts), in the namespace
// cluster with real packets: node1's proxy is restarted in another mode,
// round a tour that makes every ordered pair of the host's modes once
// (iptables, nftables, ebpf: six switches).
// Through every switch, probers open a fresh TCP connection every 50 ms
// from a pod on node1 to a ClusterIP and from outside to node1's NodePort;
// none may fail. A connection held open across each switch keeps its
// endpoint while the new mode takes over, and afterwards nothing of the
// previous mode is left on the node (chains, tables, programs, pins). A
// connection the ebpf or IPVS mode balanced needs that mode's own state: it
// is carried while the previous mode drains (--handover-drain-period), and
// is not expected to survive the removal.
//
// The IPVS pairs run in the QEMU guest stage (test/guest/cluster-suites.guest.ts,
// KPT_HANDOVER_MODES), where the kernel has IPVS.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { describeProbes, Prober, type ProbeStats } from '../netns/prober.js';
import { ALL_E2E_MODES, type E2EMode } from '../netns/proxy.js';
import { nsRun } from '../netns/spawn.js';
import { scaled } from '../netns/timescale.js';
import { HANDOVER_DONE } from '../../src/cmd/handover.js';

const STABLE_IP = '10.96.77.10';
const STABLE_NODEPORT = 30777;
const DRAIN_S = 2;
const DRAIN_FLAG = '--handover-drain-period';

/** The cycle of modes node1 goes through: each ordered pair of `modes` once (a de Bruijn-like tour). */
function switchCycle(modes: readonly E2EMode[]): E2EMode[] {
  const out: E2EMode[] = [modes[0]!];
  const todo = new Set(modes.flatMap((a) => modes.filter((b) => b !== a).map((b) => `${a}>${b}`)));
  // Greedy Euler tour on the complete directed graph: it always exists (in-degree = out-degree).
  const walk = (at: E2EMode): void => {
    for (const b of modes)
      if (todo.delete(`${at}>${b}`)) {
        walk(b);
        out.splice(1, 0, b);
      }
  };
  walk(modes[0]!);
  return out;
}

/** Modes to switch among (KPT_HANDOVER_MODES), and a hub (KPT_HANDOVER_HUB): then only pairs with the hub. */
const HOST_MODES = (process.env['KPT_HANDOVER_MODES']?.split(',') ?? ['iptables', 'nftables', 'ebpf']).filter((m) =>
  (ALL_E2E_MODES as readonly string[]).includes(m),
) as E2EMode[];
const HUB = process.env['KPT_HANDOVER_HUB'] as E2EMode | undefined;

/** hub -> a -> hub -> b -> hub ...: every ordered pair with the hub once. */
function hubCycle(hub: E2EMode, modes: readonly E2EMode[]): E2EMode[] {
  return [hub, ...modes.filter((m) => m !== hub).flatMap((m) => [m, hub])];
}

describe(
  `mode switches hand over without a failed connection (${HOST_MODES.join(', ')}${HUB ? `, each with ${HUB}` : ''})`,
  { concurrency: false },
  () => {
    const cycle = HUB ? hubCycle(HUB, HOST_MODES) : switchCycle(HOST_MODES);
    let env: E2EEnv;
    let probers: Prober[] = [];
    const node1 = () => env.cluster.node('node1');

    before(async () => {
      if (HOST_MODES.length < 2) return;
      // The default environment, so the guest stage's shared cluster serves (KPT_E2E_SHARED); the proxies
      // that take over get the short drain period (switchMode).
      env = await E2EEnv.start(cycle[0]!);
      const pods = env.cluster.pods.filter((p) => p.name !== 'node1-a');
      await env.apply(
        service({ name: 'stable', clusterIP: STABLE_IP, type: 'NodePort', ports: webPorts(STABLE_NODEPORT) }),
        endpointSlice(
          'stable',
          pods.map((pod) => ({ pod })),
          webPorts(),
        ),
      );
      await env.waitReachable('node1-a', 'tcp', STABLE_IP, 80);
      await env.waitReachable('ext', 'tcp', node1().ip, STABLE_NODEPORT);
      probers = [
        await Prober.start(env.cluster, 'node1-a', STABLE_IP, 80, { intervalMs: 50, timeoutMs: 2000 }),
        await Prober.start(env.cluster, 'ext', node1().ip, STABLE_NODEPORT, { intervalMs: 50, timeoutMs: 2000 }),
      ];
    });

    after(async () => {
      const stats = await Promise.all(probers.map((p) => p.stop().catch(() => null)));
      stats.forEach((s, i) => {
        if (s) console.log(`handover: prober ${probers[i]!.from} -> ${probers[i]!.target}: ${describeProbes(s)}`);
      });
      await env?.dispose();
    });

    /**
     * What of `mode` is left on node1 while `running` runs there (empty: nothing). One command per look:
     * under emulation (the guest stage) every process start costs.
     */
    async function leftovers(mode: E2EMode, running: E2EMode): Promise<string[]> {
      const bpf = env.proxy('node1').bpfNode;
      const script = [
        'for t in nat filter; do echo "@$t"; iptables-save -t $t; ip6tables-save -t $t; done 2>/dev/null',
        'echo @nft; nft list tables 2>/dev/null',
        'echo @link; ip -o link show kube-ipvs0 2>/dev/null',
        'echo @ipset; ipset list -n 2>/dev/null',
        'echo @ipvs; ipvsadm -Sn 2>/dev/null',
        'echo @pins; ls /sys/fs/bpf 2>/dev/null',
        'echo @tc; for d in ingress egress; do tc filter show dev eth0 $d 2>/dev/null; done',
        'echo @tcx; bpftool net show dev eth0 2>/dev/null',
        'true',
      ].join('; ');
      // Through the node's bpffs holder where there is one: the same view the proxy has.
      const argv = ['sh', '-c', script];
      const out = (bpf ? await bpf.exec(argv, { allowFailure: true }) : await nsRun(node1().ns, argv)).stdout;
      const sections = new Map<string, string[]>();
      let current: string[] = [];
      for (const line of out.split('\n')) {
        const head = /^@(\w+)$/.exec(line);
        if (head) sections.set(head[1]!, (current = []));
        else if (line.trim() !== '') current.push(line);
      }
      const part = (name: string) => sections.get(name) ?? [];
      switch (mode) {
        case 'iptables':
        case 'ipvs': {
          // KUBE-FIREWALL is kubelet's as much as ours: upstream's cleanup leaves it, and so does ours.
          const chains = (lines: string[], only: RegExp) =>
            lines.filter((l) => /^:KUBE-/.test(l) && !l.startsWith(':KUBE-FIREWALL ') && only.test(l));
          // iptables and IPVS modes share some chain names: after a switch between them those are the running mode's.
          const shared = (mode === 'iptables' && running === 'ipvs') || (mode === 'ipvs' && running === 'iptables');
          const own = !shared
            ? { nat: /./, filter: /./ }
            : mode === 'iptables'
              ? {
                  nat: /^:(KUBE-SVC-|KUBE-SEP-|KUBE-EXT-|KUBE-SVL-|KUBE-FW-|KUBE-NODEPORTS |KUBE-PROXY-CANARY )/,
                  filter: /^:(KUBE-SERVICES |KUBE-EXTERNAL-SERVICES |KUBE-NODEPORTS |KUBE-PROXY-CANARY )/,
                }
              : {
                  nat: /^:(KUBE-NODE-PORT |KUBE-LOAD-BALANCER )/,
                  filter: /^:(KUBE-NODE-PORT |KUBE-SOURCE-RANGES-FIREWALL |KUBE-IPVS-FILTER |KUBE-IPVS-OUT-FILTER )/,
                };
          const left = [...chains(part('nat'), own.nat), ...chains(part('filter'), own.filter)];
          if (mode === 'iptables') return left;
          const sets = part('ipset').filter((l) => l.startsWith('KUBE-'));
          return [...left, ...part('link').map(() => 'kube-ipvs0'), ...sets, ...part('ipvs')];
        }
        case 'nftables':
          return part('nft').filter((l) => /kube-proxy($|-localhost)/.test(l));
        case 'ebpf':
          return [
            ...part('pins').filter((l) => l === 'kube-proxy-ts'),
            ...part('tc').filter((l) => l.includes('kpt_')),
            ...part('tcx').filter((l) => l.includes('kpt_')),
            ...part('nft').filter((l) => l.includes('kube-proxy-ebpf')),
          ];
        default:
          return [];
      }
    }

    /** Wait for the (new) proxy to say the handover is done, then check that nothing of `mode` is left. */
    async function waitGone(mode: E2EMode, running: E2EMode): Promise<void> {
      const proxy = env.proxy('node1');
      const deadline = Date.now() + scaled(DRAIN_S * 1000 + 15000);
      while (Date.now() < deadline && !proxy.log().includes(HANDOVER_DONE))
        await new Promise((r) => setTimeout(r, 200));
      assert.ok(proxy.log().includes(HANDOVER_DONE), `no "${HANDOVER_DONE}" in time:\n${proxy.log()}`);
      const left = await leftovers(mode, running);
      assert.deepEqual(left, [], `${mode} state left on node1 after the handover:\n${proxy.log()}`);
    }

    const failed = (s: ProbeStats[]) => s.reduce((n, x) => n + x.failed, 0);

    for (let i = 1; i < cycle.length; i++) {
      const from = cycle[i - 1]!;
      const to = cycle[i]!;
      it(`${from} -> ${to}: no probe fails, a held connection keeps its endpoint, nothing of ${from} is left`, async () => {
        const agent = await env.cluster.agent('node1-a');
        const key = `held-${i}`;
        const opened = await agent.open(key, STABLE_IP, 80);
        assert.ok(opened.ok, `held connection: ${opened.error ?? ''}`);
        const first = await agent.send(key);
        assert.ok(first.ok, JSON.stringify(first));

        const proxy = env.proxy('node1');
        const t0 = Date.now();
        const base = proxy.extraArgs.filter((a, k, all) => a !== DRAIN_FLAG && all[k - 1] !== DRAIN_FLAG);
        await proxy.switchMode(to, [...base, DRAIN_FLAG, `${DRAIN_S}s`]);
        const tUp = Date.now();
        const during = await agent.send(key);
        assert.ok(
          during.ok && during.reply.pod === first.reply.pod,
          `while ${to} takes over: ${JSON.stringify(during)}`,
        );
        await waitGone(from, to);
        const tGone = Date.now();
        if (from !== 'ebpf' && from !== 'ipvs') {
          // conntrack holds its translation: nothing of the previous mode is needed.
          const later = await agent.send(key);
          assert.ok(later.ok && later.reply.pod === first.reply.pod, `after ${from} is gone: ${JSON.stringify(later)}`);
        }
        await agent.closeConn(key, true);
        await env.waitReachable('node1-a', 'tcp', STABLE_IP, 80);
        const stats = await Promise.all(probers.map((p) => p.stats()));
        assert.equal(failed(stats), 0, stats.map(describeProbes).join('\n'));
        const at = (t: number) => new Date(t).toISOString();
        console.log(
          `handover ${from} -> ${to}: switched at ${at(t0)}, serving at ${at(tUp)}, ${from} gone at ${at(tGone)}; ` +
            stats.map(describeProbes).join('; '),
        );
      });
    }
  },
);
