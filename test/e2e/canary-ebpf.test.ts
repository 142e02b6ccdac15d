// ebpf mode: the datapath canary turns /healthz and a health-check node port
// to 503 when the node's own connections to what the proxy programmed stop
// getting through in ways no sync and no drift watch notices, and back once
// the break is undone. The canary's connection leaves the proxy's process
// and is translated by the tc program on its way out, so the breaks are:
// a foreign output hook at priority raw (netfilter runs before tc egress),
// a foreign input hook in front of the endpoint, and one only this mode has:
// another actor deleting the canary's address from the pinned address map
// (the maps are the datapath; a partial sync writes only what changed, so
// the entry stays gone until the hourly full sync).
//
// The cluster is dual-stack: the IPv6 canary (ClusterIP 100::a9fe:fffd) is
// first blind without a route covering it (the node stays healthy), then,
// with an IPv6 default route, in the address map and healthy; a foreign ip6
// table dropping it turns IPv6 unhealthy in /healthz while the IPv4 canary
// stays healthy, and back once it is deleted.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { E2EEnv } from '../netns/e2e.js';
import {
  CanaryProbe,
  CANARY_VIP,
  CANARY_VIP6,
  foreignInputDrop,
  foreignOutputDrop,
  ipv6CanaryBlindThenRouted,
  startCanaryCluster,
  type CanaryBreak,
} from '../netns/canary.js';
import { parseIP } from '../../src/core/ip.js';
import { TEST_PIN_ROOT, type BpfNode } from '../ebpf/bpfnode.js';

const HC_PORT = 32163;
const ADDRS = `${TEST_PIN_ROOT}/v1/maps/kpt_addrs`;

/** The address map's key: 16 bytes, IPv4 in the IPv4-mapped IPv6 form (::ffff:a.b.c.d). */
function addrKey(ip: string): string[] {
  const p = parseIP(ip)!;
  const bytes = p.family === 'IPv4' ? [...Array<number>(10).fill(0), 255, 255, ...p.bytes] : [...p.bytes];
  return bytes.map(String);
}

describe(
  'ebpf mode: the datapath canary fails health when traffic does not get through',
  { concurrency: false },
  () => {
    let env: E2EEnv;
    let probe: CanaryProbe;
    const node2 = () => env.cluster.node('node2');
    const bpf = (): BpfNode => {
      const b = env.proxy('node2').bpfNode;
      assert.ok(b, 'node2 has a bpffs');
      return b;
    };

    before(async () => {
      ({ env, probe } = await startCanaryCluster('ebpf', {
        healthCheckNodePort: HC_PORT,
        nodePort: 30263,
        clusterIP: '10.96.62.12',
        ipv6: true,
      }));
    });

    after(async () => {
      probe?.print('canary-ebpf');
      await env?.dispose();
    });

    it("the canary's address is in the pinned address map, kept out of the service ports /statusz lists", async () => {
      await probe.waitHealthy('healthy at start', 30_000);
      const r = await bpf().exec(['bpftool', 'map', 'lookup', 'pinned', ADDRS, 'key', ...addrKey(CANARY_VIP)], {
        allowFailure: true,
      });
      assert.equal(r.code, 0, `${CANARY_VIP} in kpt_addrs: ${r.stderr}`);
      await probe.assertCanaryUnlisted();
    });

    it('IPv6: blind and harmless without a route to its ClusterIP, then in the address map and healthy once one exists', async () => {
      await ipv6CanaryBlindThenRouted(env, probe, 'node2');
      const r = await bpf().exec(['bpftool', 'map', 'lookup', 'pinned', ADDRS, 'key', ...addrKey(CANARY_VIP6)], {
        allowFailure: true,
      });
      assert.equal(r.code, 0, `${CANARY_VIP6} in kpt_addrs: ${r.stderr}`);
    });

    it('a foreign table whose output hook drops the ClusterIP before the tc program sees it', async () => {
      const { down, up } = await probe.measure(foreignOutputDrop(node2().ns));
      assert.ok(down > 0 && up > 0);
    });

    it('a foreign input hook that drops in front of the endpoint', async () => {
      const { down, up } = await probe.measure(await foreignInputDrop(probe, node2().ns));
      assert.ok(down > 0 && up > 0);
    });

    it("another actor deletes the canary's address from the pinned address map", async () => {
      const key = addrKey(CANARY_VIP);
      const got = await bpf().exec(['bpftool', '-j', 'map', 'lookup', 'pinned', ADDRS, 'key', ...key]);
      const value = (JSON.parse(got.stdout) as { value: string[] }).value.map((b) => String(parseInt(b, 16)));
      const gone: CanaryBreak = {
        what: `bpftool map delete: ${CANARY_VIP} out of kpt_addrs`,
        fault: () => bpf().exec(['bpftool', 'map', 'delete', 'pinned', ADDRS, 'key', ...key]),
        undo: () => bpf().exec(['bpftool', 'map', 'update', 'pinned', ADDRS, 'key', ...key, 'value', ...value]),
      };
      const { down, up } = await probe.measure(gone);
      assert.ok(down > 0 && up > 0);
    });

    it('IPv6: a foreign ip6 table whose output hook drops the IPv6 ClusterIP; the IPv4 canary is unaffected', async () => {
      const { down, up } = await probe.measure(foreignOutputDrop(node2().ns, 'IPv6'), 'IPv6');
      assert.ok(down > 0 && up > 0);
    });
  },
);
