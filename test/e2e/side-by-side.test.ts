// A trial side by side on one node (docs/migration.md): the node's existing
// proxy (iptables mode, standing in for upstream kube-proxy) keeps serving
// every unclaimed Service, while kube-proxy-ts started with
// --service-proxy-name serves only the Services labelled
// service.kubernetes.io/service-proxy-name=kube-proxy-ts, in its own nftables
// table, and never removes the other proxy's rules.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { ProxyProcess } from '../netns/proxy.js';
import { nsRun } from '../netns/spawn.js';

const TRIAL = 'kube-proxy-ts';

describe('side-by-side trial with service-proxy-name', { concurrency: false }, () => {
  let env: E2EEnv;
  let trial: ProxyProcess;
  before(async () => {
    env = await E2EEnv.start('iptables');
    const n1 = env.cluster.node('node1');
    trial = new ProxyProcess(env.cluster, n1, 'nftables', env.cp.kubeconfig, [
      '--service-proxy-name',
      TRIAL,
      '--healthz-bind-address',
      `${n1.ip}:10266`,
      '--metrics-bind-address',
      '127.0.0.1:10259',
    ]);
  });
  after(async () => {
    await trial?.stop().catch(() => {});
    await env?.dispose();
  });

  it("each proxy serves only its own Services, and the trial leaves the other proxy's rules alone", async () => {
    const n1 = env.cluster.node('node1');
    const stay = '10.96.9.10';
    const moved = '10.96.9.11';
    const movedSvc = service({ name: 'moved', clusterIP: moved, ports: webPorts() });
    movedSvc.metadata = { ...movedSvc.metadata, labels: { 'service.kubernetes.io/service-proxy-name': TRIAL } };
    await env.apply(
      service({ name: 'stay', clusterIP: stay, ports: webPorts() }),
      endpointSlice('stay', [{ pod: env.cluster.pod('node2-a') }], webPorts()),
      movedSvc,
      endpointSlice('moved', [{ pod: env.cluster.pod('node2-b') }], webPorts()),
    );
    await env.waitServedBy('node1-a', 'tcp', stay, 80, ['node2-a']);
    const before = (await nsRun(n1.ns, ['iptables-save', '-t', 'nat'])).stdout;
    assert.ok(!before.includes(moved), 'the existing proxy ignores the claimed Service');

    await trialStart(trial, n1.ip);
    await env.waitServedBy('node1-a', 'tcp', moved, 80, ['node2-b']);
    const { value: udp } = await env.waitReachable('node1-a', 'udp', moved, 53);
    assert.equal(udp.pod, 'node2-b');

    const nft = (await nsRun(n1.ns, ['nft', 'list', 'table', 'ip', 'kube-proxy'])).stdout;
    assert.ok(nft.includes(moved), 'the trial programs the claimed Service');
    assert.ok(!nft.includes(stay), 'the trial ignores unclaimed Services');
    const afterText = (await nsRun(n1.ns, ['iptables-save', '-t', 'nat'])).stdout;
    assert.ok(
      afterText.includes('-A KUBE-SERVICES') && afterText.includes(stay),
      "the existing proxy's rules are still there",
    );
    await env.waitServedBy('node1-a', 'tcp', stay, 80, ['node2-a']);
  });
});

/** Start the trial proxy and wait until its own /healthz (port 10266) is 200, i.e. it has synced. */
async function trialStart(p: ProxyProcess, nodeIP: string): Promise<void> {
  // start() polls the default health port, which the existing proxy already answers; ours is checked below.
  await p.start(60_000);
  const agent = await p.cluster.agent(p.node.name);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await agent.http(`http://${nodeIP}:10266/healthz`, 1000);
    if (r.status === 200) return;
    if (Date.now() > deadline || !p.running())
      throw new Error(`trial proxy not healthy: ${JSON.stringify(r)}\n${p.log()}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}
