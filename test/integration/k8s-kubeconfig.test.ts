// Ways to reach the API server (kubeconfig with token or client certificate,
// --master override, in-cluster service-account dir) checked against the test
// API server over real HTTPS; plus the optional ServiceCIDR resource and a
// throwing handler.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { hasCode } from '../../src/core/errors.js';
import { loadKubeConfig } from '../../src/platform/k8s/kubeconfig.js';
import { startSources } from '../../src/platform/k8s/sources.js';
import { ApiStatusError, KubeTransport } from '../../src/platform/k8s/transport.js';
import { node, svc } from '../apiserver/fixtures.js';
import { kubeConfigFor } from '../apiserver/kubeconfig.js';
import { Recorder } from '../apiserver/recorder.js';
import { TestApiServer } from '../apiserver/server.js';

const never = new AbortController().signal;

async function listNames(kc: ReturnType<typeof loadKubeConfig>, path: string): Promise<string[]> {
  const res = await new KubeTransport(kc).list(path, {}, never);
  return res.items.map((i) => (i as { metadata: { name: string } }).metadata.name);
}

describe('loadKubeConfig against the test API server', () => {
  let server: TestApiServer;
  let dir: string;
  before(async () => {
    server = new TestApiServer();
    await server.start();
    server.create('nodes', node('node-a', '192.0.2.1'));
    dir = mkdtempSync(join(tmpdir(), 'kpt-k8s-kubeconfig-'));
  });
  after(async () => {
    await server.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it('uses a kubeconfig with a bearer token', async () => {
    assert.deepEqual(await listNames(kubeConfigFor(server), '/api/v1/nodes'), ['node-a']);
  });

  it('uses a kubeconfig with a client certificate', async () => {
    const kc = kubeConfigFor(server, {
      clientCert: server.issueClientCert('system:kube-proxy', ['system:node-proxier']),
    });
    assert.deepEqual(await listNames(kc, '/api/v1/nodes'), ['node-a']);
  });

  it('lets --master override the kubeconfig server', async () => {
    const path = join(dir, 'wrong-server');
    writeFileSync(path, server.kubeconfig().replace(server.url, 'https://127.0.0.1:1'));
    await assert.rejects(listNames(loadKubeConfig({ kubeconfigPath: path }), '/api/v1/nodes'), /ECONNREFUSED/);
    assert.deepEqual(await listNames(loadKubeConfig({ kubeconfigPath: path, master: server.url }), '/api/v1/nodes'), [
      'node-a',
    ]);
  });

  it('reports the 401 of a refused token as an ApiStatusError', async () => {
    const err = await listNames(kubeConfigFor(server, { token: 'bad' }), '/api/v1/nodes').catch((e: unknown) => e);
    assert.ok(err instanceof ApiStatusError);
    assert.equal(err.statusCode, 401);
    assert.equal(err.reason, 'Unauthorized');
  });

  it('builds in-cluster config from an injectable service-account dir and env', async () => {
    const sa = join(dir, 'sa');
    mkdirSync(sa);
    writeFileSync(join(sa, 'token'), server.token);
    writeFileSync(join(sa, 'ca.crt'), server.caCert);
    const u = new URL(server.url);
    const env = { KUBERNETES_SERVICE_HOST: u.hostname, KUBERNETES_SERVICE_PORT: u.port };
    const kc = loadKubeConfig({ inClusterDir: sa, env });
    assert.equal(kc.getCurrentCluster()?.server, server.url);
    assert.deepEqual(await listNames(kc, '/api/v1/nodes'), ['node-a']);

    assert.ok(
      hasCode(
        catchErr(() => loadKubeConfig({ inClusterDir: sa, env: {} })),
        'KPT_CONFIG_INVALID',
      ),
    );
    assert.ok(
      hasCode(
        catchErr(() => loadKubeConfig({ inClusterDir: join(dir, 'none'), env })),
        'KPT_CONFIG_FILE',
      ),
    );
    const v6 = loadKubeConfig({
      inClusterDir: sa,
      env: { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' },
    });
    assert.equal(v6.getCurrentCluster()?.server, 'https://[fd00::1]:443');
  });

  it('fails with typed errors for a missing kubeconfig or a bad master', () => {
    assert.ok(
      hasCode(
        catchErr(() => loadKubeConfig({ kubeconfigPath: join(dir, 'missing') })),
        'KPT_CONFIG_FILE',
      ),
    );
    assert.ok(
      hasCode(
        catchErr(() => loadKubeConfig({ master: 'not a url' })),
        'KPT_CONFIG_INVALID',
      ),
    );
    assert.equal(
      loadKubeConfig({ master: 'https://192.0.2.50:6443' }).getCurrentCluster()?.server,
      'https://192.0.2.50:6443',
    );
  });
});

describe('k8s sources: optional resources and misbehaving handlers', () => {
  it('carries on without ServiceCIDRs when the server does not serve them (404)', async () => {
    const server = new TestApiServer({ resources: ['services', 'endpointslices', 'nodes'] });
    await server.start();
    server.create('services', svc('app', 'alpha', '172.30.0.10'));
    const rec = new Recorder();
    const ac = new AbortController();
    const done = startSources({
      kubeConfig: kubeConfigFor(server),
      nodeName: 'node-a',
      handlers: rec.handlers,
      signal: ac.signal,
      onEvent: rec.onEvent,
      backoff: { initialMs: 20, maxMs: 100 },
    });
    try {
      await rec.until(
        () =>
          rec.events.some((e) => e.type === 'unavailable' && e.resource === 'servicecidrs') &&
          ['service synced', 'slice synced', 'node synced'].every((s) => rec.calls.includes(s)),
        'sync without servicecidrs',
      );
      assert.equal(rec.cidrs, undefined);
      assert.equal(
        server.requests.filter((r) => r.path.endsWith('/servicecidrs')).length,
        1,
        'asked once, not retried',
      );
    } finally {
      ac.abort();
      await done;
      await server.dispose();
    }
  });

  it('reports a throwing handler and keeps delivering the following events', async () => {
    const server = new TestApiServer();
    await server.start();
    const rec = new Recorder();
    const handlers = {
      ...rec.handlers,
      service: {
        ...rec.handlers.service,
        onServiceAdd: (s: { metadata: { name?: string } }) => {
          if (s.metadata.name === 'boom') throw new Error('handler bug');
          rec.handlers.service.onServiceAdd(s as never);
        },
      },
    };
    const ac = new AbortController();
    const done = startSources({
      kubeConfig: kubeConfigFor(server),
      nodeName: 'node-a',
      handlers,
      signal: ac.signal,
      onEvent: rec.onEvent,
      backoff: { initialMs: 20, maxMs: 100 },
    });
    try {
      await rec.until(() => rec.events.filter((e) => e.type === 'watching').length >= 4, 'watches');
      server.create('services', svc('app', 'boom', '172.30.0.20'));
      server.create('services', svc('app', 'fine', '172.30.0.21'));
      await rec.until(() => rec.calls.some((c) => c.startsWith('service add app/fine')), 'the next event');
      assert.ok(rec.events.some((e) => e.type === 'handlerError' && e.error === 'handler bug'));
      assert.equal(rec.events.filter((e) => e.type === 'listed' && e.resource === 'services').length, 1, 'no relist');
    } finally {
      ac.abort();
      await done;
      await server.dispose();
    }
  });
});

function catchErr(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return undefined;
}
