// ebpf mode repairs its kernel state when someone else removes it, within 5 s
// with default flags, in the namespace cluster: every tcx link unpinned
// (which detaches the programs: Services stop answering), and a pinned map
// unlinked (the map lives on in the programs, but a restarted proxy and the
// tools would no longer find it). SharedNode's check every second reports it
// (src/platform/ebpf/node.ts); the engine's full sync pins and attaches
// again. Each repair is timed and printed, and must be counted in
// kubeproxy_ts_datapath_repairs_total, posted as a DatapathRepaired Event and
// shown in /statusz.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TEST_PIN_ROOT } from '../ebpf/bpfnode.js';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { E2E_MODES } from '../netns/proxy.js';
import { RepairProbe, REPAIR_TARGET_MS } from '../netns/repair.js';

const RUN = E2E_MODES.includes('ebpf');
const VIP = '10.96.62.10';

if (RUN)
  describe(
    'ebpf mode repairs detached programs and unpinned maps within 5 s (namespace cluster)',
    { concurrency: false },
    () => {
      let env: E2EEnv;
      let probe: RepairProbe;

      before(async () => {
        env = await E2EEnv.start('ebpf');
        const ports = webPorts();
        const eps = [{ pod: env.cluster.pod('node1-a') }, { pod: env.cluster.pod('node1-b') }];
        await env.apply(
          service({ name: 'repair', clusterIP: VIP, ports }),
          endpointSlice('repair', eps, ports, 'repair-v4'),
        );
        await env.waitReachable('node2-b', 'tcp', VIP, 80);
        probe = new RepairProbe(env, 'node2', 'ebpf');
      });

      after(async () => {
        probe?.print('ebpf-repair');
        await env?.dispose();
      });

      const bpf = () => env.proxy('node2').bpfNode!;
      const ls = async (dir: string) =>
        (await bpf().exec(['ls', dir], { allowFailure: true })).stdout.split('\n').filter(Boolean).sort();
      const answers = () => env.waitReachable('node2-b', 'tcp', VIP, 80, {}, 10_000);

      it('every tcx link unpinned (the programs detach)', async () => {
        const dir = `${TEST_PIN_ROOT}/links`;
        const links = (await ls(dir)).filter((l) => l.startsWith('tcx-'));
        assert.ok(links.length >= 2, links.join(' '));
        const ms = await probe.measure({
          what: `rm ${dir}/tcx-* (${links.length} links)`,
          fault: () => bpf().exec(['sh', '-c', `rm ${dir}/tcx-*`]),
          repaired: async () => (await ls(dir)).filter((l) => l.startsWith('tcx-')).join(' ') === links.join(' '),
          answers,
        });
        assert.ok(ms <= REPAIR_TARGET_MS, `repaired after ${ms} ms`);
      });

      it('a pinned map unlinked', async () => {
        const version = (await ls(TEST_PIN_ROOT)).find((d) => /^v\d+$/.test(d));
        assert.ok(version);
        const dir = `${TEST_PIN_ROOT}/${version}/maps`;
        const maps = await ls(dir);
        assert.ok(maps.includes('kpt_svc'), maps.join(' '));
        const ms = await probe.measure({
          what: `rm ${dir}/kpt_svc`,
          fault: () => bpf().exec(['rm', `${dir}/kpt_svc`]),
          repaired: async () => (await ls(dir)).join(' ') === maps.join(' '),
          answers,
        });
        assert.ok(ms <= REPAIR_TARGET_MS, `repaired after ${ms} ms`);
        // The pin is the very map the programs use: what a restarted proxy adopts.
        const show = await bpf().exec(['bpftool', 'map', 'show', 'pinned', `${dir}/kpt_svc`]);
        const id = /^(\d+):/.exec(show.stdout)?.[1];
        const used = await bpf().exec(['bpftool', 'prog', 'show', 'name', 'kpt_ingress']);
        assert.ok(id && new RegExp(`map_ids [\\d,]*\\b${id}\\b`).test(used.stdout), `${show.stdout}\n${used.stdout}`);
      });
    },
  );
