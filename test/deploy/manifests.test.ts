// deploy/manifests/: valid against the Kubernetes API schemas, equivalent to
// kubeadm's kube-proxy objects, and carrying a configuration the proxy's own
// loader accepts without warnings when started with the DaemonSet's command.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseCommandLine, type RunCommand } from '../../src/cmd/options.js';
import {
  containerArgv,
  containerEnv,
  loadManifests,
  mountedConfigMapFile,
  only,
  type ConfigMap,
  type DaemonSet,
  type PodWorld,
} from './manifests.js';
import { schemaErrors, unknownFields, type Manifest } from './schema.js';

const all = loadManifests();
const ds = only<DaemonSet>(all, 'DaemonSet');
const cm = only<ConfigMap>(all, 'ConfigMap');
const pod = ds.spec.template.spec;
const container = pod.containers[0]!;
const world: PodWorld = { nodeName: 'node-a', configMaps: { [cm.metadata!.name!]: cm.data } };

describe('deploy manifests: schemas', () => {
  it('has the five objects kubeadm deploys for kube-proxy', () => {
    assert.deepEqual(all.map((m) => m.object.kind).sort(), [
      'ClusterRole',
      'ClusterRoleBinding',
      'ConfigMap',
      'DaemonSet',
      'ServiceAccount',
    ]);
  });

  for (const { file, object } of all) {
    it(`${file}: ${object.kind} validates against the OpenAPI schema`, async () => {
      assert.deepEqual(await schemaErrors(object), []);
    });
    it(`${file}: ${object.kind} has no field the API does not know`, () => {
      assert.deepEqual(unknownFields(object), []);
    });
  }

  it('the validators reject a wrong type and a misplaced field (they are not vacuous)', async () => {
    const bad = structuredClone(ds) as unknown as {
      spec: { template: { spec: { hostNetwork: unknown; containers: Array<Record<string, unknown>> } } };
    };
    bad.spec.template.spec.hostNetwork = 'yes';
    assert.match((await schemaErrors(bad as unknown as Manifest)).join('\n'), /hostNetwork must be boolean/);
    const misplaced = structuredClone(ds) as unknown as typeof bad;
    misplaced.spec.template.spec.containers[0]!['privileged'] = true; // belongs in securityContext
    assert.deepEqual(unknownFields(misplaced as unknown as Manifest), [
      '.spec.template.spec.containers[0].privileged: unknown field in V1Container',
    ]);
    assert.deepEqual(
      await schemaErrors({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' }, data: { k: 1 } }).then(
        (e) => e.length > 0,
      ),
      true,
    );
  });
});

describe('deploy manifests: equivalent to kubeadm kube-proxy', () => {
  it('all namespaced objects live in kube-system', () => {
    for (const { object } of all) {
      if (object.kind === 'ClusterRole' || object.kind === 'ClusterRoleBinding') continue;
      assert.equal(object.metadata?.namespace, 'kube-system', object.kind);
    }
  });

  it('DaemonSet: host network, privileged, node-critical, tolerates everything, rolling update', () => {
    assert.equal(pod.hostNetwork, true);
    assert.equal(container.securityContext?.privileged, true);
    assert.equal(pod.priorityClassName, 'system-node-critical');
    assert.deepEqual(pod.tolerations, [{ operator: 'Exists' }]);
    assert.equal(ds.spec.updateStrategy?.type, 'RollingUpdate');
    assert.deepEqual(pod.nodeSelector, { 'kubernetes.io/os': 'linux' });
    for (const [k, v] of Object.entries(ds.spec.selector.matchLabels))
      assert.equal(ds.spec.template.metadata.labels[k], v);
  });

  it('DaemonSet: the xtables lock and /lib/modules come from the host', () => {
    const mount = (path: string) => {
      const m = container.volumeMounts?.find((x) => x.mountPath === path);
      assert.ok(m, `mount ${path}`);
      return { mount: m, volume: pod.volumes?.find((v) => v.name === m.name) };
    };
    const lock = mount('/run/xtables.lock');
    assert.notEqual(lock.mount.readOnly, true);
    assert.deepEqual(lock.volume?.hostPath, { path: '/run/xtables.lock', type: 'FileOrCreate' });
    const mods = mount('/lib/modules');
    assert.equal(mods.mount.readOnly, true);
    assert.equal(mods.volume?.hostPath?.path, '/lib/modules');
  });

  it('DaemonSet: runs `kube-proxy` (the image alias) with --hostname-override from NODE_NAME = spec.nodeName', () => {
    const env = containerEnv(container, world);
    assert.equal(env['NODE_NAME'], 'node-a');
    const argv = containerArgv(container, env);
    assert.equal(argv[0], '/usr/local/bin/kube-proxy');
    assert.ok(argv.includes('--hostname-override=node-a'), argv.join(' '));
  });

  it('DaemonSet: api-server-host/port are optional; when set they replace the Service link env', () => {
    const serviceEnv = { KUBERNETES_SERVICE_HOST: '172.30.0.1', KUBERNETES_SERVICE_PORT: '443' };
    const without = containerEnv(container, { ...world, serviceEnv });
    assert.equal(without['KUBERNETES_SERVICE_HOST'], '172.30.0.1');
    const withEndpoint = containerEnv(container, {
      ...world,
      serviceEnv,
      configMaps: { 'kube-proxy-ts': { ...cm.data, 'api-server-host': '192.0.2.10', 'api-server-port': '6443' } },
    });
    assert.equal(withEndpoint['KUBERNETES_SERVICE_HOST'], '192.0.2.10');
    assert.equal(withEndpoint['KUBERNETES_SERVICE_PORT'], '6443');
  });

  it('RBAC: the DaemonSet runs as the ServiceAccount the ClusterRoleBinding binds to the ClusterRole', () => {
    const sa = only(all, 'ServiceAccount');
    const role = only(all, 'ClusterRole');
    const binding = only<{
      roleRef: { kind: string; name: string; apiGroup: string };
      subjects: Array<{ kind: string; name: string; namespace: string }>;
    }>(all, 'ClusterRoleBinding');
    assert.equal(pod.serviceAccountName, sa.metadata?.name);
    assert.deepEqual(binding.roleRef, {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: role.metadata?.name,
    });
    assert.deepEqual(binding.subjects, [
      { kind: 'ServiceAccount', name: sa.metadata?.name, namespace: sa.metadata?.namespace },
    ]);
  });
});

describe('deploy manifests: the ConfigMap configuration', () => {
  async function parseAsPod(): Promise<RunCommand> {
    const argv = containerArgv(container, containerEnv(container, world)).slice(1);
    const cmd = await parseCommandLine(argv, {
      readFile: async (p) => {
        const text = mountedConfigMapFile(pod, container, world, p);
        if (text === undefined) throw new Error(`ENOENT: ${p} is not in a mounted ConfigMap`);
        return text;
      },
    });
    assert.equal(cmd.kind, 'run');
    return cmd as RunCommand;
  }

  it('the DaemonSet command reads config.conf from the mounted ConfigMap and parses without warnings', async () => {
    const cmd = await parseAsPod();
    assert.deepEqual(cmd.warnings, []);
    assert.equal(cmd.configFile, '/var/lib/kube-proxy-ts/config.conf');
    assert.equal(cmd.resolved.hostnameOverride, 'node-a');
  });

  it("configures in-cluster access and kubeadm's defaults", async () => {
    const cmd = await parseAsPod();
    assert.equal(cmd.config.clientConnection.kubeconfig, '', 'empty kubeconfig = in-cluster configuration');
    assert.equal(cmd.mode, 'iptables');
    assert.equal(cmd.resolved.healthzBindAddress, '0.0.0.0:10256');
    assert.equal(cmd.resolved.metricsBindAddress, '127.0.0.1:10249');
    assert.deepEqual(cmd.resolved.detectLocal.clusterCIDRs, ['10.244.0.0/16']);
  });
});
