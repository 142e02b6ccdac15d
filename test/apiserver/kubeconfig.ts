// KubeConfig objects for clients of a TestApiServer, loaded through the
// proxy's own loader from a kubeconfig file (as the proxy would read one).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../src/platform/k8s/kubeconfig.js';
import type { KeyPair } from './certs.js';
import type { TestApiServer } from './server.js';

export function kubeConfigFor(
  server: TestApiServer,
  opts: { token?: string; clientCert?: KeyPair; master?: string } = {},
): KubeConfig {
  const dir = mkdtempSync(join(tmpdir(), 'kpt-kubeconfig-'));
  try {
    const path = join(dir, 'kubeconfig');
    writeFileSync(path, server.kubeconfig(opts));
    return loadKubeConfig({ kubeconfigPath: path, master: opts.master });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
