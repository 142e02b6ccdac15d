// iptables mode repairs rules another actor changed within 5 s, with default
// flags (a 30 s sync period), in the namespace cluster: a flushed service
// chain (which no sync-time check sees), the jump from PREROUTING deleted,
// and KUBE-SERVICES flushed with a service chain deleted. The nf_tables
// monitor reports them (src/platform/iptables/driftwatch.ts); the engine's
// full sync writes them back. Each repair is timed and printed, and must be
// counted in kubeproxy_ts_datapath_repairs_total, posted as a
// DatapathRepaired Event and shown in /statusz. Rules others change in the
// built-in chains for their own chains, and our own syncs, repair nothing.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { RepairProbe, REPAIR_TARGET_MS } from '../netns/repair.js';
import { nsRun } from '../netns/spawn.js';

const VIP = '10.96.61.10';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe(
  'iptables mode repairs changed rules within 5 s (namespace cluster, default flags)',
  { concurrency: false },
  () => {
    let env: E2EEnv;
    let probe: RepairProbe;
    let svcChain = '';

    before(async () => {
      env = await E2EEnv.start('iptables');
      const ports = webPorts();
      const eps = [{ pod: env.cluster.pod('node1-a') }, { pod: env.cluster.pod('node1-b') }];
      await env.apply(
        service({ name: 'repair', clusterIP: VIP, ports }),
        endpointSlice('repair', eps, ports, 'repair-v4'),
      );
      await env.waitReachable('node2-b', 'tcp', VIP, 80);
      probe = new RepairProbe(env, 'node2', 'iptables');
      const m = new RegExp(`^-A KUBE-SERVICES -d ${VIP}/32 .*--dport 80 -j (KUBE-SVC-\\w+)$`, 'm').exec(await save());
      assert.ok(m, 'the service chain of port 80');
      svcChain = m[1]!;
    });

    after(async () => {
      probe?.print('iptables-repair');
      await env?.dispose();
    });

    const node2 = () => env.cluster.node('node2').ns;
    const ipt = (...args: string[]) => nsRun(node2(), ['iptables', '-w', '5', '-t', 'nat', ...args]);
    const save = async () => (await nsRun(node2(), ['iptables-save', '-t', 'nat'])).stdout;
    const rulesOf = (text: string, chain: string) => text.split('\n').filter((l) => l.startsWith(`-A ${chain} `));
    const answers = () => env.waitReachable('node2-b', 'tcp', VIP, 80, {}, 10_000);

    it('a flushed service chain', async () => {
      const before = rulesOf(await save(), svcChain);
      assert.ok(before.length > 0);
      const ms = await probe.measure({
        what: `iptables -t nat -F ${svcChain}`,
        fault: () => ipt('-F', svcChain),
        repaired: async () => rulesOf(await save(), svcChain).length === before.length,
        answers,
      });
      assert.ok(ms <= REPAIR_TARGET_MS, `repaired after ${ms} ms`);
    });

    it('the jump from PREROUTING to KUBE-SERVICES deleted', async () => {
      const jump = rulesOf(await save(), 'PREROUTING').find((l) => l.endsWith('-j KUBE-SERVICES'));
      assert.ok(jump);
      // iptables-save quotes the comment; as arguments it is one word without the quotes.
      const args = jump
        .replace(/^-A PREROUTING /, '')
        .match(/"[^"]*"|\S+/g)!
        .map((a) => a.replace(/^"|"$/g, ''));
      const ms = await probe.measure({
        what: 'iptables -t nat -D PREROUTING ... -j KUBE-SERVICES',
        fault: () => ipt('-D', 'PREROUTING', ...args),
        repaired: async () => rulesOf(await save(), 'PREROUTING').includes(jump),
        answers,
      });
      assert.ok(ms <= REPAIR_TARGET_MS, `repaired after ${ms} ms`);
    });

    it('KUBE-SERVICES flushed and a service chain deleted', async () => {
      const before = await save();
      const services = rulesOf(before, 'KUBE-SERVICES').length;
      const ms = await probe.measure({
        what: `iptables-restore: -F KUBE-SERVICES, -F and -X ${svcChain}`,
        // One transaction, as a firewall reload would do it.
        fault: () =>
          nsRun(node2(), ['iptables-restore', '-w', '5', '--noflush'], {
            input: `*nat
-F KUBE-SERVICES
-F ${svcChain}
-X ${svcChain}
COMMIT
`,
          }),
        repaired: async () => {
          const now = await save();
          return rulesOf(now, 'KUBE-SERVICES').length === services && rulesOf(now, svcChain).length > 0;
        },
        answers,
      });
      assert.ok(ms <= REPAIR_TARGET_MS, `repaired after ${ms} ms`);
    });

    it('a rule others add and delete in PREROUTING for a chain of theirs repairs nothing; nor do our own syncs', async () => {
      // A report that came while a repair ran is repaired by one more full sync: let that finish first.
      let repairs = -1;
      await env.waitFor('the repair count settles', async () => {
        const n = await probe.repairsMetric();
        const settled = n === repairs;
        repairs = n;
        if (!settled) await sleep(1500);
        return settled ? true : undefined;
      });
      // Earlier cases' faults may have landed during one of our restores and been counted as
      // unaccounted changes (correctly: the monitor cannot tell them apart); count from here.
      const unaccounted = await probe.repairsMetric('changes_unaccounted');
      const mark = env.proxy('node2').logMark();
      await ipt('-N', 'SOMEONE-ELSE');
      await ipt('-I', 'PREROUTING', '1', '-j', 'SOMEONE-ELSE');
      await ipt('-D', 'PREROUTING', '-j', 'SOMEONE-ELSE');
      await ipt('-X', 'SOMEONE-ELSE');
      // Our own syncs meanwhile: a new Service is a partial sync with a restore.
      await env.apply(
        service({ name: 'repair-2', clusterIP: '10.96.61.11', ports: webPorts() }),
        endpointSlice('repair-2', [{ pod: env.cluster.pod('node1-a') }], webPorts(), 'repair-2-v4'),
      );
      await env.waitReachable('node2-b', 'tcp', '10.96.61.11', 80);
      await sleep(1500);
      assert.equal(
        await probe.repairsMetric(),
        repairs,
        `no repair: ${env.proxy('node2').logSince(mark).slice(-3000)}`,
      );
      assert.doesNotMatch(env.proxy('node2').logSince(mark), /Rules changed by another actor/);
      assert.equal(
        await probe.repairsMetric('changes_unaccounted'),
        unaccounted,
        'our own restores were never suspected',
      );
    });
  },
);
