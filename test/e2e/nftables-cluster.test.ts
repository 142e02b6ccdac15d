// nftables mode's own differences from iptables mode, with real packets in the
// namespace cluster: a wrong port or protocol on a ClusterIP is
// REJECTed (refused at once) instead of going unanswered, and an address inside
// a ServiceCIDR that no Service holds is DROPped once the ServiceCIDR is known.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { nsRun } from '../netns/spawn.js';

describe('nftables-only behaviours on the real kernel', { concurrency: false }, () => {
  let env: E2EEnv;
  before(async () => {
    env = await E2EEnv.start('nftables');
  });
  after(async () => {
    await env?.dispose();
  });

  it('rejects a wrong port and a wrong protocol on a ClusterIP', async () => {
    const ip = '10.96.30.10';
    // TCP only: port 80 -> 8080.
    const ports = webPorts().filter((p) => p.protocol === 'TCP');
    await env.apply(
      service({ name: 'tcponly', clusterIP: ip, ports }),
      endpointSlice('tcponly', [{ pod: env.cluster.pod('node2-a') }], ports),
    );
    // A reject is an ICMP error from node1, and node1's kernel sends one address at most 6 in a burst,
    // then one a second. The wait below can be rejected many times over (node1 may program the Service
    // before it sees the EndpointSlice), so it runs from node1-b: the probes that must be refused come
    // from node1-a, which no earlier error has cost anything.
    await env.waitServedBy('node1-b', 'tcp', ip, 80, ['node2-a']);
    const wrongPort = await env.send('node1-a', 'tcp', ip, 81, { timeoutMs: 3000 });
    const limited = async () => `node1 withheld ${await env.icmpRateLimited('node1')} ICMP errors (rate limit)`;
    assert.equal(wrongPort.ok ? 'answered' : wrongPort.error, 'ECONNREFUSED', await limited());
    // UDP to the TCP-only port: the ICMP port-unreachable surfaces as ECONNREFUSED on the client.
    const wrongProto = await env.send('node1-a', 'udp', ip, 80, { timeoutMs: 3000 });
    assert.equal(wrongProto.ok ? 'answered' : wrongProto.error, 'ECONNREFUSED', await limited());
  });

  it('drops traffic to an unallocated address of a known ServiceCIDR', async () => {
    // Give pod node2-a a second address inside the future ServiceCIDR and route it from node1 via node2,
    // so that before the ServiceCIDR is known the address answers: the later timeout is the drop rule's.
    const unallocated = '10.96.30.99';
    const n1 = env.cluster.node('node1');
    const n2 = env.cluster.node('node2');
    const pod = env.cluster.pod('node2-a');
    const dev = /dev (\S+)/.exec((await nsRun(n2.ns, ['ip', 'route', 'show', pod.ip])).stdout)?.[1];
    assert.ok(dev, 'node2 has a route to its pod');
    await nsRun(pod.ns, ['ip', 'addr', 'add', `${unallocated}/32`, 'dev', 'eth0']);
    await nsRun(n2.ns, ['ip', 'route', 'add', `${unallocated}/32`, 'dev', dev]);
    await nsRun(n1.ns, ['ip', 'route', 'add', `${unallocated}/32`, 'via', n2.ip]);
    const { value: before } = await env.waitReachable('node1-a', 'tcp', unallocated, 8080);
    assert.equal(before.pod, 'node2-a', 'reachable while no ServiceCIDR is known');

    await env.apply({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'ServiceCIDR',
      metadata: { name: 'kubernetes' },
      spec: { cidrs: ['10.96.0.0/16'] },
    });
    const { ms } = await env.waitFor('the ServiceCIDR drop rule', async () => {
      const r = await env.send('node1-a', 'tcp', unallocated, 8080, { timeoutMs: 700 });
      return !r.ok && r.error === 'ETIMEDOUT' ? true : undefined;
    });
    console.log(`nftables: ServiceCIDR drop in place ${ms} ms after the ServiceCIDR was created`);
    // Allocated ClusterIPs inside the same CIDR keep working.
    await env.waitServedBy('node1-a', 'tcp', '10.96.30.10', 80, ['node2-a']);
  });
});
