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
//
// The other way round (found in the guest's ipvs -> ebpf handover): a SYN
// netfilter sent to one endpoint a moment before ebpf took over, whose
// SYN-ACK was late, is sent again by the client; ebpf must leave the
// retransmit to netfilter (conntrack holds the handshake) rather than balance
// it anew, possibly elsewhere. Here the first SYN goes through a foreign nat
// rule to B, whose SYN-ACK is dropped; the address then joins the program's
// map (ebpf sends it to A); the retransmit must still reach B.
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
const VIP_RETRY = '10.96.62.21';
const RETRY_PORT = 41235;

/** kpt_addrs' key of an IPv4 address (held as an IPv4-mapped IPv6 address). */
const addrKey = (ip: string): string[] => [...Array<string>(10).fill('0'), '255', '255', ...ip.split('.')];
const ADDRS = `${TEST_PIN_ROOT}/v1/maps/kpt_addrs`;

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
        service({ name: 'retry', clusterIP: VIP_RETRY, ports }),
        endpointSlice('retry', [{ pod: env.cluster.pod('node2-a') }], ports, 'retry-v4'),
      );
      await env.waitReachable('node1-b', 'tcp', VIP, 80);
      await env.waitReachable('node1-b', 'tcp', VIP_RETRY, 80);
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
      await env.proxy('node1').bpfNode!.exec(['bpftool', 'map', 'delete', 'pinned', ADDRS, 'key', ...addrKey(VIP)]);
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

    it('a retransmitted SYN of a handshake netfilter began goes where the first SYN went', async () => {
      const bpf = env.proxy('node1').bpfNode!;
      const key = addrKey(VIP_RETRY);
      const looked = await bpf.exec(['bpftool', '-j', 'map', 'lookup', 'pinned', ADDRS, 'key', ...key]);
      const value = (JSON.parse(looked.stdout) as { value: string[] }).value.map((b) => String(parseInt(b, 16)));
      await bpf.exec(['bpftool', 'map', 'delete', 'pinned', ADDRS, 'key', ...key]);
      const b = env.cluster.pod('node1-b');
      await nsRun(node1().ns, ['nft', '-f', '-'], {
        input: `table ip foreign {
  chain pre { type nat hook prerouting priority dstnat; policy accept; ip daddr ${VIP_RETRY} tcp dport 80 dnat to ${b.ip}:8080; }
}
`,
      });
      // B's first SYN-ACK is lost, so the client sends its SYN again after a second.
      await nsRun(b.ns, ['nft', '-f', '-'], {
        input: `table ip lose { chain out { type filter hook output priority 0; policy accept; tcp sport 8080 tcp flags & (syn | ack) == syn | ack drop
}
}
`,
      });
      try {
        const agent = await env.cluster.agent('node1-a');
        const opening = agent.open('retry', VIP_RETRY, 80, 8000, RETRY_PORT);
        // netfilter holds the handshake, translated to B; then ebpf takes the address over.
        const entry = await env.waitFor('the handshake in conntrack', async () => {
          const r = await nsRun(
            node1().ns,
            ['conntrack', '-L', '-p', 'tcp', '--dst', VIP_RETRY, '--sport', String(RETRY_PORT)],
            {
              allowFailure: true,
            },
          );
          return r.stdout.includes('SYN_SENT') ? r.stdout : undefined;
        });
        assert.match(entry.value, new RegExp(`src=${b.ip.replace(/\./g, '\\.')} `), 'the first SYN went to B');
        await bpf.exec(['bpftool', 'map', 'update', 'pinned', ADDRS, 'key', ...key, 'value', ...value]);
        await nsRun(b.ns, ['nft', 'delete', 'table', 'ip', 'lose']);
        const opened = await opening;
        assert.ok(opened.ok, `the connection: ${opened.error ?? ''}`);
        const r = await agent.send('retry');
        assert.ok(r.ok, JSON.stringify(r));
        assert.equal(r.reply.pod, 'node1-b', 'the retransmitted SYN was balanced anew by ebpf');
        await agent.closeConn('retry', true);
        // The address is ebpf's again: a new connection is balanced by it, to A.
        const fresh = await env.send('node1-a', 'tcp', VIP_RETRY, 80);
        assert.equal(fresh.ok && fresh.reply.pod, 'node2-a', JSON.stringify(fresh));
      } finally {
        await nsRun(b.ns, ['nft', 'delete', 'table', 'ip', 'lose'], { allowFailure: true });
        await nsRun(node1().ns, ['nft', 'delete', 'table', 'ip', 'foreign'], { allowFailure: true });
      }
    });
  });
