// Exec credential plugins (client-go plugin/pkg/client/auth/exec): run the
// kubeconfig's command, hand it an ExecCredential in KUBERNETES_EXEC_INFO, and
// read an ExecCredential with a token or a client certificate from its stdout.
// Its stderr goes to ours, as in kubectl, so its messages reach the operator.
//
// Contract: resolves to the credential or rejects with a ProxyError
// KPT_EXEC_FAILED whose message says what to fix (the install hint when the
// command is missing, the exit code and the plugin's last words, or what the
// returned ExecCredential lacks). Never interactive: a node proxy has no
// terminal, so the plugin gets no stdin and `interactive: false`.

import { spawn } from 'node:child_process';
import { ProxyError } from '../../core/errors.js';
import type { ExecConfig } from './kubeconfig.js';

export interface ExecCredential {
  readonly token?: string;
  readonly cert?: string;
  readonly key?: string;
  /** Epoch ms after which the credential must be fetched again; undefined = until refused. */
  readonly expiresAt?: number;
}

/** The cluster as the plugin sees it with provideClusterInfo (ExecCredentialSpec.cluster). */
export interface ExecClusterInfo {
  readonly server: string;
  readonly ca?: string;
  readonly insecureSkipVerify: boolean;
  readonly serverName?: string;
}

/** Longer than any sane plugin; a hung one must not stall the proxy for ever. */
const PLUGIN_TIMEOUT_MS = 60_000;
const MAX_OUTPUT = 1024 * 1024;

function failed(msg: string): ProxyError {
  return new ProxyError('KPT_EXEC_FAILED', `exec credential plugin: ${msg}`);
}

export function execInfo(cfg: ExecConfig, cluster: ExecClusterInfo): string {
  const spec: Record<string, unknown> = { interactive: false };
  if (cfg.provideClusterInfo) {
    spec['cluster'] = {
      server: cluster.server,
      ...(cluster.serverName ? { 'tls-server-name': cluster.serverName } : {}),
      ...(cluster.insecureSkipVerify ? { 'insecure-skip-tls-verify': true } : {}),
      ...(cluster.ca ? { 'certificate-authority-data': Buffer.from(cluster.ca).toString('base64') } : {}),
      ...(cfg.clusterExtension !== undefined ? { config: cfg.clusterExtension } : {}),
    };
  }
  return JSON.stringify({ kind: 'ExecCredential', apiVersion: cfg.apiVersion, spec });
}

export function runExecPlugin(cfg: ExecConfig, cluster: ExecClusterInfo): Promise<ExecCredential> {
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const e of cfg.env) env[e.name] = e.value;
    env['KUBERNETES_EXEC_INFO'] = execInfo(cfg, cluster);
    const child = spawn(cfg.command, [...cfg.args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let size = 0;
    let errTail = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), PLUGIN_TIMEOUT_MS);
    child.stdout.on('data', (b: Buffer) => {
      size += b.length;
      if (size <= MAX_OUTPUT) out.push(b);
    });
    child.stderr.on('data', (b: Buffer) => {
      process.stderr.write(b);
      errTail = (errTail + b.toString('utf8')).slice(-500);
    });
    child.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      const hint = cfg.installHint ? `\n${cfg.installHint}` : '';
      reject(
        err.code === 'ENOENT'
          ? failed(`executable ${cfg.command} not found${hint}`)
          : failed(`${cfg.command}: ${err.message}`),
      );
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) {
        const why = signal ? `was killed by ${signal}` : `exited with status ${code}`;
        return reject(failed(`${cfg.command} ${why}${errTail ? `: ${errTail.trim()}` : ''}`));
      }
      try {
        resolve(parseExecCredential(Buffer.concat(out).toString('utf8'), cfg.apiVersion));
      } catch (err) {
        reject(err);
      }
    });
  });
}

/** Validate a plugin's stdout as client-go does; exported for tests. */
export function parseExecCredential(text: string, apiVersion: string): ExecCredential {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw failed('output is not a JSON ExecCredential');
  }
  const d = (doc ?? {}) as Record<string, unknown>;
  if (d['kind'] !== 'ExecCredential') throw failed(`output has kind ${JSON.stringify(d['kind'])}, want ExecCredential`);
  if (d['apiVersion'] !== apiVersion) {
    throw failed(`configured for ${apiVersion}, but the plugin returned ${JSON.stringify(d['apiVersion'])}`);
  }
  const s = d['status'];
  if (s === null || typeof s !== 'object') throw failed("the plugin didn't return a status field");
  const st = s as Record<string, unknown>;
  const token = typeof st['token'] === 'string' && st['token'] !== '' ? st['token'] : undefined;
  const cert =
    typeof st['clientCertificateData'] === 'string' && st['clientCertificateData']
      ? st['clientCertificateData']
      : undefined;
  const key = typeof st['clientKeyData'] === 'string' && st['clientKeyData'] ? st['clientKeyData'] : undefined;
  if (Boolean(cert) !== Boolean(key)) throw failed('the plugin returned only a certificate or only a key');
  if (!token && !cert) throw failed("the plugin didn't return a token or a certificate and key");
  let expiresAt: number | undefined;
  if (st['expirationTimestamp'] !== undefined && st['expirationTimestamp'] !== null) {
    expiresAt = Date.parse(String(st['expirationTimestamp']));
    if (!Number.isFinite(expiresAt))
      throw failed(`bad expirationTimestamp ${JSON.stringify(st['expirationTimestamp'])}`);
  }
  return {
    ...(token ? { token } : {}),
    ...(cert && key ? { cert, key } : {}),
    ...(expiresAt !== undefined ? { expiresAt } : {}),
  };
}
