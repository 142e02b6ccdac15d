// Clients of a TestApiServer, configured through the proxy's own loader from
// a kubeconfig file (as the proxy would read one).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeClient, type KubeClientOptions } from '../../src/platform/k8s/client.js';
import { type ClientConfig, loadKubeConfig } from '../../src/platform/k8s/kubeconfig.js';
import type { KeyPair } from './certs.js';
import type { TestApiServer } from './server.js';

export interface KubeConfigForOptions {
  token?: string;
  clientCert?: KeyPair;
  master?: string;
}

export function kubeConfigFor(server: TestApiServer, opts: KubeConfigForOptions = {}): ClientConfig {
  const dir = mkdtempSync(join(tmpdir(), 'kpt-kubeconfig-'));
  try {
    const path = join(dir, 'kubeconfig');
    writeFileSync(path, server.kubeconfig(opts));
    return loadKubeConfig({ kubeconfigPath: path, master: opts.master });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A KubeClient for the server; unlimited rate unless opts say otherwise. Close it when done. */
export function clientFor(
  server: TestApiServer,
  opts: KubeConfigForOptions = {},
  clientOpts: KubeClientOptions = {},
): KubeClient {
  return new KubeClient(kubeConfigFor(server, opts), { qps: -1, ...clientOpts });
}
