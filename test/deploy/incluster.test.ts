// The DaemonSet's pod, for real, in a network namespace: kube-proxy-ts started
// with the manifest's command and environment finds the API server through
// in-cluster configuration (service-account token + CA mounted where the
// kubelet mounts them, KUBERNETES_SERVICE_HOST/PORT), lists and watches,
// programs the Service, shuts down on SIGTERM with exit 0 and leaves its
// rules for the next pod; `kube-proxy --cleanup` (the rollback in
// docs/migration.md) then removes them. The API server's request log of the
// run is checked against the ClusterRole: exactly the permissions used.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse, stringify } from 'yaml';
import {
  containerArgv,
  containerEnv,
  DEPLOY_DIR,
  loadManifests,
  only,
  type ConfigMap,
  type DaemonSet,
  type PodWorld,
} from './manifests.js';
import { ApiHost, seedNodeAndWeb } from './apihostclient.js';
import { newNamespace, type TestNamespace } from './netns.js';
import { startPod, kubeProxyAlias, type Pod, type PodOptions } from './pod.js';
import { grantedPermissions, requestPermission, type PolicyRule, type RequestRecord } from './rbac.js';

const NODE = 'node-a';
const NODE_IP = '192.168.77.10';
const CLUSTER_IP = '172.30.0.41';
const OTHER_IP = '172.30.0.42';
const manifests = loadManifests();
const ds = only<DaemonSet>(manifests, 'DaemonSet');
const cm = only<ConfigMap>(manifests, 'ConfigMap');
const role = only<{ rules: PolicyRule[] }>(manifests, 'ClusterRole');
const cleanupDs = parse(readFileSync(join(DEPLOY_DIR, 'cleanup', 'kube-proxy-ts-cleanup.yaml'), 'utf8')) as DaemonSet;

/** Poll cond (event sources here are other processes) until it holds. */
/** A watch that is not a watch-list (the test API server here refuses those, so the proxy lists first). */
const plainWatch = (r: RequestRecord): boolean =>
  r.query['watch'] === 'true' && r.query['sendInitialEvents'] === undefined;

async function eventually(
  what: string,
  cond: () => Promise<boolean>,
  timeoutMs = 30_000,
  detail = () => '',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}\n${detail()}`);
}

describe('in-cluster: the DaemonSet pod against the test API server', () => {
  let ns: TestNamespace;
  let saDir: string;
  let api: ApiHost;
  let pod: Pod;
  let next: Pod | undefined;
  let healthyWhileRunning = false;
  let nextExitCode: number | null = null;
  let gapSeen = false;
  let samplesDuringTakeover = 0;
  let exitCode: number | null;
  let rulesWhileRunning = '';
  let rulesAfterExit = '';
  let requests: RequestRecord[] = [];
  let podOptions: PodOptions;

  /** GET /healthz from inside the node (the DaemonSet's healthzBindAddress 0.0.0.0:10256). */
  const healthz = async (): Promise<boolean> =>
    (
      await ns.run(
        [
          process.execPath,
          '-e',
          'fetch("http://127.0.0.1:10256/healthz").then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))',
        ],
        { allowFailure: true },
      )
    ).code === 0;
  const natRules = async (): Promise<string> => (await ns.run(['iptables-save', '-t', 'nat'])).stdout;
  const serviceRules = (dump: string): string[] => dump.split('\n').filter((l) => l.startsWith('-A KUBE-'));

  before(async () => {
    ns = await newNamespace('ic');
    await ns.run(['ip', 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1']); // no dummy module here
    await ns.run(['ip', 'link', 'set', 'eth1', 'up']);
    await ns.run(['ip', 'addr', 'add', `${NODE_IP}/24`, 'dev', 'eth0']);
    await ns.run(['ip', 'link', 'set', 'eth0', 'up']);
    saDir = mkdtempSync(join(tmpdir(), 'kpt-dep-sa-'));
    // A server with the WatchList gate off: the pod lists, then watches (its refused watch-lists
    // aside), so every permission of the ClusterRole is used, list included (the fallback's).
    api = await ApiHost.start(ns.name, saDir, 'off');
    await seedNodeAndWeb(api, NODE, NODE_IP, CLUSTER_IP);
    // Claimed by another service proxy: kube-proxy-ts must leave it alone.
    await api.create('services', {
      metadata: {
        namespace: 'default',
        name: 'other',
        labels: { 'service.kubernetes.io/service-proxy-name': 'other-proxy' },
      },
      spec: {
        type: 'ClusterIP',
        clusterIP: OTHER_IP,
        clusterIPs: [OTHER_IP],
        ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
      },
    });
    await api.create('endpointslices', {
      metadata: { namespace: 'default', name: 'web-1', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
      endpoints: [{ addresses: ['10.244.1.5'], conditions: { ready: true }, nodeName: NODE }],
    });

    // The ConfigMap as the guide has the operator fill it in: the API server's
    // real address. The Service link env points at a ClusterIP nothing serves,
    // so only the override can work. nf_conntrack_max is global and read-only
    // outside the root namespace: as kind does, maxPerCore 0 leaves it alone.
    const conf = parse(cm.data['config.conf']!) as { conntrack: Record<string, unknown> };
    conf.conntrack['maxPerCore'] = 0;
    const world: PodWorld = {
      nodeName: NODE,
      configMaps: {
        [cm.metadata!.name!]: {
          ...cm.data,
          'config.conf': stringify(conf),
          'api-server-host': api.host,
          'api-server-port': String(api.port),
        },
      },
      serviceEnv: { KUBERNETES_SERVICE_HOST: '172.30.0.1', KUBERNETES_SERVICE_PORT: '443' },
    };
    podOptions = {
      ns: ns.name,
      spec: ds.spec.template.spec,
      container: ds.spec.template.spec.containers[0]!,
      world,
      saDir,
    };
    pod = startPod(podOptions);

    await eventually(
      "the Service's rules",
      async () => (await natRules()).includes(CLUSTER_IP),
      60_000,
      () => pod.proc.log(),
    );
    await eventually(
      'watches on all four resources',
      async () => {
        requests = await api.requests();
        return [
          '/api/v1/services',
          '/api/v1/nodes',
          '/apis/discovery.k8s.io/v1/endpointslices',
          '/apis/networking.k8s.io/v1/servicecidrs',
          // A plain watch, after the list: a watch-list attempt the server refused does not count.
        ].every((p) => requests.some((r) => r.path === p && plainWatch(r)));
      },
      30_000,
      () => JSON.stringify(requests.slice(-10)),
    );
    rulesWhileRunning = await natRules();

    // /healthz turns 200 once every IP family has synced once (IPv6 right after IPv4).
    healthyWhileRunning = await eventually('/healthz 200', healthz, 30_000).then(
      () => true,
      () => false,
    );

    pod.proc.child.kill('SIGTERM');
    exitCode = await pod.proc.exited;
    rulesAfterExit = await natRules();

    // The next pod (a rolling update) takes the rules over: sample them until it is healthy.
    const watchesBefore = (await api.requests()).filter(plainWatch).length;
    next = startPod(podOptions);
    await eventually(
      'the next pod to be healthy',
      async () => {
        samplesDuringTakeover++;
        if (!(await natRules()).includes(CLUSTER_IP)) gapSeen = true;
        return healthz();
      },
      60_000,
      () => next!.proc.log(),
    );
    await eventually(
      "the next pod's watches",
      async () => (await api.requests()).filter(plainWatch).length >= watchesBefore + 4,
    );
    next.proc.child.kill('SIGTERM');
    nextExitCode = await next.proc.exited;
    requests = await api.requests();
  });

  after(async () => {
    for (const p of [pod, next]) {
      await p?.proc.stop(2000);
      p?.dispose();
    }
    if (api) await api.stop();
    ns?.dispose();
    if (saDir) rmSync(saDir, { recursive: true, force: true });
  });

  it("runs with the manifest's command, the node name from NODE_NAME and the API server from the ConfigMap", () => {
    assert.ok(pod.argv.includes(`--hostname-override=${NODE}`), pod.argv.join(' '));
    assert.equal(pod.env['KUBERNETES_SERVICE_HOST'], api.host);
    assert.equal(pod.env['KUBERNETES_SERVICE_PORT'], String(api.port));
  });

  it('authenticates with the mounted token and CA: lists, then watches from the listed version', () => {
    for (const p of [
      '/api/v1/services',
      '/apis/discovery.k8s.io/v1/endpointslices',
      '/api/v1/nodes',
      '/apis/networking.k8s.io/v1/servicecidrs',
    ]) {
      const list = requests.find((r) => r.path === p && r.query['watch'] === undefined);
      const watch = requests.find(
        (r) => r.path === p && r.query['watch'] === 'true' && r.query['sendInitialEvents'] === undefined,
      );
      assert.ok(list, `list ${p}`);
      assert.ok(
        watch && /^\d+$/.test(watch.query['resourceVersion'] ?? ''),
        `watch ${p} from a version: ${JSON.stringify(watch)}`,
      );
    }
    assert.ok(
      requests
        .filter((r) => r.path === '/api/v1/nodes')
        .every((r) => r.query['fieldSelector'] === `metadata.name=${NODE}`),
    );
  });

  it('programs the Service from what it listed', () => {
    assert.match(rulesWhileRunning, new RegExp(`-d ${CLUSTER_IP.replace(/\./g, '\\.')}/32 .*-j KUBE-SVC-`));
    assert.match(rulesWhileRunning, /--to-destination 10\.244\.1\.5:8080/);
  });

  it('leaves a Service labelled service-proxy-name to its own proxy', () => {
    assert.ok(!rulesWhileRunning.includes(OTHER_IP), 'the claimed Service has rules');
    const svcList = requests.find((r) => r.path === '/api/v1/services');
    assert.equal(svcList?.query['labelSelector'], '!service.kubernetes.io/service-proxy-name');
  });

  it('SIGTERM: exit 0, and the rules stay for the next pod', () => {
    assert.equal(exitCode, 0, pod.proc.log());
    assert.match(pod.proc.log(), /Stopped; rules are left in place/);
    assert.ok(serviceRules(rulesWhileRunning).length > 0);
    assert.deepEqual(serviceRules(rulesAfterExit), serviceRules(rulesWhileRunning));
  });

  it('answers /healthz with 200 once synced', () => {
    assert.equal(healthyWhileRunning, true);
  });

  it('the next pod takes the rules over with no moment without them, and exits 0 too', () => {
    assert.ok(samplesDuringTakeover > 0);
    assert.equal(gapSeen, false, 'a sample of the nat table lacked the Service');
    assert.equal(nextExitCode, 0, next?.proc.log());
  });

  it('the ClusterRole grants exactly the permissions the proxy used', () => {
    const used = new Set(requests.map(requestPermission).filter((p): p is string => p !== null));
    assert.deepEqual([...used].sort(), [...grantedPermissions(role.rules)].sort());
  });

  it("rollback: the cleanup DaemonSet's `kube-proxy --cleanup` removes the rules the pod left", async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'kpt-dep-cleanup-'));
    try {
      const init = cleanupDs.spec.template.spec.initContainers![0]!;
      const argv = containerArgv(init, containerEnv(init, { nodeName: NODE, configMaps: {} }));
      assert.equal(argv[0], '/usr/local/bin/kube-proxy');
      const r = await ns.run([...kubeProxyAlias(tmp), ...argv.slice(1)], { allowFailure: true });
      assert.equal(r.code, 0, r.stdout + r.stderr);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
    const left = await natRules();
    assert.deepEqual(serviceRules(left), []);
    assert.doesNotMatch(left, /KUBE-SERVICES/);
  });
});
