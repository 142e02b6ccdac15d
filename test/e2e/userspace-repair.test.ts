// userspace mode repairs what others break within 5 s, with default flags,
// in the namespace cluster: its redirect table flushed (nf_tables events),
// and a TCP and a UDP listener destroyed with `ss -K` (the TCP one dies
// without Node hearing of it; the check every second asks the kernel,
// src/platform/userspace/sockstate.ts). The engine's full sync opens a new
// listener and points the redirect at it. Each repair is timed and printed,
// and must be counted in kubeproxy_ts_datapath_repairs_total, posted as a
// DatapathRepaired Event and shown in /statusz.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { RepairProbe, REPAIR_TARGET_MS } from '../netns/repair.js';
import { nsRun } from '../netns/spawn.js';

const VIP = '10.96.63.10';
const TABLE = 'kube-proxy-userspace';

describe(
  'userspace mode repairs a flushed table and killed listeners within 5 s (namespace cluster)',
  { concurrency: false },
  () => {
    let env: E2EEnv;
    let probe: RepairProbe;

    before(async () => {
      env = await E2EEnv.start('userspace');
      const ports = webPorts();
      const eps = [{ pod: env.cluster.pod('node1-a') }, { pod: env.cluster.pod('node1-b') }];
      await env.apply(
        service({ name: 'repair', clusterIP: VIP, ports }),
        endpointSlice('repair', eps, ports, 'repair-v4'),
      );
      await env.waitReachable('node2-b', 'tcp', VIP, 80);
      await env.waitReachable('node2-b', 'udp', VIP, 53);
      probe = new RepairProbe(env, 'node2', 'userspace');
    });

    after(async () => {
      probe?.print('userspace-repair');
      await env?.dispose();
    });

    const node2 = () => env.cluster.node('node2').ns;
    const table = async () =>
      (await nsRun(node2(), ['nft', 'list', 'table', 'ip', TABLE], { allowFailure: true })).stdout;
    /** The listener port the redirect table sends VIP:port/proto to. */
    const portal = async (proto: 'tcp' | 'udp', port: number) =>
      Number(
        new RegExp(`${VIP.replaceAll('.', '\\.')} \\. ${proto} \\. ${port} : (\\d+)`).exec(await table())?.[1] ?? 0,
      );
    const sockets = async (proto: 'tcp' | 'udp') =>
      (await nsRun(node2(), ['ss', '-Hn', proto === 'tcp' ? '-tl' : '-ul'])).stdout;
    const listens = async (proto: 'tcp' | 'udp', port: number) =>
      port > 0 && new RegExp(`:${port}\\s`).test(await sockets(proto));

    it('the redirect table flushed', async () => {
      const before = await table();
      assert.match(before, new RegExp(VIP.replaceAll('.', '\\.')));
      const ms = await probe.measure({
        what: `nft flush table ip ${TABLE}`,
        fault: () => nsRun(node2(), ['nft', 'flush', 'table', 'ip', TABLE]),
        repaired: async () => (await table()) === before,
        answers: () => env.waitReachable('node2-b', 'tcp', VIP, 80, {}, 10_000),
      });
      assert.ok(ms <= REPAIR_TARGET_MS, `repaired after ${ms} ms`);
    });

    for (const [proto, port] of [
      ['tcp', 80],
      ['udp', 53],
    ] as const) {
      it(`a ${proto.toUpperCase()} listener destroyed with ss -K`, async () => {
        const old = await portal(proto, port);
        assert.ok(await listens(proto, old), `listener ${old} open before`);
        const ms = await probe.measure({
          what: `ss -K ${proto} listener of ${VIP}:${port} (port ${old})`,
          fault: () => nsRun(node2(), ['ss', '-K', proto === 'tcp' ? '-tln' : '-uan', `sport = :${old}`]),
          repaired: async () => {
            const now = await portal(proto, port);
            return now !== old && (await listens(proto, now));
          },
          answers: () => env.waitReachable('node2-b', proto, VIP, port, {}, 10_000),
        });
        assert.ok(ms <= REPAIR_TARGET_MS, `repaired after ${ms} ms`);
      });
    }
  },
);
