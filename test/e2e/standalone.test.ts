// Standalone mode (--manifests DIR) on the real kernel with real packets: no
// API server; both nodes' proxies read one folder of YAML and JSON manifests
// (multi-document, a List), as a ConfigMap mounted on every node would be,
// and follow edits, additions and removals. Bad input (an invalid field, a
// syntax error) is logged naming the file and the field while everything
// valid keeps being served, including the last good version of a broken file.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { E2EEnv, podsOf } from '../netns/e2e.js';
import { endpointSlice, nodeObject, service, webPorts, type EndpointSpec } from '../netns/fixtures.js';
import type { KubeObject } from '../netns/kube.js';
import { E2E_MODES } from '../netns/proxy.js';
import type { NodeInfo } from '../netns/topology.js';

const mode = E2E_MODES[0] ?? 'iptables';

/** Atomic write, as editors and ConfigMap volumes do: the proxy never reads half a file. */
function put(dir: string, name: string, text: string): void {
  writeFileSync(join(dir, `.${name}.tmp`), text);
  renameSync(join(dir, `.${name}.tmp`), join(dir, name));
}
const yamlDocs = (...objs: KubeObject[]) => objs.map((o) => stringify(o)).join('---\n');

describe(`standalone mode: --manifests on the real kernel (${mode})`, { concurrency: false }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpt-manifests-'));
  let env: E2EEnv;
  const pod = (n: string) => env.cluster.pod(n);
  const eps = (...names: string[]): EndpointSpec[] => names.map((n) => ({ pod: pod(n) }));
  /** Wait until node1's proxy has logged a line containing `text`. */
  const logged = (text: string) =>
    env.waitFor(`node1 logs ${JSON.stringify(text)}`, async () =>
      env.proxy('node1').log().includes(text) ? true : undefined,
    );

  before(async () => {
    const nodes: NodeInfo[] = [];
    env = await E2EEnv.start(mode, {
      // Called per node before any proxy starts: one file with every Node; each proxy takes only its own.
      manifests: (n) => {
        nodes.push(n);
        put(dir, '00-nodes.yaml', yamlDocs(...nodes.map((x) => nodeObject(x))));
        return dir;
      },
    });
  });
  after(async () => {
    await env?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves Services from multi-document YAML and a JSON List: ClusterIP from a pod, NodePort from outside', async () => {
    put(
      dir,
      '10-web.yaml',
      yamlDocs(
        service({ name: 'web', clusterIP: '10.96.7.10', type: 'NodePort', ports: webPorts(30710) }),
        endpointSlice('web', eps('node1-b', 'node2-a'), webPorts()),
      ),
    );
    const list = {
      apiVersion: 'v1',
      kind: 'List',
      items: [
        service({ name: 'api', clusterIP: '10.96.7.11', ports: webPorts() }),
        endpointSlice('api', eps('node2-b'), webPorts()),
      ],
    };
    put(dir, '20-api.json', JSON.stringify(list, null, 2));
    const both = await env.waitFor('web reaches both endpoints from node1-a', async () => {
      const rs = await env.sendMany('node1-a', 'tcp', '10.96.7.10', 80, 10, { timeoutMs: 500 });
      return rs.every((r) => r.ok) && podsOf(rs).length === 2 ? podsOf(rs) : undefined;
    });
    assert.deepEqual(both.value, ['node1-b', 'node2-a']);
    await env.waitReachable('ext', 'tcp', env.cluster.node('node1').ip, 30710);
    await env.waitReachable('ext', 'udp', env.cluster.node('node1').ip, 30711);
    await env.waitServedBy('node1-a', 'tcp', '10.96.7.11', 80, ['node2-b']);
    await env.waitServedBy('node2-a', 'udp', '10.96.7.11', 53, ['node2-b']);
  });

  it('follows the folder: an edited slice moves traffic, a removed file removes its Service', async () => {
    put(
      dir,
      '10-web.yaml',
      yamlDocs(
        service({ name: 'web', clusterIP: '10.96.7.10', type: 'NodePort', ports: webPorts(30710) }),
        endpointSlice('web', eps('node2-a'), webPorts()),
      ),
    );
    await env.waitServedBy('node1-a', 'tcp', '10.96.7.10', 80, ['node2-a']);
    unlinkSync(join(dir, '20-api.json'));
    await env.waitFor('api is gone', async () => {
      const r = await env.send('node1-a', 'tcp', '10.96.7.11', 80, { timeoutMs: 500 });
      return r.ok ? undefined : true;
    });
  });

  it('bad input: errors name the file and the field; valid objects and the last good version keep serving', async () => {
    put(
      dir,
      '30-mixed.yaml',
      yamlDocs(
        service({
          name: 'bad',
          clusterIP: '10.96.7.12',
          ports: [{ name: 'tcp', port: 70000, targetPort: 8080, protocol: 'TCP' }],
        }),
        service({ name: 'ok', clusterIP: '10.96.7.13', ports: webPorts() }),
        endpointSlice('ok', eps('node1-b'), webPorts()),
      ),
    );
    await logged(
      '30-mixed.yaml: document 1 (Service default/bad): spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive (not used)',
    );
    await env.waitServedBy('node1-a', 'tcp', '10.96.7.13', 80, ['node1-b']);

    // A syntax error in 10-web.yaml: reported with its line, and web keeps its last good endpoints.
    put(dir, '10-web.yaml', 'apiVersion: v1\nkind: Service\nmetadata: {name: web\n');
    await logged('10-web.yaml: not valid YAML or JSON: line');
    assert.match(
      env.proxy('node1').log(),
      /10-web\.yaml: not valid YAML or JSON: line \d+, column \d+: [^"]*; its previous 2 object\(s\) stay in effect/,
    );
    const rs = await env.sendMany('node1-a', 'tcp', '10.96.7.10', 80, 6, { timeoutMs: 1000 });
    assert.deepEqual(
      rs.map((r) => (r.ok ? r.reply.pod : r.error)),
      Array(6).fill('node2-a'),
    );
    await env.waitReachable('ext', 'tcp', env.cluster.node('node1').ip, 30710);
    assert.ok(env.proxy('node1').running(), 'bad manifests never stop the proxy');
  });
});
