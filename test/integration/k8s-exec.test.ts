// Exec credential plugins against the test API server over real HTTPS, with a
// fake plugin (a small script the kubeconfig runs with node): a token
// (client.authentication.k8s.io/v1) cached until it expires or is refused, a
// client certificate (v1beta1, with the cluster info passed on), one run for
// concurrent requests, and the errors an operator sees when a plugin fails.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { hasCode } from '../../src/core/errors.js';
import { KubeClient } from '../../src/platform/k8s/client.js';
import { loadKubeConfig } from '../../src/platform/k8s/kubeconfig.js';
import { ApiStatusError } from '../../src/platform/k8s/transport.js';
import { FakeClock } from '../support/fakeclock.js';
import { node } from '../apiserver/fixtures.js';
import { TestApiServer } from '../apiserver/server.js';

const PLUGIN = `
const fs = require('fs');
const dir = process.env.STATE_DIR;
const countFile = dir + '/count';
const n = (fs.existsSync(countFile) ? Number(fs.readFileSync(countFile, 'utf8')) : 0) + 1;
fs.writeFileSync(countFile, String(n));
fs.writeFileSync(dir + '/info-' + n, process.env.KUBERNETES_EXEC_INFO || '');
fs.writeFileSync(dir + '/argv-' + n, JSON.stringify(process.argv.slice(2)));
if (process.env.MODE === 'fail') { process.stderr.write('no credentials for you\\n'); process.exit(3); }
const info = JSON.parse(process.env.KUBERNETES_EXEC_INFO);
const status = {};
if (process.env.MODE === 'cert') {
  status.clientCertificateData = fs.readFileSync(dir + '/client.crt', 'utf8');
  status.clientKeyData = fs.readFileSync(dir + '/client.key', 'utf8');
} else status.token = 'exec-token-' + n;
if (process.env.EXPIRES) status.expirationTimestamp = process.env.EXPIRES;
process.stdout.write(JSON.stringify({ apiVersion: process.env.REPLY_VERSION || info.apiVersion, kind: 'ExecCredential', status }));
`;

const never = new AbortController().signal;

describe('exec credential plugins', () => {
  let server: TestApiServer;
  let dir: string;
  let state: string;
  let plugin: string;
  const clients: KubeClient[] = [];

  before(async () => {
    server = new TestApiServer();
    await server.start();
    server.create('nodes', node('node-a', '192.0.2.1'));
    dir = mkdtempSync(join(tmpdir(), 'kpt-k8s-exec-'));
    plugin = join(dir, 'plugin.cjs');
    writeFileSync(plugin, PLUGIN);
  });
  beforeEach(() => {
    state = mkdtempSync(join(dir, 'state-'));
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.close();
  });
  after(async () => {
    await server.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  const runs = (): number =>
    existsSync(join(state, 'count')) ? Number(readFileSync(join(state, 'count'), 'utf8')) : 0;
  const info = (n: number): Record<string, unknown> =>
    JSON.parse(readFileSync(join(state, `info-${n}`), 'utf8')) as Record<string, unknown>;

  function clientWith(exec: Record<string, unknown>, env: Record<string, string>, clock?: FakeClock): KubeClient {
    const kc = {
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'ctx',
      clusters: [
        {
          name: 'c',
          cluster: { server: server.url, 'certificate-authority-data': Buffer.from(server.caCert).toString('base64') },
        },
      ],
      users: [
        {
          name: 'u',
          user: {
            exec: {
              command: process.execPath,
              args: [plugin, '--flag', 'value'],
              env: Object.entries({ STATE_DIR: state, ...env }).map(([name, value]) => ({ name, value })),
              ...exec,
            },
          },
        },
      ],
      contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
    };
    const path = join(state, 'kubeconfig');
    writeFileSync(path, JSON.stringify(kc));
    const c = new KubeClient(loadKubeConfig({ kubeconfigPath: path }), { qps: -1, ...(clock ? { clock } : {}) });
    clients.push(c);
    return c;
  }
  const v1 = { apiVersion: 'client.authentication.k8s.io/v1', interactiveMode: 'Never' };
  const list = (c: KubeClient): Promise<unknown> => c.list('/api/v1/nodes', {}, never);

  it('runs a v1 plugin once, passes args, env and ExecCredential, and reuses its token', async () => {
    server.acceptToken('exec-token-1');
    const c = clientWith(v1, { MODE: 'token' });
    await Promise.all([list(c), list(c), list(c)]);
    await list(c);
    assert.equal(runs(), 1, 'one run for concurrent and later requests');
    assert.equal(server.requests.at(-1)?.user, 'token:exec-token-1');
    assert.deepEqual(info(1), {
      kind: 'ExecCredential',
      apiVersion: 'client.authentication.k8s.io/v1',
      spec: { interactive: false },
    });
    assert.deepEqual(JSON.parse(readFileSync(join(state, 'argv-1'), 'utf8')), ['--flag', 'value']);
    server.revokeToken('exec-token-1');
  });

  it('runs the plugin again when its credential is about to expire', async () => {
    const clock = new FakeClock();
    server.acceptToken('exec-token-1');
    server.acceptToken('exec-token-2');
    const c = clientWith(v1, { MODE: 'token', EXPIRES: new Date(clock.now() + 100_000).toISOString() }, clock);
    await list(c);
    clock.advance(80_000);
    await list(c);
    assert.equal(runs(), 1);
    clock.advance(15_000);
    await list(c);
    assert.equal(runs(), 2);
    assert.equal(server.requests.at(-1)?.user, 'token:exec-token-2');
    server.revokeToken('exec-token-1');
    server.revokeToken('exec-token-2');
  });

  it('runs the plugin again after the server refuses its token (401)', async () => {
    server.acceptToken('exec-token-1');
    const c = clientWith(v1, { MODE: 'token' });
    await list(c);
    server.revokeToken('exec-token-1');
    server.acceptToken('exec-token-2');
    await assert.rejects(list(c), (e: unknown) => e instanceof ApiStatusError && e.statusCode === 401);
    await list(c);
    assert.equal(runs(), 2);
    assert.equal(server.requests.at(-1)?.user, 'token:exec-token-2');
    server.revokeToken('exec-token-2');
  });

  it('uses a client certificate from a v1beta1 plugin, with the cluster info it asked for', async () => {
    const pair = server.issueClientCert('exec-cert-user');
    writeFileSync(join(state, 'client.crt'), pair.cert);
    writeFileSync(join(state, 'client.key'), pair.key);
    const c = clientWith(
      { apiVersion: 'client.authentication.k8s.io/v1beta1', provideClusterInfo: true },
      { MODE: 'cert' },
    );
    await list(c);
    assert.equal(server.requests.at(-1)?.user, 'cert:exec-cert-user');
    const spec = info(1)['spec'] as { interactive: boolean; cluster: Record<string, unknown> };
    assert.equal(spec.interactive, false);
    assert.equal(spec.cluster['server'], server.url);
    assert.equal(Buffer.from(String(spec.cluster['certificate-authority-data']), 'base64').toString(), server.caCert);
  });

  it('says what went wrong when the plugin is missing, fails, or answers in the wrong version', async () => {
    const missing = clientWith(
      { ...v1, command: join(dir, 'no-such-plugin'), installHint: 'Install it with: apt install kp-auth' },
      {},
    );
    const e1 = await list(missing).catch((e: unknown) => e);
    assert.ok(hasCode(e1, 'KPT_EXEC_FAILED'), String(e1));
    assert.match((e1 as Error).message, /no-such-plugin not found\nInstall it with: apt install kp-auth/);

    const failing = clientWith(v1, { MODE: 'fail' });
    const e2 = await list(failing).catch((e: unknown) => e);
    assert.match((e2 as Error).message, /exited with status 3: no credentials for you/);

    const wrong = clientWith(v1, { MODE: 'token', REPLY_VERSION: 'client.authentication.k8s.io/v1beta1' });
    const e3 = await list(wrong).catch((e: unknown) => e);
    assert.match(
      (e3 as Error).message,
      /configured for client.authentication.k8s.io\/v1, but the plugin returned "client.authentication.k8s.io\/v1beta1"/,
    );
  });
});
