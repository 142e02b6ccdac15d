// Where the proxy finds its API server, as upstream's
// clientcmd.BuildConfigFromFlags(master, kubeconfig) decides it:
// - a kubeconfig file (client certificates, tokens, CA; paths relative to the
//   file), with `master` overriding its server URL;
// - only `master`: that URL, no credentials;
// - neither: in-cluster config from the service-account dir (token + ca.crt)
//   and KUBERNETES_SERVICE_HOST/PORT. The dir and env are injectable so tests
//   can point them at a temp dir.
// The token file is re-read by the library (every 60 s), so rotated projected
// tokens keep working.

import { existsSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { ProxyError } from '../../core/errors.js';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface LoadKubeConfigOptions {
  readonly kubeconfigPath?: string;
  /** Overrides the server URL (upstream --master). */
  readonly master?: string;
  /** Service-account dir for in-cluster config; default SERVICE_ACCOUNT_DIR. */
  readonly inClusterDir?: string;
  /** Environment for KUBERNETES_SERVICE_HOST/PORT; default process.env. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/** Build a KubeConfig; failures are ProxyError KPT_CONFIG_FILE / KPT_CONFIG_INVALID. */
export function loadKubeConfig(opts: LoadKubeConfigOptions = {}): KubeConfig {
  const kc = new KubeConfig();
  if (opts.kubeconfigPath) {
    if (!existsSync(opts.kubeconfigPath)) {
      throw new ProxyError('KPT_CONFIG_FILE', `kubeconfig ${opts.kubeconfigPath} does not exist`);
    }
    try {
      kc.loadFromFile(opts.kubeconfigPath);
    } catch (err) {
      throw new ProxyError('KPT_CONFIG_FILE', `kubeconfig ${opts.kubeconfigPath}: ${String(err)}`, { cause: err });
    }
    if (!kc.getCurrentCluster()) {
      throw new ProxyError('KPT_CONFIG_INVALID', `kubeconfig ${opts.kubeconfigPath}: no current context/cluster`);
    }
    if (opts.master) overrideServer(kc, opts.master);
    return kc;
  }
  if (opts.master) {
    checkURL(opts.master);
    kc.loadFromClusterAndUser(
      { name: 'master', server: opts.master, skipTLSVerify: opts.master.startsWith('http:') },
      { name: 'anonymous' },
    );
    return kc;
  }
  return inClusterConfig(kc, opts.inClusterDir ?? SERVICE_ACCOUNT_DIR, opts.env ?? process.env);
}

function checkURL(u: string): void {
  let url: URL;
  try {
    url = new URL(u);
  } catch {
    throw new ProxyError('KPT_CONFIG_INVALID', `master ${JSON.stringify(u)} is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ProxyError('KPT_CONFIG_INVALID', `master ${JSON.stringify(u)} must be http(s)`);
  }
}

function overrideServer(kc: KubeConfig, master: string): void {
  checkURL(master);
  const current = kc.getCurrentCluster()!;
  kc.loadFromOptions({
    clusters: kc.clusters.map((c) =>
      c.name === current.name
        ? { ...c, server: master, skipTLSVerify: c.skipTLSVerify || master.startsWith('http:') }
        : c,
    ),
    contexts: kc.contexts,
    users: kc.users,
    currentContext: kc.currentContext,
  });
}

function inClusterConfig(kc: KubeConfig, dir: string, env: Readonly<Record<string, string | undefined>>): KubeConfig {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) {
    throw new ProxyError(
      'KPT_CONFIG_INVALID',
      'unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined',
    );
  }
  const tokenFile = join(dir, 'token');
  const caFile = join(dir, 'ca.crt');
  for (const f of [tokenFile, caFile]) {
    if (!existsSync(f)) throw new ProxyError('KPT_CONFIG_FILE', `in-cluster config: ${f} does not exist`);
  }
  const server = `https://${isIPv6(host) ? `[${host}]` : host}:${port}`;
  kc.loadFromClusterAndUser(
    { name: 'inCluster', server, caFile, skipTLSVerify: false },
    { name: 'inClusterUser', authProvider: { name: 'tokenFile', config: { tokenFile } } },
  );
  return kc;
}
