// Ways to reach the API server, each checked against the test API server over
// real HTTPS: kubeconfig with an inline or file token, inline or file client
// certificates (paths relative to the kubeconfig), token files that rotate,
// impersonation, --master, the in-cluster service account (with a rotating
// projected token); and the clear errors for kubeconfigs that cannot work.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { hasCode } from '../../src/core/errors.js';
import { KubeClient } from '../../src/platform/k8s/client.js';
import { type ClientConfig, loadKubeConfig } from '../../src/platform/k8s/kubeconfig.js';
import { ApiStatusError } from '../../src/platform/k8s/transport.js';
import { FakeClock } from '../support/fakeclock.js';
import { node } from '../apiserver/fixtures.js';
import { kubeConfigFor } from '../apiserver/kubeconfig.js';
import { TestApiServer } from '../apiserver/server.js';

const never = new AbortController().signal;
const clients: KubeClient[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

function client(cfg: ClientConfig, clock?: FakeClock): KubeClient {
  const c = new KubeClient(cfg, { qps: -1, ...(clock ? { clock } : {}) });
  clients.push(c);
  return c;
}

async function names(c: KubeClient): Promise<string[]> {
  const res = await c.list('/api/v1/nodes', {}, never);
  return res.items.map((i) => (i as { metadata: { name: string } }).metadata.name);
}

function catchErr(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return undefined;
}

describe('kubeconfig and credentials against the test API server', () => {
  let server: TestApiServer;
  let dir: string;
  const lastUser = (): string | undefined => server.requests.at(-1)?.user;
  /** Write a kubeconfig (JSON is YAML) into dir/name and load it. */
  const write = (name: string, doc: unknown): string => {
    const p = join(dir, name);
    writeFileSync(p, typeof doc === 'string' ? doc : JSON.stringify(doc));
    return p;
  };
  const kubeconfig = (user: Record<string, unknown>, cluster: Record<string, unknown> = {}) => ({
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'ctx',
    clusters: [
      {
        name: 'c',
        cluster: {
          server: server.url,
          'certificate-authority-data': Buffer.from(server.caCert).toString('base64'),
          ...cluster,
        },
      },
    ],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
  });

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
    assert.deepEqual(await names(client(kubeConfigFor(server))), ['node-a']);
    assert.equal(lastUser(), `token:${server.token}`);
  });

  it('uses inline client certificate data', async () => {
    const kc = kubeConfigFor(server, {
      clientCert: server.issueClientCert('system:kube-proxy', ['system:node-proxier']),
    });
    assert.deepEqual(await names(client(kc)), ['node-a']);
    assert.equal(lastUser(), 'cert:system:kube-proxy');
  });

  it('reads certificate, key and CA files relative to the kubeconfig', async () => {
    const pair = server.issueClientCert('file-user');
    mkdirSync(join(dir, 'pki'), { recursive: true });
    writeFileSync(join(dir, 'pki', 'client.crt'), pair.cert);
    writeFileSync(join(dir, 'pki', 'client.key'), pair.key);
    writeFileSync(join(dir, 'pki', 'ca.crt'), server.caCert);
    const doc = kubeconfig({ 'client-certificate': 'pki/client.crt', 'client-key': 'pki/client.key' });
    doc.clusters[0]!.cluster = { server: server.url, 'certificate-authority': 'pki/ca.crt' } as never;
    const kc = loadKubeConfig({ kubeconfigPath: write('files.kubeconfig', doc) });
    assert.deepEqual(await names(client(kc)), ['node-a']);
    assert.equal(lastUser(), 'cert:file-user');
  });

  it('parses YAML kubeconfigs as kubectl writes them', async () => {
    const yaml = [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: c',
      '  cluster:',
      `    server: ${server.url}`,
      `    certificate-authority-data: ${Buffer.from(server.caCert).toString('base64')}`,
      'users:',
      '- name: u',
      '  user:',
      `    token: ${server.token}`,
      'contexts:',
      '- name: ctx',
      '  context: {cluster: c, user: u}',
      'current-context: ctx',
      '',
    ].join('\n');
    assert.deepEqual(await names(client(loadKubeConfig({ kubeconfigPath: write('yaml.kubeconfig', yaml) }))), [
      'node-a',
    ]);
  });

  it('lets --master override the kubeconfig server', async () => {
    const path = write('wrong-server', server.kubeconfig().replace(server.url, 'https://127.0.0.1:1'));
    await assert.rejects(names(client(loadKubeConfig({ kubeconfigPath: path }))), /ECONNREFUSED/);
    assert.deepEqual(await names(client(loadKubeConfig({ kubeconfigPath: path, master: server.url }))), ['node-a']);
  });

  it('reports the 401 of a refused token as an ApiStatusError', async () => {
    const err = await names(client(kubeConfigFor(server, { token: 'bad' }))).catch((e: unknown) => e);
    assert.ok(err instanceof ApiStatusError);
    assert.equal(err.statusCode, 401);
    assert.equal(err.reason, 'Unauthorized');
  });

  it('re-reads a rotated token file after a 401, and after a minute without one', async () => {
    const tokenFile = join(dir, 'rotating-token');
    writeFileSync(tokenFile, 'token-one\n');
    server.acceptToken('token-one');
    const clock = new FakeClock();
    const c = client(loadKubeConfig({ kubeconfigPath: write('tf.kubeconfig', kubeconfig({ tokenFile })) }), clock);
    assert.deepEqual(await names(c), ['node-a']);
    assert.equal(lastUser(), 'token:token-one');

    // Rotation while the old token still works: picked up once the read is a minute old.
    server.acceptToken('token-two');
    writeFileSync(tokenFile, 'token-two\n');
    await names(c);
    assert.equal(lastUser(), 'token:token-one', 'the copy in memory is fresh');
    clock.advance(61_000);
    await names(c);
    assert.equal(lastUser(), 'token:token-two');

    // Rotation with the old token revoked at once: one 401, then the new file is read.
    server.acceptToken('token-three');
    server.revokeToken('token-two');
    writeFileSync(tokenFile, 'token-three\n');
    await assert.rejects(names(c), (e: unknown) => e instanceof ApiStatusError && e.statusCode === 401);
    assert.deepEqual(await names(c), ['node-a']);
    assert.equal(lastUser(), 'token:token-three');
    server.revokeToken('token-one');
    server.revokeToken('token-three');
  });

  it('sends impersonation headers', async () => {
    const kc = loadKubeConfig({
      kubeconfigPath: write(
        'as.kubeconfig',
        kubeconfig({ token: server.token, as: 'system:serviceaccount:kube-system:kp', 'as-groups': ['g1'] }),
      ),
    });
    await names(client(kc));
    assert.equal(server.requests.at(-1)?.impersonateUser, 'system:serviceaccount:kube-system:kp');
  });

  it('builds the in-cluster config from the service-account dir, and follows token rotation', async () => {
    const sa = join(dir, 'sa');
    mkdirSync(sa);
    writeFileSync(join(sa, 'token'), 'sa-token-1');
    writeFileSync(join(sa, 'ca.crt'), server.caCert);
    server.acceptToken('sa-token-1');
    const u = new URL(server.url);
    const env = { KUBERNETES_SERVICE_HOST: u.hostname, KUBERNETES_SERVICE_PORT: u.port };
    const kc = loadKubeConfig({ inClusterDir: sa, env });
    assert.equal(kc.server, server.url);
    assert.equal(kc.tokenFile, join(sa, 'token'));
    const c = client(kc);
    assert.deepEqual(await names(c), ['node-a']);
    assert.equal(lastUser(), 'token:sa-token-1');
    // The kubelet rewrites the projected token; the old one stops working.
    server.acceptToken('sa-token-2');
    server.revokeToken('sa-token-1');
    writeFileSync(join(sa, 'token'), 'sa-token-2');
    await assert.rejects(names(c), (e: unknown) => e instanceof ApiStatusError && e.statusCode === 401);
    assert.deepEqual(await names(c), ['node-a']);
    assert.equal(lastUser(), 'token:sa-token-2');
    server.revokeToken('sa-token-2');

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
    assert.equal(v6.server, 'https://[fd00::1]:443');
  });

  it('talks to --master alone without credentials', () => {
    const kc = loadKubeConfig({ master: 'https://192.0.2.50:6443/' });
    assert.equal(kc.server, 'https://192.0.2.50:6443');
    assert.equal(kc.token, undefined);
  });

  it('refuses kubeconfigs that cannot work, naming the problem', () => {
    const cases: Array<[string, unknown, RegExp, 'KPT_CONFIG_INVALID' | 'KPT_CONFIG_FILE']> = [
      [
        'no-context',
        { ...kubeconfig({ token: 't' }), 'current-context': '' },
        /no current-context/,
        'KPT_CONFIG_INVALID',
      ],
      ['unknown-user', { ...kubeconfig({ token: 't' }), users: [] }, /user "u" not found/, 'KPT_CONFIG_INVALID'],
      [
        'auth-provider',
        kubeconfig({ 'auth-provider': { name: 'gcp' } }),
        /auth-provider "gcp" is not supported; use an exec/,
        'KPT_CONFIG_INVALID',
      ],
      [
        'token-and-basic',
        kubeconfig({ token: 't', username: 'a', password: 'b' }),
        /more than one authentication method/,
        'KPT_CONFIG_INVALID',
      ],
      [
        'insecure-and-ca',
        kubeconfig({ token: 't' }, { 'insecure-skip-tls-verify': true }),
        /insecure flag is not allowed/,
        'KPT_CONFIG_INVALID',
      ],
      [
        'cert-no-key',
        kubeconfig({ 'client-certificate-data': 'eA==' }),
        /must be given together/,
        'KPT_CONFIG_INVALID',
      ],
      [
        'missing-cert-file',
        kubeconfig({ 'client-certificate': 'nope.crt', 'client-key': 'nope.key' }),
        /client-certificate .*nope\.crt: ENOENT/,
        'KPT_CONFIG_FILE',
      ],
      [
        'exec-alpha',
        kubeconfig({ exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1alpha1' } }),
        /v1alpha1" is not supported/,
        'KPT_CONFIG_INVALID',
      ],
      [
        'exec-v1-no-mode',
        kubeconfig({ exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1' } }),
        /interactiveMode is required/,
        'KPT_CONFIG_INVALID',
      ],
      [
        'exec-always',
        kubeconfig({
          exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1', interactiveMode: 'Always' },
        }),
        /needs a terminal/,
        'KPT_CONFIG_INVALID',
      ],
      [
        'proxy-url',
        kubeconfig({ token: 't' }, { 'proxy-url': 'http://proxy:3128' }),
        /proxy-url is not supported/,
        'KPT_CONFIG_INVALID',
      ],
      ['not-yaml', 'clusters: [unclosed', /kubeconfig .*not-yaml/, 'KPT_CONFIG_FILE'],
    ];
    for (const [name, doc, re, code] of cases) {
      const err = catchErr(() => loadKubeConfig({ kubeconfigPath: write(name, doc) }));
      assert.ok(hasCode(err, code), `${name}: ${String(err)}`);
      assert.match((err as Error).message, re, name);
    }
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
  });
});
