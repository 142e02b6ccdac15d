// A client that reuses the ports of a finished connection for a new one that
// ebpf mode does not balance (the mode retired in a handover and another one
// serves the address, or the Service is gone) must not have the new
// connection's packets sent after the old one's endpoint. Found in the QEMU
// guest's ebpf -> ipvs handover: a pod's new connection got its SYN-ACK from
// IPVS's choice, then a reset, because the old connection's entry in the
// connection map still translated the ACK to the old endpoint.
//
// Here, on the real programs with real packets: a connection from a fixed
// client port through ebpf to endpoint A, closed with a reset (no TIME_WAIT,
// so the port is free at once); the Service's address then leaves the
// program's address map, as a retired ebpf mode's does, and a foreign nat
// rule sends it to pod B instead, as the next mode would. A new connection
// from the same port must be served by B, end to end.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TEST_PIN_ROOT } from '../ebpf/bpfnode.js';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { E2E_MODES } from '../netns/proxy.js';
import { nsRun } from '../netns/spawn.js';

const RUN = E2E_MODES.includes('ebpf');
const VIP = '10.96.62.20';
const CLIENT_PORT = 41234;

if (RUN)
  describe("ebpf mode: a new connection on a finished one's ports, balanced elsewhere", { concurrency: false }, () => {
    let env: E2EEnv;
    const node1 = () => env.cluster.node('node1');

    before(async () => {
      env = await E2EEnv.start('ebpf');
      const ports = webPorts();
      await env.apply(
        service({ name: 'reuse', clusterIP: VIP, ports }),
        endpointSlice('reuse', [{ pod: env.cluster.pod('node2-a') }], ports, 'reuse-v4'),
      );
      await env.waitReachable('node1-b', 'tcp', VIP, 80);
    });

    after(async () => {
      await env?.dispose();
    });

    it('is served end to end by the new path, not reset by the old endpoint', async () => {
      const agent = await env.cluster.agent('node1-a');
      const first = await agent.open('old', VIP, 80, 2000, CLIENT_PORT);
      assert.ok(first.ok, `first connection: ${first.error ?? ''}`);
      const a = await agent.send('old');
      assert.ok(a.ok && a.reply.pod === 'node2-a', JSON.stringify(a));
      await agent.closeConn('old', true);

      // The address leaves the map (a retired mode's state), and another path serves it.
      const key = [...Array<string>(10).fill('0'), '255', '255', ...VIP.split('.')];
      const addrs = `${TEST_PIN_ROOT}/v1/maps/kpt_addrs`;
      await env.proxy('node1').bpfNode!.exec(['bpftool', 'map', 'delete', 'pinned', addrs, 'key', ...key]);
      const b = env.cluster.pod('node1-b');
      await nsRun(node1().ns, ['nft', '-f', '-'], {
        input: `table ip foreign {
  chain pre { type nat hook prerouting priority dstnat; policy accept; ip daddr ${VIP} tcp dport 80 dnat to ${b.ip}:8080; }
}
`,
      });
      try {
        const second = await agent.open('new', VIP, 80, 2000, CLIENT_PORT);
        assert.ok(second.ok, `second connection: ${second.error ?? ''}`);
        const r = await agent.send('new');
        assert.ok(r.ok, `the new connection on port ${CLIENT_PORT}: ${JSON.stringify(r)}`);
        assert.equal(r.reply.pod, 'node1-b');
        await agent.closeConn('new', true);
      } finally {
        await nsRun(node1().ns, ['nft', 'delete', 'table', 'ip', 'foreign'], { allowFailure: true });
      }
    });
  });
