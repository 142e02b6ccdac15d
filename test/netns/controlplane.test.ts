// The API server inside the cluster: reachable from the node namespaces
// with the written kubeconfig's CA and token, driven over REST, and an
// outage (stop/start) keeps the stored objects.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { NetnsCluster } from './cluster.js';
import { ControlPlane } from './controlplane.js';
import { endpointSlice, service, webPorts } from './fixtures.js';
import { KubeError } from './kube.js';

describe('control plane in the cluster', () => {
  let c: NetnsCluster;
  let cp: ControlPlane;
  before(async () => {
    c = await NetnsCluster.create({ nodeCount: 2, podsPerNode: 1 });
    cp = await ControlPlane.start(c);
  });
  after(async () => {
    await cp?.dispose();
    await c?.destroy();
  });

  it('writes a kubeconfig whose server is the control-plane IP', () => {
    const kc = JSON.parse(readFileSync(cp.kubeconfig, 'utf8')) as { clusters: Array<{ cluster: { server: string } }> };
    assert.equal(kc.clusters[0]!.cluster.server, `https://${c.controlPlane.ip}:6443`);
  });

  it('registered the Node objects with their IPs and pod CIDRs', async () => {
    const n2 = (await cp.kube.call('GET', '/api/v1/nodes/node2')) as unknown as {
      spec: { podCIDR: string };
      status: { addresses: Array<{ address: string }> };
    };
    assert.equal(n2.spec.podCIDR, '10.244.2.0/24');
    assert.equal(n2.status.addresses[0]!.address, c.node('node2').ip);
  });

  it('is reachable from a node namespace with the CA and token (as the proxy will be)', async () => {
    const node1 = await c.agent('node1');
    const ca = readFileSync(`${cp.dir}/ca.crt`, 'utf8');
    const ok = await node1.request('https', {
      url: `https://${c.controlPlane.ip}:6443/api/v1/nodes`,
      ca,
      headers: { authorization: `Bearer kpt-e2e-${process.pid}` },
    });
    assert.equal(ok['status'], 200);
    const denied = await node1.request('https', {
      url: `https://${c.controlPlane.ip}:6443/api/v1/nodes`,
      ca,
      headers: {},
    });
    assert.equal(denied['status'], 401);
  });

  it('creates, replaces and deletes Services and EndpointSlices over REST', async () => {
    await cp.kube.apply(service({ name: 'web', clusterIP: '10.96.0.10', ports: webPorts() }));
    await cp.kube.apply(
      service({ name: 'web', clusterIP: '10.96.0.10', ports: webPorts(), sessionAffinity: 'ClientIP' }),
    );
    const got = (await cp.kube.call('GET', '/api/v1/namespaces/default/services/web')) as unknown as {
      spec: { sessionAffinity: string };
    };
    assert.equal(got.spec.sessionAffinity, 'ClientIP');
    await cp.kube.apply(endpointSlice('web', [{ pod: c.pod('node1-a') }], webPorts()));
    const slices = (await cp.kube.call(
      'GET',
      '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices',
    )) as unknown as { items: Array<{ endpoints: Array<{ nodeName: string }> }> };
    assert.deepEqual(
      slices.items.map((s) => s.endpoints[0]!.nodeName),
      ['node1'],
    );
    await cp.kube.remove('EndpointSlice', 'web-1');
    await cp.kube.remove('EndpointSlice', 'web-1'); // missing is fine
    await assert.rejects(
      cp.kube.call('GET', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-1'),
      (e: unknown) => e instanceof KubeError && e.status === 404,
    );
  });

  it('survives an outage: unreachable while stopped, same objects after start', async () => {
    await cp.stopServing();
    await assert.rejects(
      cp.kube.call('GET', '/api/v1/namespaces/default/services/web', undefined, 1000),
      (e: unknown) => e instanceof KubeError && e.status === 0,
    );
    await cp.startServing();
    const got = (await cp.kube.call('GET', '/api/v1/namespaces/default/services/web')) as unknown as {
      spec: { clusterIP: string };
    };
    assert.equal(got.spec.clusterIP, '10.96.0.10');
  });
});
