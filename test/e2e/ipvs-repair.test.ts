// ipvs mode repairs what another actor removes within 5 s, with default flags
// (a 30 s sync period), in the namespace cluster: the IPVS table cleared
// (`ipvsadm -C`: every Service stops answering), a Service address deleted
// from kube-ipvs0 (the node no longer takes its packets as local), and
// KUBE-SERVICES flushed. The dataplane's check every second compares the
// first two with its last sync, nf_tables events report the third
// (src/platform/ipvs/dataplane.ts); the engine's full sync writes them back.
// Each repair is timed and printed, and must be counted in
// kubeproxy_ts_datapath_repairs_total, posted as a DatapathRepaired Event and
// shown in /statusz. Runs where IPVS is (the QEMU guest:
// test/guest/cluster-suites.guest.ts), where the 5 s are scaled by the
// emulation's timescale (KPT_TIMEOUT_SCALE) like every other wait.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { E2E_MODES } from '../netns/proxy.js';
import { RepairProbe, REPAIR_TARGET_MS } from '../netns/repair.js';
import { nsRun } from '../netns/spawn.js';
import { scaled } from '../netns/timescale.js';

const RUN = E2E_MODES.includes('ipvs');
const VIP = '10.96.64.10';

if (RUN)
  describe(
    'ipvs mode repairs a cleared IPVS table, a removed kube-ipvs0 address and a flushed chain within 5 s (namespace cluster)',
    { concurrency: false },
    () => {
      let env: E2EEnv;
      let probe: RepairProbe;

      before(async () => {
        env = await E2EEnv.start('ipvs');
        const ports = webPorts();
        const eps = [{ pod: env.cluster.pod('node1-a') }, { pod: env.cluster.pod('node1-b') }];
        await env.apply(
          service({ name: 'ipvs-repair', clusterIP: VIP, ports }),
          endpointSlice('ipvs-repair', eps, ports, 'ipvs-repair-v4'),
        );
        await env.waitReachable('node2-b', 'tcp', VIP, 80);
        probe = new RepairProbe(env, 'node2', 'ipvs');
        // In the guest the cluster suites ran first on this cluster: their many syncs, our own
        // changes, must not have looked like drift.
        assert.equal(await probe.repairsMetric(), 0, 'no repair before anything was broken');
      });

      after(async () => {
        probe?.print('ipvs-repair');
        await env?.dispose();
      });

      const node2 = () => env.cluster.node('node2').ns;
      /** The real servers of VIP:80 as ipvsadm lists them (none when the virtual server is gone). */
      const realServers = async () =>
        (await nsRun(node2(), ['ipvsadm', '-Ln', '-t', `${VIP}:80`], { allowFailure: true })).stdout
          .split('\n')
          .filter((l) => l.includes('->') && !l.includes('RemoteAddress'))
          .map((l) => l.trim().split(/\s+/)[1]!)
          .sort();
      const bound = async () =>
        (await nsRun(node2(), ['ip', '-o', '-4', 'addr', 'show', 'dev', 'kube-ipvs0'])).stdout.includes(` ${VIP}/32 `);
      const answers = () => env.waitReachable('node2-b', 'tcp', VIP, 80, {}, 10_000);

      it('the IPVS table cleared (ipvsadm -C)', async () => {
        const before = await realServers();
        assert.equal(before.length, 2, before.join(' '));
        const ms = await probe.measure({
          what: 'ipvsadm -C',
          fault: () => nsRun(node2(), ['ipvsadm', '-C']),
          repaired: async () => (await realServers()).join(' ') === before.join(' '),
          answers,
        });
        assert.ok(ms <= scaled(REPAIR_TARGET_MS), `repaired after ${ms} ms`);
        assert.ok((await probe.repairsMetric('rules_changed')) >= 1, 'counted as rules_changed');
      });

      it('a Service address deleted from kube-ipvs0', async () => {
        assert.equal(await bound(), true);
        const ms = await probe.measure({
          what: `ip addr del ${VIP}/32 dev kube-ipvs0`,
          fault: () => nsRun(node2(), ['ip', 'addr', 'del', `${VIP}/32`, 'dev', 'kube-ipvs0']),
          repaired: bound,
          answers,
        });
        assert.ok(ms <= scaled(REPAIR_TARGET_MS), `repaired after ${ms} ms`);
        assert.ok((await probe.repairsMetric('address_removed')) >= 1, 'counted as address_removed');
      });

      it('KUBE-SERVICES flushed (iptables on the nf_tables backend)', async () => {
        const save = async () => (await nsRun(node2(), ['iptables-save', '-t', 'nat'])).stdout;
        const rules = async () => (await save()).split('\n').filter((l) => l.startsWith('-A KUBE-SERVICES '));
        const before = await rules();
        assert.ok(before.length > 0, await save());
        const ms = await probe.measure({
          what: 'iptables -t nat -F KUBE-SERVICES',
          fault: () => nsRun(node2(), ['iptables', '-w', '5', '-t', 'nat', '-F', 'KUBE-SERVICES']),
          repaired: async () => (await rules()).join('\n') === before.join('\n'),
          answers,
        });
        assert.ok(ms <= scaled(REPAIR_TARGET_MS), `repaired after ${ms} ms`);
      });
    },
  );
