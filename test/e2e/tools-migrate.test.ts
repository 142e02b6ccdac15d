// `kube-proxy-ts migrate --to MODE` against a real proxy on the real kernel:
// the netns cluster, the test API server (HTTPS with a token), one
// kube-proxy-ts per node; migrate runs as a process in node1's namespace
// with node1's proxy flags. node1 also runs a process listening on a Service
// address (with IP_FREEBIND where the address is not the node's) and one on
// the wildcard address at a Service port.
//   - iptables mode, checked as it is configured: NodePorts leave 127.0.0.1
//     and the other node addresses; no IPVS finding (exit 1);
//   - the same node checked as if it ran IPVS mode (--proxy-mode ipvs; the
//     output notes the node's live mode), and in the QEMU guest a node that
//     really runs IPVS mode (test/guest/migrate.guest.ts): schedulers,
//     kube-ipvs0, both listeners, the traffic policy Local Services (exit 1);
//   - to ebpf: the health-check node port (without an accept rule there too);
//   - a move to the mode it is in: nothing changes (exit 0); bad --to: exit 2;
//   - nothing on the node changed: rules, sockets, addresses, sysctls.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import type { KubeObject } from '../netns/kube.js';
import { E2E_MODES, proxyArgv } from '../netns/proxy.js';
import { nsRun, nsSpawn, type NsProcess } from '../netns/spawn.js';
import type { MigrateReport } from '../../src/cmd/migrate.js';

async function tool(ns: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const r = await nsRun(ns, [...proxyArgv(), 'migrate', ...args], { allowFailure: true });
  return { code: r.code, stdout: r.stdout, stderr: r.stderr };
}

/** What migrate must leave as it was: rules (no counters), listening sockets, addresses, links, ARP sysctls, IPVS. */
async function nodeState(ns: string): Promise<string> {
  const out: string[] = [];
  for (const argv of [
    ['iptables-save'],
    ['ip6tables-save'],
    ['nft', '-s', 'list', 'ruleset'],
    ['ss', '-ltnuH'],
    ['ip', '-o', 'addr', 'show'],
    ['ip', '-o', 'link', 'show'],
    ['sysctl', 'net.ipv4.conf.all.arp_ignore', 'net.ipv4.conf.all.arp_announce'],
    // IPVS mode (the guest): the virtual and real servers, without the connection counters.
    ['sh', '-c', "cat /proc/net/ip_vs 2>/dev/null | awk '{print $1, $2, $3, $4}'"],
  ]) {
    const r = await nsRun(ns, argv, { allowFailure: true });
    out.push(
      `## ${argv.join(' ')}`,
      ...r.stdout
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .map((l) => l.replace(/\[\d+:\d+\]$/, '')),
    );
  }
  return out.join('\n');
}

/**
 * nodeState once the proxy is between syncs: two looks a second apart that
 * agree. In IPVS mode a Service answers once its virtual server is written,
 * before the iptables rules of the same sync, and later syncs may still
 * be on their way; a single look could catch the proxy's own writes.
 */
async function settledState(ns: string): Promise<string> {
  let last = await nodeState(ns);
  for (let i = 0; i < 30; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = await nodeState(ns);
    if (now === last) return now;
    last = now;
  }
  throw new Error(`node state still changing after 30 s:\n${last}`);
}

/** Listens on TCP 10.96.0.10:9000 (a Service address; IP_FREEBIND when it is not local) and TCP *:80 (a Service port). */
const LISTENERS = [
  'import socket',
  'a = socket.socket(socket.AF_INET, socket.SOCK_STREAM)',
  'a.setsockopt(socket.SOL_IP, 15, 1)',
  "a.bind(('10.96.0.10', 9000))",
  'a.listen()',
  'b = socket.socket(socket.AF_INET, socket.SOCK_STREAM)',
  "b.bind(('0.0.0.0', 80))",
  'b.listen()',
  "print('ready', flush=True)",
  'import time',
  'time.sleep(3600)',
].join('\n');

function annotated(o: KubeObject, annotations: Record<string, string>): KubeObject {
  return { ...o, metadata: { ...o.metadata, annotations } };
}

function kinds(r: MigrateReport, svc: string | null): string[] {
  return r.findings
    .filter((f) => f.service === svc)
    .map((f) => f.kind)
    .sort();
}

/** The findings of a move out of IPVS mode for this suite's Services. */
function assertIpvsFindings(r: MigrateReport): void {
  assert.equal(r.from, 'ipvs');
  const web = r.findings.filter((f) => f.service === 'default/web');
  assert.match(web.find((f) => f.kind === 'scheduler')!.action, /kube-proxy-ts\/lb-algorithm=round-robin/);
  assert.match(web.find((f) => f.kind === 'kube-ipvs0')!.change, /^10\.96\.0\.10 stops being an address/);
  // The listener on the Service address changes (it cannot bind it again); the wildcard one is a note.
  const listens = web
    .filter((f) => f.kind === 'listener')
    .map((f) => `${/listens on (\S+?),? /.exec(f.change)![1]} ${f.changes ? 'change' : 'note'}`)
    .sort();
  assert.deepEqual(listens, ['0.0.0.0:80/TCP note', '10.96.0.10:9000/TCP change']);
  // The annotated Service keeps its choice; its port is not the wildcard listener's.
  assert.deepEqual(kinds(r, 'default/kept'), ['kube-ipvs0']);
  const local = r.findings.filter((f) => f.service === 'default/local' && f.kind === 'external-traffic-policy');
  assert.equal(local.length, 2, JSON.stringify(local));
  assert.match(local[1]!.change, /this node has no local endpoint/);
  assert.match(
    r.findings.find((f) => f.service === 'default/itp' && f.kind === 'internal-traffic-policy')!.change,
    /refused in IPVS mode and dropped/,
  );
  assert.ok(!r.findings.some((f) => f.kind === 'strict-arp'), 'no strict ARP in a fresh namespace');
}

for (const mode of E2E_MODES.filter((m) => m === 'iptables' || m === 'ipvs'))
  describe(`migrate against a running proxy (${mode})`, { concurrency: false }, () => {
    let env: E2EEnv;
    let ns = '';
    let flags: string[] = [];
    let listeners: NsProcess | undefined;
    let initial = '';
    before(async () => {
      env = await E2EEnv.start(mode);
      ns = env.cluster.node('node1').ns;
      flags = env.proxy('node1').flags();
      const [a, b] = [env.cluster.pod('node1-a'), env.cluster.pod('node2-a')];
      const keptPorts = [{ name: 'tcp', port: 8081, targetPort: 8080, protocol: 'TCP' as const }];
      const lbPorts = [{ name: 'tcp', port: 80, targetPort: 8080, protocol: 'TCP' as const, nodePort: 30720 }];
      await env.apply(
        service({ name: 'web', clusterIP: '10.96.0.10', type: 'NodePort', ports: webPorts(30700) }),
        endpointSlice('web', [{ pod: a }, { pod: b }], webPorts(30700)),
        annotated(service({ name: 'kept', clusterIP: '10.96.0.11', ports: keptPorts }), {
          'kube-proxy-ts/lb-algorithm': 'round-robin',
        }),
        endpointSlice('kept', [{ pod: a }], keptPorts),
        // externalTrafficPolicy Local with its only endpoint on node2.
        service({
          name: 'local',
          clusterIP: '10.96.0.12',
          type: 'LoadBalancer',
          externalTrafficPolicy: 'Local',
          healthCheckNodePort: 32720,
          ports: lbPorts,
        }),
        endpointSlice('local', [{ pod: b }], lbPorts),
        service({ name: 'itp', clusterIP: '10.96.0.13', internalTrafficPolicy: 'Local', ports: webPorts() }),
        endpointSlice('itp', [{ pod: b }], webPorts()),
      );
      await env.waitReachable('node1-a', 'tcp', '10.96.0.10', 80);
      listeners = nsSpawn(ns, ['python3', '-u', '-c', LISTENERS]);
      await env.waitFor('the listeners', async () => (listeners!.log().includes('ready') ? true : undefined));
      initial = await settledState(ns);
    });
    after(async () => {
      await listeners?.stop();
      await env?.dispose();
    });

    it(`from the configured mode (${mode}) to nftables: what changes, exit 1`, async () => {
      const r = await tool(ns, ['--to', 'nftables', '--output', 'json', ...flags]);
      assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
      const rep = JSON.parse(r.stdout) as MigrateReport;
      assert.equal(rep.fromSource, 'configured');
      assert.equal(rep.live, mode);
      assert.equal(rep.services, 4);
      if (mode === 'ipvs') {
        assertIpvsFindings(rep);
        // Read live: the virtual servers' scheduler and kube-ipvs0 (a note for the node).
        const dummy = rep.findings.find((f) => f.kind === 'kube-ipvs0' && f.service === null)!;
        assert.match(dummy.change, /kube-ipvs0 holds \d+ address/);
        return;
      }
      // iptables: NodePorts on 127.0.0.1 (localhostNodePorts) are no longer served, the health-check node
      // port loses its accept rule; nothing of IPVS's.
      const np = rep.findings.filter((f) => f.kind === 'nodeport-addresses');
      assert.deepEqual(np.map((f) => f.service).sort(), ['default/local', 'default/web']);
      assert.match(np.find((f) => f.service === 'default/web')!.change, /30700\/TCP on [^;]*127\.0\.0\.1/);
      assert.match(
        rep.findings.find((f) => f.kind === 'health-check-node-port' && f.service === 'default/local')!.change,
        /32720\/TCP: iptables mode writes a rule accepting it, nftables mode none/,
      );
      assert.deepEqual(
        rep.findings.filter((f) => f.kind !== 'nodeport-addresses' && f.kind !== 'health-check-node-port'),
        [],
        'iptables and nftables modes treat traffic policies, addresses and listeners alike',
      );
    });

    it('the text output: the mode moved from and why, each Service with what to do', async () => {
      const r = await tool(ns, ['--to', 'nftables', ...flags]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(
        r.stdout,
        new RegExp(`^# migrate ${mode} -> nftables on node node1: ${mode} is the configured mode`, 'm'),
      );
      assert.match(r.stdout, /^default\/web\n {2}CHANGE /m);
      assert.match(r.stdout, /^ {9}do: /m);
    });

    if (mode === 'iptables')
      it('as if the node ran IPVS mode (--proxy-mode ipvs): the findings of a move out of IPVS', async () => {
        const r = await tool(ns, ['--to', 'nftables', '--output', 'json', ...flags, '--proxy-mode', 'ipvs']);
        assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
        const rep = JSON.parse(r.stdout) as MigrateReport;
        assert.equal(rep.live, 'iptables');
        assertIpvsFindings(rep);
        const text = await tool(ns, ['--to', 'nftables', ...flags, '--proxy-mode', 'ipvs']);
        assert.match(text.stdout, /^# note: the node holds iptables mode's state; .*--proxy-mode iptables$/m);
      });

    it('to ebpf: the health-check node port loses its accept rule there too', async () => {
      const r = await tool(ns, ['--to', 'ebpf', '--output', 'json', ...flags]);
      assert.equal(r.code, 1, r.stderr);
      const rep = JSON.parse(r.stdout) as MigrateReport;
      assert.match(
        rep.findings.find((f) => f.kind === 'health-check-node-port' && f.service === 'default/local')!.change,
        /32720\/TCP/,
      );
    });

    it('a bad --to is exit 2; to the mode it runs (in iptables mode): nothing changes (exit 0)', async () => {
      if (mode === 'iptables') {
        const same = await tool(ns, ['--to', mode, ...flags]);
        assert.equal(same.code, 0, `${same.stdout}\n${same.stderr}`);
        assert.match(same.stdout, /^# already iptables mode: nothing changes$/m);
      }
      const ipvs = await tool(ns, ['--to', 'ipvs', ...flags]);
      assert.equal(ipvs.code, 2);
      assert.match(ipvs.stderr, /--to ipvs: migrate checks moves away from IPVS mode/);
      const bad = await tool(ns, ['--to', 'bogus', ...flags]);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /--to: iptables, nftables or ebpf/);
    });

    it('changed nothing on the node: rules, sockets, addresses, links and sysctls as before', async () => {
      const now = await settledState(ns);
      // The lines that differ first (a whole snapshot is too long to read in a failure), then all of it.
      const [was, is] = [new Set(initial.split('\n')), new Set(now.split('\n'))];
      assert.deepEqual(
        { gone: [...was].filter((l) => !is.has(l)), added: [...is].filter((l) => !was.has(l)) },
        { gone: [], added: [] },
      );
      assert.equal(now, initial);
    });
  });
