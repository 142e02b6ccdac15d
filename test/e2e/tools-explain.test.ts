// `kube-proxy-ts explain` on the real kernel, per mode: rules are applied by
// the real IptablesDataplane / NftablesDataplane inside a fresh network
// namespace (kpt-<pid>-<rand>-tools-<mode>), then explain reads them back
// from that namespace (--netns, mode detected) and must give the verdicts
// the rules implement. Never touches the root namespace.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../src/core/types.js';
import { netnsRunner } from '../../src/platform/exec.js';
import { IptablesDataplane, runnerSysctl } from '../../src/platform/iptables/index.js';
import { NftablesDataplane } from '../../src/platform/nftables/dataplane.js';
import { ENDPOINT_LAYOUTS } from '../../src/dataplane/nftables/static.js';
import { realClock } from '../../src/platform/clock.js';
import { runExplain, type CmdIO } from '../../src/cmd/explain.js';
import type { Explanation } from '../../src/cmd/explainview.js';
import type { ServiceExplanation } from '../../src/cmd/explainservice.js';
import { LOCAL, service, slice } from '../cases/fixtures.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../netns/cleanup.js';
import { newPrefix } from '../netns/names.js';

const PREFIX = newPrefix();
const NODE_IP = '192.168.0.2';

const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8'] },
  nodePortAddresses: null,
  localhostNodePorts: true,
  localIPs: ['127.0.0.1', NODE_IP],
};

/** s0: ClusterIP, two endpoints; s1: LoadBalancer eTP Local (one local endpoint); s2: no endpoints. */
export function toolsState(): SyncState {
  return syncStateFromObjects({
    services: [
      service('s0', { clusterIP: '172.30.0.10' }, [{ name: 'http', port: 80, targetPort: 8080 }]),
      service(
        's1',
        {
          clusterIP: '172.30.0.11',
          type: 'LoadBalancer',
          externalTrafficPolicy: 'Local',
          healthCheckNodePort: 30000,
          lb: ['1.2.3.4'],
        },
        [{ name: 'http', port: 80, nodePort: 30080 }],
      ),
      service('s2', { clusterIP: '172.30.0.12' }, [{ name: 'http', port: 80 }]),
    ],
    slices: [
      slice(
        's0',
        [{ name: 'http', port: 8080 }],
        [
          { ip: '10.180.0.1', node: LOCAL },
          { ip: '10.180.0.2', node: 'other' },
        ],
      ),
      slice(
        's1',
        [{ name: 'http', port: 80 }],
        [
          { ip: '10.181.0.1', node: LOCAL },
          { ip: '10.181.0.2', node: 'other' },
        ],
      ),
    ],
    family: 'IPv4',
    nodeIPs: { IPv4: NODE_IP },
    fullSync: true,
  });
}

const CONFIG6: DataplaneConfig = {
  ...CONFIG,
  family: 'IPv6',
  localDetector: { kind: 'cidr', cidrs: ['fd00:10::/64'] },
  localIPs: ['::1'],
};

/** One IPv6 ClusterIP Service with one endpoint. */
function toolsState6(): SyncState {
  return syncStateFromObjects({
    services: [service('v6', { clusterIP: 'fd00:172:30::10' }, [{ name: 'http', port: 80, targetPort: 8080 }])],
    slices: [slice('v6', [{ name: 'http', port: 8080 }], [{ ip: 'fd00:10::1' }])],
    family: 'IPv6',
    nodeIPs: { IPv6: 'fd00:1::2' },
    fullSync: true,
  });
}

async function explainJSON(NS: string | null, ...args: string[]): Promise<Explanation> {
  return JSON.parse(await explainOut(NS, '--output', 'json', ...args)) as Explanation;
}

async function explainOut(NS: string | null, ...args: string[]): Promise<string> {
  let out = '';
  let err = '';
  const io: CmdIO = {
    out: (s) => {
      out += s;
    },
    err: (s) => {
      err += s;
    },
  };
  const code = await runExplain([...(NS === null ? [] : ['--netns', NS]), ...args], io);
  assert.equal(code, 0, err);
  return out;
}

// nftables in each endpoint layout: explain reads whichever the proxy wrote.
const VARIANTS = [
  { mode: 'iptables', layout: null },
  ...ENDPOINT_LAYOUTS.map((layout) => ({ mode: 'nftables', layout })),
] as const;

for (const { mode, layout } of VARIANTS)
  describe(`explain on the real kernel (${mode}${layout ? `, ${layout} layout` : ''})`, { concurrency: false }, () => {
    const NS = `${PREFIX}tools-${mode}${layout ? `-${layout}` : ''}`;
    const sh = (...args: string[]) => execFileSync('ip', ['netns', 'exec', NS, ...args], { encoding: 'utf8' });
    const explainJSONIn = (...args: string[]) => explainJSON(NS, ...args);
    before(async () => {
      trackNamespace(NS);
      execFileSync('ip', ['netns', 'add', NS]);
      sh('ip', 'link', 'set', 'lo', 'up');
      sh('ip', 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1');
      sh('ip', 'link', 'set', 'eth0', 'up');
      sh('ip', 'addr', 'add', `${NODE_IP}/24`, 'dev', 'eth0');
      const run = netnsRunner(NS);
      const dp =
        mode === 'iptables'
          ? new IptablesDataplane({
              config: CONFIG,
              run,
              sysctl: runnerSysctl(run),
              clock: realClock,
              syncPeriodMs: 30_000,
            })
          : new NftablesDataplane({ config: CONFIG, netns: NS, layout: layout! });
      await dp.sync(toolsState());
      const dp6 =
        mode === 'iptables'
          ? new IptablesDataplane({
              config: CONFIG6,
              run,
              sysctl: runnerSysctl(run),
              clock: realClock,
              syncPeriodMs: 30_000,
            })
          : new NftablesDataplane({ config: CONFIG6, netns: NS, layout: layout! });
      await dp6.sync(toolsState6());
    });
    after(() => {
      deleteNamespaceSync(NS);
      untrackNamespace(NS);
    });

    it('detects the mode; a ClusterIP goes to both endpoints at 50% each, named by its Service', async () => {
      const e = await explainJSONIn('--src', '10.0.0.5', '--dst', '172.30.0.10', '--port', '80');
      assert.equal(e.mode, mode);
      assert.equal(e.verdict, 'DNAT');
      assert.equal(e.service, 'ns1/s0:http');
      assert.deepEqual(e.candidates, [
        { endpoint: '10.180.0.1:8080', probability: 0.5 },
        { endpoint: '10.180.0.2:8080', probability: 0.5 },
      ]);
      assert.equal(e.masquerade, false);
      if (mode === 'iptables') {
        assert.deepEqual(
          e.steps.slice(0, 2).map((s) => s.where),
          ['nat/PREROUTING', 'nat/KUBE-SERVICES'],
        );
        assert.match(e.steps[1]!.rule, /--comment "ns1\/s0:http cluster IP"/);
      } else {
        // filter-prerouting-pre-dnat (firewall check) comes first, then the nat hook.
        const at = e.steps.findIndex((s) => s.where === 'nat-prerouting');
        assert.ok(at >= 1, JSON.stringify(e.steps));
        assert.equal(e.steps[at + 1]!.where, 'services');
        assert.match(e.steps[at + 1]!.rule, /vmap @service-ips/);
      }
      assert.deepEqual(e.notUnderstood, []);
    });

    it('a node-local client of the ClusterIP is masqueraded (walks nat OUTPUT)', async () => {
      const e = await explainJSONIn('--src', NODE_IP, '--dst', '172.30.0.10', '--port', '80');
      if (mode === 'iptables') assert.equal(e.steps[0]!.where, 'nat/OUTPUT');
      else
        assert.ok(e.steps.some((s) => s.where === 'nat-output') && !e.steps.some((s) => s.where === 'nat-prerouting'));
      assert.equal(e.verdict, 'DNAT');
      assert.equal(e.masquerade, true);
    });

    it('a Service without endpoints is REJECTed', async () => {
      const e = await explainJSONIn('--src', '10.0.0.5', '--dst', '172.30.0.12', '--port', '80');
      assert.equal(e.verdict, 'REJECT');
      assert.equal(e.service, 'ns1/s2:http');
      if (mode === 'nftables')
        assert.ok(
          e.steps.some((s) => s.where === 'service-endpoints-check'),
          JSON.stringify(e.steps),
        );
      assert.deepEqual(e.candidates, []);
    });

    it('eTP Local LoadBalancer from outside: only the local endpoint', async () => {
      const e = await explainJSONIn('--src', '203.0.113.2', '--dst', '1.2.3.4', '--port', '80');
      assert.equal(e.verdict, 'DNAT');
      assert.deepEqual(e.candidates, [{ endpoint: '10.181.0.1:80', probability: 1 }]);
      assert.equal(e.masquerade, false);
      // The NodePort on the node address, same policy.
      const np = await explainJSONIn('--src', '203.0.113.2', '--dst', NODE_IP, '--port', '30080');
      assert.deepEqual(
        np.candidates.map((c) => c.endpoint),
        ['10.181.0.1:80'],
      );
    });

    it('an unknown address is not a service; UDP to a TCP service neither', async () => {
      const e = await explainJSONIn('--src', '10.0.0.5', '--dst', '172.30.0.99', '--port', '80');
      assert.equal(e.verdict, 'NONE');
      assert.match(e.summary, /not a service address/);
      // A wrong protocol/port on a ClusterIP: iptables has no rule for it; nftables rejects it (cluster-ips-check).
      const udp = await explainJSONIn('--src', '10.0.0.5', '--dst', '172.30.0.10', '--port', '80', '--protocol', 'udp');
      assert.equal(udp.verdict, mode === 'iptables' ? 'NONE' : 'REJECT');
    });

    it('IPv6: ip6tables / the ip6 table are read for an IPv6 destination', async () => {
      const e = await explainJSONIn('--src', 'fd00:10::5', '--dst', 'fd00:172:30::10', '--port', '80');
      assert.equal(e.verdict, 'DNAT');
      assert.equal(e.service, 'ns1/v6:http');
      assert.deepEqual(e.candidates, [{ endpoint: '[fd00:10::1]:8080', probability: 1 }]);
    });

    it('text output names every rule, the verdict and the candidates; bad flags exit 2', async () => {
      let out = '';
      let err = '';
      const io: CmdIO = {
        out: (s) => {
          out += s;
        },
        err: (s) => {
          err += s;
        },
      };
      assert.equal(
        await runExplain(['--netns', NS, '--src', '10.0.0.5', '--dst', '172.30.0.10', '--port', '80'], io),
        0,
      );
      assert.match(
        out,
        mode === 'iptables'
          ? /nat\/KUBE-SERVICES: -d 172\.30\.0\.10\/32 .*-j KUBE-SVC-/
          : /services: ip daddr \. meta l4proto \. th dport vmap @service-ips/,
      );
      assert.match(out, /Verdict: +DNAT/);
      assert.match(out, /endpoint 10\.180\.0\.2:8080 +probability 50%/);
      assert.equal(await runExplain(['--src', 'nope', '--dst', '172.30.0.10', '--port', '80'], io), 2);
      assert.match(err, /--src: not an IP address/);
    });
    it('--from FILE: a saved dump of these rules gives the same answers as the live kernel', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'kpt-explain-'));
      try {
        const file = join(dir, 'dump');
        // What a support engineer asks for on a broken node.
        writeFileSync(
          file,
          mode === 'iptables'
            ? sh('iptables-save', '-c')
            : sh('nft', 'list', 'ruleset') + sh('nft', '-j', 'list', 'table', 'ip', 'kube-proxy'),
        );
        const packets = [
          ['--src', '10.0.0.5', '--dst', '172.30.0.10', '--port', '80'],
          ['--src', '10.0.0.5', '--dst', '172.30.0.12', '--port', '80'],
          ['--src', '203.0.113.2', '--dst', '1.2.3.4', '--port', '80'],
          ['--src', '203.0.113.2', '--dst', NODE_IP, '--port', '30080'],
        ];
        for (const p of packets) {
          const live = await explainJSON(NS, ...p);
          const saved = await explainJSON(null, '--from', file, '--local-ip', NODE_IP, ...p);
          assert.deepEqual(saved, live, p.join(' '));
        }
        assert.equal((await explainJSON(null, '--from', file, ...packets[0]!)).verdict, 'DNAT');
        // A file that is neither: a clear error naming it, exit 2.
        writeFileSync(file, 'hello\n');
        let err = '';
        const code = await runExplain(['--from', file, ...packets[0]!], { out: () => {}, err: (s) => (err += s) });
        assert.equal(code, 2);
        assert.match(err, /dump: neither iptables-save output nor an nft listing/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('--service NS/NAME: every address of the Service and what it does, from off the node and from the node', async () => {
      const views = JSON.parse(await explainOut(NS, '--service', 'ns1/s1', '--output', 'json')) as ServiceExplanation[];
      assert.equal(views.length, 1, 'IPv4 only: s1 has no IPv6 rules');
      const v = views[0]!;
      assert.equal(v.mode, mode);
      const byDst = new Map(v.addresses.map((a) => [`${a.address ?? 'node'}:${a.port}/${a.protocol}`, a]));
      assert.deepEqual([...byDst.keys()].sort(), ['1.2.3.4:80/TCP', '172.30.0.11:80/TCP', 'node:30080/TCP']);
      assert.equal(byDst.get('172.30.0.11:80/TCP')!.kind, 'cluster IP');
      assert.match(byDst.get('1.2.3.4:80/TCP')!.kind, /load balancer IP/);
      const endpoints = (dst: string, client: string) =>
        byDst
          .get(dst)!
          .views.find((x) => x.client === client)!
          .candidates.map((c) => c.endpoint);
      // Cluster traffic policy for the cluster IP: both endpoints; eTP Local outside: the local one only.
      assert.deepEqual(endpoints('172.30.0.11:80/TCP', 'off-node client'), ['10.181.0.1:80', '10.181.0.2:80']);
      assert.deepEqual(endpoints('1.2.3.4:80/TCP', 'off-node client'), ['10.181.0.1:80']);
      assert.deepEqual(endpoints('node:30080/TCP', 'off-node client'), ['10.181.0.1:80']);
      assert.equal(byDst.get('node:30080/TCP')!.views[0]!.dst, NODE_IP);
      // From the node itself the LB IP is short-circuited to every endpoint and masqueraded.
      const fromNode = byDst.get('1.2.3.4:80/TCP')!.views.find((x) => x.client === 'this node')!;
      assert.equal(fromNode.src, NODE_IP);
      assert.equal(fromNode.masquerade, true);
      // No endpoints: the cluster IP is rejected; text form lists it.
      const s2 = await explainOut(NS, '--service', 'ns1/s2');
      assert.match(s2, /^Service ns1\/s2 on this node/m);
      assert.match(s2, /ns1\/s2:http +cluster IP +172\.30\.0\.12:80\/TCP/);
      assert.match(s2, /from off-node client 203\.0\.113\.1 +REJECT/);
      let err = '';
      assert.equal(
        await runExplain(['--netns', NS, '--service', 'ns1/nope'], { out: () => {}, err: (s) => (err += s) }),
        2,
      );
      assert.match(err, /no IPv4 rules for Service ns1\/nope/);
    });
  });
