// `kube-proxy-ts explain` on the real kernel, per mode: rules are applied by
// the real IptablesDataplane / NftablesDataplane inside a fresh network
// namespace (kpt-<pid>-<rand>-tools-<mode>), then explain reads them back
// from that namespace (--netns, mode detected) and must give the verdicts
// the rules implement. Never touches the root namespace.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../src/core/types.js';
import { netnsRunner } from '../../src/platform/exec.js';
import { IptablesDataplane, runnerSysctl } from '../../src/platform/iptables/index.js';
import { NftablesDataplane } from '../../src/platform/nftables/dataplane.js';
import { realClock } from '../../src/platform/clock.js';
import { runExplain, type CmdIO } from '../../src/cmd/explain.js';
import type { Explanation } from '../../src/cmd/explainview.js';
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

async function explainJSON(NS: string, ...args: string[]): Promise<Explanation> {
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
  const code = await runExplain(['--netns', NS, '--output', 'json', ...args], io);
  assert.equal(code, 0, err);
  return JSON.parse(out) as Explanation;
}

for (const mode of ['iptables', 'nftables'] as const)
  describe(`explain on the real kernel (${mode})`, { concurrency: false }, () => {
    const NS = `${PREFIX}tools-${mode}`;
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
          : new NftablesDataplane({ config: CONFIG, netns: NS });
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
          : new NftablesDataplane({ config: CONFIG6, netns: NS });
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
  });
