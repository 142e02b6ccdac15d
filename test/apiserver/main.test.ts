// The CLI entry: it runs as its own process, writes ca.crt/token/kubeconfig
// into --dir, serves the REST API with the token, and exits on SIGTERM.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { loadKubeConfig } from '../../src/platform/k8s/kubeconfig.js';
import { KubeClient } from '../../src/platform/k8s/client.js';
import { call } from './client.js';
import { svc } from './fixtures.js';

const here = dirname(fileURLToPath(import.meta.url));

/** node args to run main: the compiled .js under dist, or the .ts through tsx. */
function mainCommand(): string[] {
  const js = join(here, 'main.js');
  return existsSync(js) ? [js] : ['--import', 'tsx', join(here, 'main.ts')];
}

it('runs as a process driven through its REST API with the token', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpt-apiserver-cli-'));
  const child = spawn(
    process.execPath,
    [...mainCommand(), '--listen', '127.0.0.1:0', '--dir', dir, '--token', 'cli-token', '--bookmark-interval', '100ms'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const line = await new Promise<string>((resolve, reject) => {
      createInterface(child.stdout).once('line', resolve);
      child.once('exit', () => reject(new Error('apiserver exited before it was ready')));
    });
    const ready = JSON.parse(line) as { ready: boolean; url: string; kubeconfig: string };
    assert.equal(ready.ready, true);
    assert.equal(readFileSync(join(dir, 'token'), 'utf8'), 'cli-token');
    const ca = readFileSync(join(dir, 'ca.crt'), 'utf8');

    const c = { url: ready.url, ca, token: 'cli-token' };
    assert.equal((await call({ ...c, token: 'wrong' }, 'GET', '/api/v1/services')).status, 401);
    assert.equal(
      (await call(c, 'POST', '/api/v1/namespaces/cli/services', svc('cli', 'web', '172.30.5.1'))).status,
      201,
    );

    const kc = loadKubeConfig({ kubeconfigPath: ready.kubeconfig });
    const client = new KubeClient(kc);
    const list = await client.list('/api/v1/services', {}, new AbortController().signal);
    client.close();
    assert.deepEqual(
      list.items.map((i) => (i as { metadata: { name: string } }).metadata.name),
      ['web'],
    );
  } finally {
    child.kill('SIGTERM');
    const code = await exited;
    rmSync(dir, { recursive: true, force: true });
    assert.equal(code, 0);
  }
});
