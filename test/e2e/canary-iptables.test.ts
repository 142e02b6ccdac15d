// iptables mode: the datapath canary turns /healthz and a health-check node
// port to 503 when traffic to what the proxy programmed stops getting through
// in ways no sync and no drift watch notices (a foreign DROP in the raw
// table's OUTPUT, before our nat rules; a DROP in INPUT in front of the
// endpoint), posts an Event and shows it in /statusz, and turns back once the
// break is undone. Times are printed for the report.
//
// The cluster is dual-stack: the IPv6 canary (ClusterIP 100::a9fe:fffd) is
// first blind without a route covering it (the node stays healthy), then,
// with an IPv6 default route, programmed and healthy; a foreign DROP in
// ip6tables' raw OUTPUT turns IPv6 unhealthy in /healthz while the IPv4 canary stays
// healthy, and back once it is deleted.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { E2EEnv } from '../netns/e2e.js';
import {
  CanaryProbe,
  CANARY_VIP,
  CANARY_VIP6,
  startCanaryCluster,
  ipv6CanaryBlindThenRouted,
} from '../netns/canary.js';
import { nsRun } from '../netns/spawn.js';
import { canaryEndpointInIptablesSave } from '../../src/cmd/modes/canaryrules.js';
import { joinHostPort } from '../../src/core/ip.js';

const endpointText = (at: readonly [string, number] | null) => (at ? joinHostPort(at[0], at[1]) : null);

const HC_PORT = 32161;

describe(
  'iptables mode: the datapath canary fails health when traffic does not get through',
  { concurrency: false },
  () => {
    let env: E2EEnv;
    let probe: CanaryProbe;
    const node2 = () => env.cluster.node('node2');
    const ipt = (...args: string[]) => nsRun(node2().ns, ['iptables', '-w', '5', ...args]);

    before(async () => {
      ({ env, probe } = await startCanaryCluster('iptables', {
        healthCheckNodePort: HC_PORT,
        nodePort: 30261,
        clusterIP: '10.96.62.10',
        ipv6: true,
      }));
    });

    after(async () => {
      probe?.print('canary-iptables');
      await env?.dispose();
    });

    it('the canary is programmed like a Service, kept out of the service ports /statusz lists', async () => {
      await probe.waitHealthy('healthy at start', 30_000);
      const save = (await nsRun(node2().ns, ['iptables-save', '-t', 'nat'])).stdout;
      assert.match(save, new RegExp(`-A KUBE-SERVICES -d ${CANARY_VIP}/32 .*-j KUBE-SVC-`));
      // What `diff` reads with the proxy stopped is the listener /statusz reports.
      assert.equal(endpointText(canaryEndpointInIptablesSave(save)), await probe.canaryEndpoint('IPv4'));
      await probe.assertCanaryUnlisted();
    });

    it('IPv6: blind and harmless without a route to its ClusterIP, then programmed and healthy once one exists', async () => {
      await ipv6CanaryBlindThenRouted(env, probe, 'node2');
      const save = (await nsRun(node2().ns, ['ip6tables-save', '-t', 'nat'])).stdout;
      assert.match(save, new RegExp(`-A KUBE-SERVICES -d ${CANARY_VIP6}/128 .*-j KUBE-SVC-`));
      assert.equal(endpointText(canaryEndpointInIptablesSave(save)), await probe.canaryEndpoint('IPv6'));
    });

    it('a foreign DROP in raw OUTPUT, before our nat rules', async () => {
      const rule = ['-d', CANARY_VIP, '-p', 'tcp', '-j', 'DROP'];
      const { down, up } = await probe.measure({
        what: `iptables -t raw -I OUTPUT 1 -d ${CANARY_VIP} -p tcp -j DROP`,
        fault: () => ipt('-t', 'raw', '-I', 'OUTPUT', '1', ...rule),
        undo: () => ipt('-t', 'raw', '-D', 'OUTPUT', ...rule),
      });
      assert.ok(down > 0 && up > 0);
    });

    it('a DROP in INPUT in front of the endpoint', async () => {
      const save = (await nsRun(node2().ns, ['iptables-save', '-t', 'nat'])).stdout;
      const m = /canary\/datapath.*--to-destination ([\d.]+):(\d+)/.exec(save);
      assert.ok(m, 'the canary endpoint DNAT');
      const rule = ['-d', m[1]!, '-p', 'tcp', '--dport', m[2]!, '-j', 'DROP'];
      const { down, up } = await probe.measure({
        what: `iptables -I INPUT 1 -d ${m[1]} -p tcp --dport ${m[2]} -j DROP`,
        fault: () => ipt('-I', 'INPUT', '1', ...rule),
        undo: () => ipt('-D', 'INPUT', ...rule),
      });
      assert.ok(down > 0 && up > 0);
    });

    it('IPv6: a foreign DROP in ip6tables raw OUTPUT; the IPv4 canary is unaffected', async () => {
      const rule = ['-d', CANARY_VIP6, '-p', 'tcp', '-j', 'DROP'];
      const ip6t = (...args: string[]) => nsRun(node2().ns, ['ip6tables', '-w', '5', ...args]);
      const { down, up } = await probe.measure(
        {
          what: `ip6tables -t raw -I OUTPUT 1 -d ${CANARY_VIP6} -p tcp -j DROP`,
          fault: () => ip6t('-t', 'raw', '-I', 'OUTPUT', '1', ...rule),
          undo: () => ip6t('-t', 'raw', '-D', 'OUTPUT', ...rule),
        },
        'IPv6',
      );
      assert.ok(down > 0 && up > 0);
    });
  },
);
