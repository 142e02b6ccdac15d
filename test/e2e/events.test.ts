// Kubernetes Events reach the API server: each proxy's start-up event on its
// Node, FailedToStartServiceHealthcheck when a Service's health check
// port is taken on a node, and the defaulted-mode Warning (KEP-5343) from a
// proxy started without a mode. Real proxies in the namespace cluster, the test
// API server receiving events.k8s.io/v1 Events over HTTPS with a token.
// Events do not depend on the datapath, so one mode is enough.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { MODE_DEFAULTED } from '../../src/cmd/modes/index.js';

interface Ev {
  reason: string;
  action: string;
  type: string;
  note?: string;
  reportingController: string;
  reportingInstance: string;
  regarding: { kind: string; name: string; namespace?: string };
  metadata: { namespace: string };
}

describe('Kubernetes Events (events.k8s.io/v1)', { concurrency: false }, () => {
  let env: E2EEnv;
  before(async () => {
    env = await E2EEnv.start('iptables');
  });
  after(async () => {
    await env?.dispose();
  });

  const events = async (namespace: string): Promise<Ev[]> =>
    (
      (await env.kube.call('GET', `/apis/events.k8s.io/v1/namespaces/${namespace}/events`)) as unknown as {
        items: Ev[];
      }
    ).items;

  it('each proxy posts Starting on its Node, once', async () => {
    const { value } = await env.waitFor('both Starting events', async () => {
      const evs = (await events('default')).filter((e) => e.reason === 'Starting');
      return evs.length >= 2 ? evs : undefined;
    });
    assert.deepEqual(value.map((e) => e.regarding.name).sort(), ['node1', 'node2']);
    for (const e of value) {
      assert.deepEqual(
        [e.type, e.action, e.reportingController, e.regarding.kind, e.metadata.namespace],
        ['Normal', 'StartKubeProxy', 'kube-proxy', 'Node', 'default'],
      );
      assert.match(e.reportingInstance, /^kube-proxy-/);
    }
  });

  it('a taken healthCheckNodePort posts FailedToStartServiceHealthcheck on the Service', async () => {
    const port = 31777;
    // Something else on node1 holds the port (all addresses).
    await (await env.cluster.agent('node1')).serve([port], []);
    const pod = env.cluster.pod('node1-a');
    await env.apply(
      service({
        name: 'hc',
        clusterIP: '10.96.3.10',
        type: 'LoadBalancer',
        externalTrafficPolicy: 'Local',
        healthCheckNodePort: port,
        ports: webPorts(30380),
      }),
      endpointSlice('hc', [{ pod }], webPorts()),
    );
    const { value } = await env.waitFor('FailedToStartServiceHealthcheck', async () => {
      const e = (await events('default')).find((x) => x.reason === 'FailedToStartServiceHealthcheck');
      return e ?? undefined;
    });
    assert.deepEqual(
      [value.type, value.action, value.regarding.kind, value.regarding.namespace, value.regarding.name],
      ['Warning', 'Listen', 'Service', 'default', 'hc'],
    );
    assert.match(value.note ?? '', /node node1 failed to start healthcheck "default\/hc" on port 31777: .*EADDRINUSE/);
    // node2 has the port free: it serves the health check, and posted nothing for it.
    const fromNode2 = (await events('default')).filter(
      (e) => e.reason === 'FailedToStartServiceHealthcheck' && /node node2 /.test(e.note ?? ''),
    );
    assert.deepEqual(fromNode2, []);
  });

  it('a proxy started without a mode warns in its log and posts the defaulted-mode Warning on its Node', async () => {
    // node2 restarts with no --proxy-mode (iptables by default, so the cluster keeps working); node1 keeps its flag.
    const p = await env.replaceProxy('node2', [], ['--proxy-mode']);
    const { value } = await env.waitFor('the defaulted-mode event', async () => {
      const e = (await events('default')).find((x) => x.reason === MODE_DEFAULTED.reason);
      return e ?? undefined;
    });
    assert.deepEqual(
      [value.type, value.action, value.regarding.kind, value.regarding.name, value.note],
      ['Warning', 'StartKubeProxy', 'Node', 'node2', MODE_DEFAULTED.note],
    );
    assert.match(p.log(), /nftables the default/);
    const fromNode1 = (await events('default')).filter(
      (e) => e.reason === MODE_DEFAULTED.reason && e.regarding.name === 'node1',
    );
    assert.deepEqual(fromNode1, [], 'an explicit --proxy-mode posts nothing');
  });
});
