// --proxy-mode userspace through the real binary in the two-node namespace
// cluster: the relay serves ClusterIP (TCP and UDP) and NodePort traffic from
// every kind of client, a Service without endpoints is refused at once, and
// --cleanup removes the mode's own table. The relay terminates connections,
// so endpoints see the node's address, never the client's (README).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv, podsOf } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { nsRun } from '../netns/spawn.js';

describe('userspace mode through bin/kube-proxy-ts', { concurrency: false }, () => {
  let env: E2EEnv;
  before(async () => {
    env = await E2EEnv.start('userspace');
  });
  after(async () => {
    await env?.dispose();
  });

  it('relays ClusterIP TCP and UDP to every endpoint, and NodePort from outside', async () => {
    const ip = '10.96.20.10';
    await env.apply(
      service({ name: 'relay', clusterIP: ip, type: 'NodePort', ports: webPorts(30500) }),
      endpointSlice(
        'relay',
        [{ pod: env.cluster.pod('node1-a') }, { pod: env.cluster.pod('node2-a') }],
        webPorts(30500),
      ),
    );
    await env.waitReachable('node1-b', 'tcp', ip, 80);
    const tcp = await env.sendMany('node1-b', 'tcp', ip, 80, 8);
    assert.ok(
      tcp.every((r) => r.ok),
      JSON.stringify(tcp),
    );
    assert.deepEqual(podsOf(tcp), ['node1-a', 'node2-a'], 'round-robin reaches both endpoints');
    const { value: udp } = await env.waitReachable('node2-b', 'udp', ip, 53);
    assert.ok(['node1-a', 'node2-a'].includes(udp.pod));
    const n1 = env.cluster.node('node1');
    const { value: np } = await env.waitReachable('ext', 'tcp', n1.ip, 30500);
    assert.ok(['node1-a', 'node2-a'].includes(np.pod));
  });

  it('refuses a Service without endpoints at once, and --cleanup removes the table', async () => {
    const ip = '10.96.20.11';
    await env.apply(
      service({ name: 'empty', clusterIP: ip, ports: webPorts() }),
      endpointSlice('empty', [], webPorts()),
    );
    const { value } = await env.waitFor('connection refused', async () => {
      const r = await env.send('node1-a', 'tcp', ip, 80, { timeoutMs: 1500 });
      return !r.ok && /ECONNREFUSED/.test(r.error) ? r.error : undefined;
    });
    assert.match(value, /ECONNREFUSED/);

    const n1 = env.cluster.node('node1');
    const before = await nsRun(n1.ns, ['nft', 'list', 'tables']);
    assert.match(before.stdout, /kube-proxy-userspace/);
    await env.proxy('node1').stop();
    const r = await env.proxy('node1').cleanup();
    assert.equal(r.code, 0, r.output);
    const afterTables = await nsRun(n1.ns, ['nft', 'list', 'tables']);
    assert.doesNotMatch(afterTables.stdout, /kube-proxy-userspace/);
  });
});
