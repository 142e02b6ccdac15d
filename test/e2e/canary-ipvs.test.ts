// ipvs mode: the datapath canary turns /healthz and a health-check node port
// to 503 when traffic to what the proxy programmed stops getting through in
// ways neither a sync nor the mode's repair check notices: a foreign table
// whose output hook drops the canary's ClusterIP before IPVS sees it, and a
// foreign input hook that drops the connection IPVS forwarded to the
// endpoint. Health turns back once each is undone. Runs where IPVS is (the
// QEMU guest: test/guest/cluster-suites.guest.ts), on the shared cluster.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { E2EEnv } from '../netns/e2e.js';
import { CanaryProbe, CANARY_VIP, foreignInputDrop, foreignOutputDrop, startCanaryCluster } from '../netns/canary.js';
import { E2E_MODES } from '../netns/proxy.js';
import { nsRun } from '../netns/spawn.js';

const RUN = E2E_MODES.includes('ipvs');
const HC_PORT = 32164;

if (RUN)
  describe(
    'ipvs mode: the datapath canary fails health when traffic does not get through',
    { concurrency: false },
    () => {
      let env: E2EEnv;
      let probe: CanaryProbe;
      const node2 = () => env.cluster.node('node2');

      before(async () => {
        ({ env, probe } = await startCanaryCluster('ipvs', {
          healthCheckNodePort: HC_PORT,
          nodePort: 30264,
          clusterIP: '10.96.62.13',
        }));
      });

      after(async () => {
        probe?.print('canary-ipvs');
        await env?.dispose();
      });

      it('the canary is a virtual server, kept out of the service ports /statusz lists', async () => {
        await probe.waitHealthy('healthy at start', 60_000);
        const addrs = (await nsRun(node2().ns, ['ip', '-4', 'addr', 'show', 'dev', 'kube-ipvs0'])).stdout;
        assert.match(addrs, new RegExp(`inet ${CANARY_VIP.replaceAll('.', '\\.')}/32`));
        await probe.assertCanaryUnlisted();
      });

      it('a foreign table whose output hook drops the ClusterIP before IPVS', async () => {
        const { down, up } = await probe.measure(foreignOutputDrop(node2().ns));
        assert.ok(down > 0 && up > 0);
      });

      it('a foreign input hook that drops the forwarded connection in front of the endpoint', async () => {
        const { down, up } = await probe.measure(await foreignInputDrop(probe, node2().ns));
        assert.ok(down > 0 && up > 0);
      });
    },
  );
