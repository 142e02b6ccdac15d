// nftables mode: the datapath canary turns /healthz and a health-check node
// port to 503 when traffic to what the proxy programmed stops getting through
// in ways no sync and no drift watch notices (a foreign table whose output
// hook, at a higher priority than our nat, drops the canary's ClusterIP; a
// foreign input hook that drops in front of the endpoint), posts an Event and
// shows it in /statusz, and turns back once the break is undone.
//
// The cluster is dual-stack: the IPv6 canary (ClusterIP 100::a9fe:fffd) is
// first blind without a route covering it (the node stays healthy), then,
// with an IPv6 default route, programmed and healthy; a foreign ip6 table
// dropping it turns IPv6 unhealthy in /healthz while the IPv4 canary stays
// healthy, and back once it is deleted.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { E2EEnv } from '../netns/e2e.js';
import {
  CanaryProbe,
  CANARY_VIP,
  CANARY_VIP6,
  foreignInputDrop,
  foreignOutputDrop,
  startCanaryCluster,
  ipv6CanaryBlindThenRouted,
} from '../netns/canary.js';
import { nsRun } from '../netns/spawn.js';
import { canaryEndpointInNftTable } from '../../src/cmd/modes/canaryrules.js';
import { joinHostPort } from '../../src/core/ip.js';

const endpointText = (at: readonly [string, number] | null) => (at ? joinHostPort(at[0], at[1]) : null);

const HC_PORT = 32162;

describe(
  'nftables mode: the datapath canary fails health when traffic does not get through',
  { concurrency: false },
  () => {
    let env: E2EEnv;
    let probe: CanaryProbe;
    const node2 = () => env.cluster.node('node2');

    before(async () => {
      ({ env, probe } = await startCanaryCluster('nftables', {
        healthCheckNodePort: HC_PORT,
        nodePort: 30262,
        clusterIP: '10.96.62.11',
        ipv6: true,
      }));
    });

    after(async () => {
      probe?.print('canary-nftables');
      await env?.dispose();
    });

    it('the canary is programmed like a Service, kept out of the service ports /statusz lists', async () => {
      await probe.waitHealthy('healthy at start', 30_000);
      const table = (await nsRun(node2().ns, ['nft', 'list', 'table', 'ip', 'kube-proxy'])).stdout;
      assert.match(table, new RegExp(`${CANARY_VIP.replaceAll('.', '\\.')} \\. tcp \\. 10257 : goto service-`));
      // What `diff` reads with the proxy stopped is the listener /statusz reports.
      assert.equal(endpointText(canaryEndpointInNftTable(table)), await probe.canaryEndpoint('IPv4'));
      await probe.assertCanaryUnlisted();
    });

    it('IPv6: blind and harmless without a route to its ClusterIP, then programmed and healthy once one exists', async () => {
      await ipv6CanaryBlindThenRouted(env, probe, 'node2');
      const table = (await nsRun(node2().ns, ['nft', 'list', 'table', 'ip6', 'kube-proxy'])).stdout;
      assert.match(table, new RegExp(`${CANARY_VIP6} \\. tcp \\. 10257 : goto service-`));
      assert.equal(endpointText(canaryEndpointInNftTable(table)), await probe.canaryEndpoint('IPv6'));
    });

    it('a foreign table whose output hook drops the ClusterIP before our nat', async () => {
      const { down, up } = await probe.measure(foreignOutputDrop(node2().ns));
      assert.ok(down > 0 && up > 0);
    });

    it('a foreign input hook that drops in front of the endpoint', async () => {
      const { down, up } = await probe.measure(await foreignInputDrop(probe, node2().ns));
      assert.ok(down > 0 && up > 0);
    });

    it('IPv6: a foreign ip6 table whose output hook drops the IPv6 ClusterIP; the IPv4 canary is unaffected', async () => {
      const { down, up } = await probe.measure(foreignOutputDrop(node2().ns, 'IPv6'), 'IPv6');
      assert.ok(down > 0 && up > 0);
    });
  },
);
