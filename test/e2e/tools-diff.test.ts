// `kube-proxy-ts diff` against a real proxy on the real kernel, per mode:
// the netns cluster (test/netns), the test API server, one kube-proxy-ts per
// node. The diff runs as a process inside node1's namespace with node1's
// proxy flags.
//   - right after the proxy synced: no changes, exit 0;
//   - proxy stopped, a Service added in the API: the new service chain and
//     its KUBE-SERVICES rule (iptables) / set and map elements (nftables) /
//     map entries (ebpf) are reported, exit 1, and the kernel's rules are
//     exactly as before (diff applies nothing);
//   - explain in the same namespace agrees with the live rules.
import { after, before, describe, it } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { E2E_MODES, proxyArgv } from '../netns/proxy.js';
import { nsRun } from '../netns/spawn.js';
import { type BpfNode, TEST_PIN_ROOT } from '../ebpf/bpfnode.js';
import type { ServiceExplanation } from '../../src/cmd/explainservice.js';

/**
 * The real binary (`kube-proxy-ts diff ...` / `explain ...`) in node1's
 * namespace; for ebpf also in the mount namespace of its bpf filesystem,
 * where the proxy pinned its maps (bpf: the node's BpfNode).
 */
async function tool(
  ns: string,
  args: string[],
  bpf?: BpfNode,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const r = bpf
    ? await bpf.exec([...proxyArgv(), ...args], { allowFailure: true })
    : await nsRun(ns, [...proxyArgv(), ...args], { allowFailure: true });
  return { code: r.code, stdout: r.stdout, stderr: r.stderr };
}

/**
 * iptables-save without its timestamp comments and counters, the nftables
 * ruleset without counters, and (ebpf) the entries of the pinned maps.
 */
async function rules(ns: string, bpf?: BpfNode): Promise<string> {
  const r = await nsRun(ns, ['iptables-save']);
  const nft = await nsRun(ns, ['nft', '-s', 'list', 'ruleset']); // -s: no counters
  let maps = '';
  for (const m of bpf ? ['kpt_svc', 'kpt_eps', 'kpt_sets', 'kpt_addrs'] : [])
    maps += (await bpf!.exec(['bpftool', 'map', 'dump', 'pinned', `${TEST_PIN_ROOT}/v1/maps/${m}`])).stdout;
  return (
    r.stdout
      .split('\n')
      .filter((l) => !l.startsWith('#'))
      .map((l) => l.replace(/\[\d+:\d+\]$/, ''))
      .join('\n') +
    nft.stdout +
    maps
  );
}

for (const mode of E2E_MODES)
  describe(`diff and explain against a running proxy (${mode})`, { concurrency: false }, () => {
    let env: E2EEnv;
    let ns = '';
    let flags: string[] = [];
    let bpf: BpfNode | undefined;
    before(async () => {
      env = await E2EEnv.start(mode);
      ns = env.cluster.node('node1').ns;
      flags = env.proxy('node1').flags();
      bpf = env.proxy('node1').bpfNode;
      const pods = [env.cluster.pod('node1-a'), env.cluster.pod('node2-a')];
      await env.apply(
        service({ name: 'web', clusterIP: '10.96.0.10', type: 'NodePort', ports: webPorts(30600) }),
        endpointSlice(
          'web',
          pods.map((pod) => ({ pod })),
          webPorts(30600),
        ),
      );
      await env.waitReachable('node1-a', 'tcp', '10.96.0.10', 80);
    });
    after(async () => {
      await env?.dispose();
    });

    it('no changes right after a sync by the real proxy (exit 0)', async () => {
      const r = await tool(ns, ['diff', ...flags], bpf);
      assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
      assert.match(r.stdout, new RegExp(`# ${mode} IPv4: no changes`));
    });

    it('explain agrees with the live rules: the ClusterIP goes to both endpoints', async () => {
      const r = await tool(
        ns,
        ['explain', '--src', env.cluster.pod('node1-a').ip, '--dst', '10.96.0.10', '--port', '80', '--output', 'json'],
        bpf,
      );
      assert.equal(r.code, 0, r.stderr);
      const e = JSON.parse(r.stdout) as { verdict: string; service: string; candidates: Array<{ endpoint: string }> };
      assert.equal(e.verdict, 'DNAT');
      assert.equal(e.service, 'default/web:tcp');
      assert.deepEqual(
        e.candidates.map((c) => c.endpoint).sort(),
        [`${env.cluster.pod('node1-a').ip}:8080`, `${env.cluster.pod('node2-a').ip}:8080`].sort(),
      );
    });

    it('explain --service: every address of the Service, each traced to both endpoints', async () => {
      const r = await tool(ns, ['explain', '--service', 'default/web', '--output', 'json'], bpf);
      assert.equal(r.code, 0, r.stderr);
      const views = JSON.parse(r.stdout) as ServiceExplanation[];
      const v4 = views.find((v) => v.addresses.some((a) => a.address === '10.96.0.10'))!;
      assert.equal(v4.mode, mode);
      const node1 = env.cluster.node('node1').ip;
      const seen = v4.addresses.map((a) => `${a.servicePort} ${a.kind} ${a.address ?? 'node'}:${a.port}/${a.protocol}`);
      assert.deepEqual(seen.sort(), [
        'default/web:tcp cluster IP 10.96.0.10:80/TCP',
        'default/web:tcp node port node:30600/TCP',
        'default/web:udp cluster IP 10.96.0.10:53/UDP',
        'default/web:udp node port node:30601/UDP',
      ]);
      const eps = [env.cluster.pod('node1-a').ip, env.cluster.pod('node2-a').ip].sort();
      for (const a of v4.addresses) {
        const off = a.views.find((x) => x.client === 'off-node client')!;
        assert.equal(off.dst, a.address ?? node1);
        assert.equal(off.verdict, 'DNAT', `${a.kind} ${a.port}: ${off.summary}`);
        assert.deepEqual(off.candidates.map((c) => c.endpoint.replace(/:\d+$/, '')).sort(), eps);
        assert.ok(a.views.some((x) => x.client === 'this node' && x.src === node1));
      }
      const text = await tool(ns, ['explain', '--service', 'default/web'], bpf);
      assert.match(text.stdout, new RegExp(`^Service default/web on this node \\(${mode} (rules|maps)\\)$`, 'm'));
      assert.match(text.stdout, /^default\/web:tcp +node port +<node address>:30600\/TCP$/m);
    });

    it('explain --save (ebpf: the maps as JSON) and --from elsewhere give the live answers', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'kpt-explain-save-'));
      try {
        const file = join(dir, 'state');
        const saved = await tool(ns, ['explain', '--save', file], bpf);
        if (mode !== 'ebpf') {
          // The netfilter modes' state is saved with their own tools: the error says how.
          assert.equal(saved.code, 2, saved.stdout);
          assert.match(saved.stderr, mode === 'iptables' ? /iptables-save -c > FILE/ : /nft -j list table/);
          return;
        }
        assert.equal(saved.code, 0, saved.stderr);
        const json = async (...args: string[]) => {
          const r = await tool(ns, ['explain', '-o', 'json', ...args], bpf);
          assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
          return JSON.parse(r.stdout) as unknown;
        };
        const node1 = env.cluster.node('node1').ip;
        for (const p of [
          ['--src', env.cluster.pod('node1-a').ip, '--dst', '10.96.0.10', '--port', '80'],
          ['--src', '203.0.113.7', '--dst', node1, '--port', '30601', '--protocol', 'udp'],
          ['--src', '203.0.113.7', '--dst', '10.96.0.99', '--port', '80'],
        ])
          assert.deepEqual(await json('--from', file, ...p), await json(...p), p.join(' '));
        assert.deepEqual(
          await json('--from', file, '--service', 'default/web'),
          await json('--service', 'default/web'),
        );
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a Service added while the proxy is stopped: reported (exit 1), nothing applied', async () => {
      await env.proxy('node1').stop();
      const pod = env.cluster.pod('node2-b');
      await env.apply(
        service({ name: 'added', clusterIP: '10.96.0.77', ports: webPorts() }),
        endpointSlice('added', [{ pod }], webPorts()),
      );
      const before = await rules(ns, bpf);
      const r = await tool(ns, ['diff', ...flags], bpf);
      assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
      const ep = pod.ip.replaceAll('.', '\\.');
      if (mode === 'iptables') {
        assert.match(r.stdout, /^@@ nat KUBE-SVC-[A-Z0-9]{16} \(added\) @@$/m);
        assert.match(r.stdout, /^\+:KUBE-SVC-/m);
        assert.match(
          r.stdout,
          /^\+-A KUBE-SERVICES .*"default\/added:tcp cluster IP".*-d 10\.96\.0\.77 --dport 80 -j KUBE-SVC-/m,
        );
        assert.match(r.stdout, new RegExp(`^\\+-A KUBE-SEP-[A-Z0-9]{16} .*-j DNAT --to-destination ${ep}:8080$`, 'm'));
      } else if (mode === 'ebpf') {
        // A new service entry, its endpoint slot and its name; nothing else of the live maps moves.
        assert.match(r.stdout, /^\+kpt_svc: 10\.96\.0\.77:80\/TCP => svc \d+ clusterIP cluster-set \d+ /m);
        assert.match(r.stdout, new RegExp(`^\\+kpt_eps: set \\d+ slot 0 => ${ep}:8080$`, 'm'));
        assert.match(r.stdout, /^\+kpt_names: svc \d+ => default\/added:tcp$/m);
        assert.match(r.stdout, /^\+kpt_addrs: 10\.96\.0\.77 => service\|cluster-ip$/m);
      } else {
        assert.match(r.stdout, /^@@ chain service-[A-Z0-9]{8}-default\/added\/tcp\/tcp \(added\) @@$/m);
        assert.match(r.stdout, new RegExp(`^\\+rule .*dnat to ${ep}:8080$`, 'm'));
        assert.match(r.stdout, /^\+element 10\.96\.0\.77$/m);
        assert.match(
          r.stdout,
          /^\+element 10\.96\.0\.77 \. tcp \. 80 : goto service-[A-Z0-9]{8}-default\/added\/tcp\/tcp$/m,
        );
      }
      assert.doesNotMatch(r.stdout, /^-/m, 'nothing is removed');
      assert.equal(await rules(ns, bpf), before, 'diff changed the kernel');
      const json = await tool(ns, ['diff', ...flags, '--output', 'json'], bpf);
      assert.equal(json.code, 1);
      const d = JSON.parse(json.stdout) as { mode: string; families: Array<{ family: string; changes: number }> };
      assert.equal(d.mode, mode);
      assert.ok(d.families.find((f) => f.family === 'IPv4')!.changes >= 6);
    });

    it('a Service deleted while the proxy is stopped: its rules are reported removed', async () => {
      await env.kube.remove('Service', 'web', 'default');
      const r = await tool(ns, ['diff', ...flags], bpf);
      assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
      if (mode === 'iptables') {
        assert.match(r.stdout, /^@@ nat KUBE-SVC-[A-Z0-9]{16} \(removed\) @@$/m);
        assert.match(r.stdout, /^--A KUBE-SERVICES .*"default\/web:tcp cluster IP"/m);
      } else if (mode === 'ebpf') {
        assert.match(r.stdout, /^-kpt_svc: 10\.96\.0\.10:80\/TCP => svc \d+ clusterIP /m);
        assert.match(r.stdout, /^-kpt_names: svc \d+ => default\/web:tcp$/m);
      } else {
        // The renderer empties a stale chain now and deletes it a sync later (its elements go at once).
        assert.match(r.stdout, /^-rule .*dnat to /m);
        assert.match(r.stdout, /^-element 10\.96\.0\.10 \. tcp \. 80 : goto service-/m);
      }
    });

    it('bad flags: exit 2', async () => {
      const r = await tool(
        ns,
        [
          'diff',
          '--proxy-mode',
          'bogus',
          ...flags.filter((f, i, a) => f !== '--proxy-mode' && a[i - 1] !== '--proxy-mode'),
        ],
        bpf,
      );
      assert.equal(r.code, 2, r.stdout);
    });
  });
