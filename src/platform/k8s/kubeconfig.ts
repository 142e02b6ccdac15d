// Where the proxy finds its API server and how it proves who it is, decided as
// upstream's clientcmd.BuildConfigFromFlags(master, kubeconfig) does:
// - a kubeconfig file: its current context's cluster and user, with `master`
//   overriding the cluster's server URL;
// - only `master`: that URL, no credentials;
// - neither: the in-cluster service account (token file + ca.crt) and
//   KUBERNETES_SERVICE_HOST/PORT.
//
// Contract: loadKubeConfig only reads files and validates; it never talks to
// the server. Every problem is a ProxyError naming the file and field:
// KPT_CONFIG_FILE for files that cannot be read or parsed, KPT_CONFIG_INVALID
// for content that cannot work (no context, unknown auth, contradictions).
// Credential files named by the kubeconfig (client certificate, key, CA) are
// read here, once; the token file and exec plugins are read/run later, on
// demand, by credentials.ts, so rotated tokens and expiring credentials work.
//
// Supported user entries: client-certificate(-data) + client-key(-data),
// token, tokenFile, username/password, exec (client.authentication.k8s.io/v1
// and v1beta1), impersonation (as, as-groups, as-uid, as-user-extra).
// Refused with a message: auth-provider (removed upstream for gcp/azure; use
// an exec plugin), proxy-url.

import { existsSync, readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { parse as parseYAML } from 'yaml';
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

/** An exec credential plugin as the kubeconfig declares it. */
export interface ExecConfig {
  readonly command: string;
  readonly args: readonly string[];
  readonly env: ReadonlyArray<{ readonly name: string; readonly value: string }>;
  readonly apiVersion: 'client.authentication.k8s.io/v1' | 'client.authentication.k8s.io/v1beta1';
  readonly installHint: string;
  readonly provideClusterInfo: boolean;
  readonly interactiveMode: 'Never' | 'IfAvailable' | 'Always';
  /** The cluster's `extensions` entry named client.authentication.k8s.io/exec, passed on with provideClusterInfo. */
  readonly clusterExtension?: unknown;
}

export interface TLSSettings {
  /** PEM CA bundle; undefined = the system's roots. */
  readonly ca?: string;
  /** PEM client certificate and key (from the kubeconfig; exec plugins may supply them later). */
  readonly cert?: string;
  readonly key?: string;
  readonly insecureSkipVerify: boolean;
  readonly serverName?: string;
}

export interface Impersonation {
  readonly user?: string;
  readonly uid?: string;
  readonly groups: readonly string[];
  readonly extra: Readonly<Record<string, readonly string[]>>;
}

/** Everything the client needs to reach and authenticate to one API server. */
export interface ClientConfig {
  /** Base URL without a trailing slash, e.g. https://10.0.0.1:6443. */
  readonly server: string;
  readonly tls: TLSSettings;
  readonly token?: string;
  /** Re-read on rotation; wins over `token` once read. */
  readonly tokenFile?: string;
  readonly basic?: { readonly username: string; readonly password: string };
  readonly exec?: ExecConfig;
  readonly impersonate?: Impersonation;
  /** Where this came from, for logs: "kubeconfig /etc/kp/kubeconfig (context ctx)", "in-cluster", "--master". */
  readonly source: string;
}

/** Build the client configuration; failures are ProxyError KPT_CONFIG_FILE / KPT_CONFIG_INVALID. */
export function loadKubeConfig(opts: LoadKubeConfigOptions = {}): ClientConfig {
  if (opts.kubeconfigPath) {
    const cfg = fromKubeconfigFile(opts.kubeconfigPath);
    if (!opts.master) return cfg;
    const server = checkURL(opts.master, '--master');
    return { ...cfg, server, source: `${cfg.source} with --master ${server}` };
  }
  if (opts.master) {
    return { server: checkURL(opts.master, '--master'), tls: { insecureSkipVerify: false }, source: '--master' };
  }
  return inClusterConfig(opts.inClusterDir ?? SERVICE_ACCOUNT_DIR, opts.env ?? process.env);
}

function invalid(where: string, msg: string): ProxyError {
  return new ProxyError('KPT_CONFIG_INVALID', `${where}: ${msg}`);
}

function checkURL(u: string, where: string): string {
  let url: URL;
  try {
    url = new URL(u);
  } catch {
    throw invalid(where, `${JSON.stringify(u)} is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw invalid(where, `${JSON.stringify(u)} must be an http or https URL`);
  }
  return u.replace(/\/+$/, '');
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Find `name` in a kubeconfig list of {name, <field>: {...}} entries. */
function named(doc: Obj, list: 'clusters' | 'users' | 'contexts', name: string, where: string): Obj {
  const entries = doc[list];
  const field = list.slice(0, -1);
  if (entries !== undefined && entries !== null && !Array.isArray(entries))
    throw invalid(where, `${list} must be a list`);
  const hit = ((entries as unknown[] | null) ?? []).find((e) => isObj(e) && e['name'] === name) as Obj | undefined;
  if (!hit) throw invalid(where, `${field} ${JSON.stringify(name)} not found`);
  const body = hit[field] ?? {};
  if (!isObj(body)) throw invalid(where, `${field} ${JSON.stringify(name)} must be a mapping`);
  return body;
}

function str(o: Obj, key: string, where: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw invalid(where, `${key} must be a string`);
  return v;
}

function fromKubeconfigFile(path: string): ClientConfig {
  if (!existsSync(path)) throw new ProxyError('KPT_CONFIG_FILE', `kubeconfig ${path} does not exist`);
  let doc: unknown;
  try {
    doc = parseYAML(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ProxyError('KPT_CONFIG_FILE', `kubeconfig ${path}: ${(err as Error).message}`, { cause: err });
  }
  if (!isObj(doc)) throw invalid(`kubeconfig ${path}`, 'not a kubeconfig (expected a mapping)');
  const where = `kubeconfig ${path}`;
  const base = dirname(resolve(path));
  const contextName = str(doc, 'current-context', where);
  if (!contextName) throw invalid(where, 'no current-context');
  const context = named(doc, 'contexts', contextName, where);
  const clusterName = str(context, 'cluster', `${where} context ${contextName}`);
  if (!clusterName) throw invalid(where, `context ${JSON.stringify(contextName)} names no cluster`);
  const cluster = named(doc, 'clusters', clusterName, where);
  const userName = str(context, 'user', `${where} context ${contextName}`);
  const user = userName ? named(doc, 'users', userName, where) : {};
  const cw = `${where} cluster ${clusterName}`;
  const uw = `${where} user ${userName ?? ''}`;
  const server = str(cluster, 'server', cw);
  if (!server) throw invalid(cw, 'no server');
  if (str(cluster, 'proxy-url', cw)) throw invalid(cw, 'proxy-url is not supported by kube-proxy-ts');
  const insecure = cluster['insecure-skip-tls-verify'] === true;
  const ca = fileOrData(cluster, 'certificate-authority', base, cw);
  if (insecure && ca) {
    throw invalid(cw, 'specifying a root certificates file with the insecure flag is not allowed');
  }
  const cert = fileOrData(user, 'client-certificate', base, uw);
  const key = fileOrData(user, 'client-key', base, uw);
  if (Boolean(cert) !== Boolean(key)) throw invalid(uw, 'client-certificate and client-key must be given together');
  if (user['auth-provider'] !== undefined && user['auth-provider'] !== null) {
    const name = isObj(user['auth-provider']) ? String(user['auth-provider']['name']) : '?';
    throw invalid(uw, `auth-provider ${JSON.stringify(name)} is not supported; use an exec credential plugin`);
  }
  const token = str(user, 'token', uw);
  const tokenFileRaw = str(user, 'tokenFile', uw);
  const username = str(user, 'username', uw);
  const password = str(user, 'password', uw);
  if ((token || tokenFileRaw) && (username || password)) {
    throw invalid(uw, 'more than one authentication method found (token and basic auth); only one is allowed');
  }
  const tlsServerName = str(cluster, 'tls-server-name', cw);
  return {
    server: checkURL(server, cw),
    tls: {
      ...(ca ? { ca } : {}),
      ...(cert && key ? { cert, key } : {}),
      insecureSkipVerify: insecure,
      ...(tlsServerName ? { serverName: tlsServerName } : {}),
    },
    ...(token ? { token } : {}),
    ...(tokenFileRaw ? { tokenFile: abs(tokenFileRaw, base) } : {}),
    ...(username || password ? { basic: { username: username ?? '', password: password ?? '' } } : {}),
    ...(user['exec'] !== undefined && user['exec'] !== null ? { exec: execConfig(user['exec'], cluster, uw) } : {}),
    ...impersonation(user, uw),
    source: `kubeconfig ${path} (context ${contextName})`,
  };
}

function abs(p: string, base: string): string {
  return isAbsolute(p) ? p : join(base, p);
}

/** `<field>-data` (base64) or `<field>` (a path relative to the kubeconfig); the data wins, as in clientcmd. */
function fileOrData(o: Obj, field: string, base: string, where: string): string | undefined {
  const data = str(o, `${field}-data`, where);
  if (data) return Buffer.from(data, 'base64').toString('utf8');
  const file = str(o, field, where);
  if (!file) return undefined;
  const p = abs(file, base);
  try {
    return readFileSync(p, 'utf8');
  } catch (err) {
    throw new ProxyError('KPT_CONFIG_FILE', `${where}: ${field} ${p}: ${(err as NodeJS.ErrnoException).code ?? err}`, {
      cause: err,
    });
  }
}

const EXEC_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'] as const;

function execConfig(raw: unknown, cluster: Obj, where: string): ExecConfig {
  const w = `${where} exec`;
  if (!isObj(raw)) throw invalid(w, 'must be a mapping');
  const command = str(raw, 'command', w);
  if (!command) throw invalid(w, 'command is required');
  const apiVersion = str(raw, 'apiVersion', w);
  if (!EXEC_VERSIONS.includes(apiVersion as (typeof EXEC_VERSIONS)[number])) {
    throw invalid(
      w,
      `apiVersion ${JSON.stringify(apiVersion ?? '')} is not supported; use one of ${EXEC_VERSIONS.join(', ')}`,
    );
  }
  const args = raw['args'] ?? [];
  if (!Array.isArray(args) || !args.every((a) => typeof a === 'string'))
    throw invalid(w, 'args must be a list of strings');
  const env = raw['env'] ?? [];
  if (
    !Array.isArray(env) ||
    !env.every((e) => isObj(e) && typeof e['name'] === 'string' && typeof e['value'] === 'string')
  ) {
    throw invalid(w, 'env must be a list of {name, value} strings');
  }
  let interactive = str(raw, 'interactiveMode', w);
  // v1 requires the field; v1beta1 defaults it (clientcmd's defaulting).
  if (!interactive && apiVersion === 'client.authentication.k8s.io/v1')
    throw invalid(w, 'interactiveMode is required for v1');
  interactive ??= 'IfAvailable';
  if (interactive !== 'Never' && interactive !== 'IfAvailable' && interactive !== 'Always') {
    throw invalid(w, `interactiveMode ${JSON.stringify(interactive)} must be Never, IfAvailable or Always`);
  }
  if (interactive === 'Always') throw invalid(w, 'interactiveMode Always needs a terminal; a node proxy has none');
  const ext = Array.isArray(cluster['extensions'])
    ? (cluster['extensions'] as unknown[]).find((e) => isObj(e) && e['name'] === 'client.authentication.k8s.io/exec')
    : undefined;
  return {
    command,
    args: args as string[],
    env: env as Array<{ name: string; value: string }>,
    apiVersion: apiVersion as ExecConfig['apiVersion'],
    installHint: str(raw, 'installHint', w) ?? '',
    provideClusterInfo: raw['provideClusterInfo'] === true,
    interactiveMode: interactive,
    ...(isObj(ext) ? { clusterExtension: ext['extension'] } : {}),
  };
}

function impersonation(user: Obj, where: string): { impersonate?: Impersonation } {
  const as = str(user, 'as', where);
  const uid = str(user, 'as-uid', where);
  const groups = user['as-groups'] ?? [];
  const extra = user['as-user-extra'] ?? {};
  if (!Array.isArray(groups) || !groups.every((g) => typeof g === 'string')) {
    throw invalid(where, 'as-groups must be a list of strings');
  }
  if (!isObj(extra) || !Object.values(extra).every((v) => Array.isArray(v) && v.every((x) => typeof x === 'string'))) {
    throw invalid(where, 'as-user-extra must map names to lists of strings');
  }
  if (!as && !uid && groups.length === 0 && Object.keys(extra).length === 0) return {};
  if (!as && (groups.length > 0 || uid || Object.keys(extra).length > 0)) {
    throw invalid(where, 'as-groups, as-uid and as-user-extra need as (the user to impersonate)');
  }
  return {
    impersonate: {
      ...(as ? { user: as } : {}),
      ...(uid ? { uid } : {}),
      groups: groups as string[],
      extra: extra as Record<string, string[]>,
    },
  };
}

/** Upstream rest.InClusterConfig: the pod's service account and the kubernetes Service's address. */
function inClusterConfig(dir: string, env: Readonly<Record<string, string | undefined>>): ClientConfig {
  const host = env['KUBERNETES_SERVICE_HOST'];
  const port = env['KUBERNETES_SERVICE_PORT'];
  if (!host || !port) {
    throw invalid(
      'in-cluster configuration',
      'KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined (or give --kubeconfig or --master)',
    );
  }
  const tokenFile = join(dir, 'token');
  const caFile = join(dir, 'ca.crt');
  for (const f of [tokenFile, caFile]) {
    if (!existsSync(f)) throw new ProxyError('KPT_CONFIG_FILE', `in-cluster configuration: ${f} does not exist`);
  }
  return {
    server: `https://${isIPv6(host) ? `[${host}]` : host}:${port}`,
    tls: { ca: readFileSync(caFile, 'utf8'), insecureSkipVerify: false },
    tokenFile,
    source: `in-cluster (service account ${dir})`,
  };
}
