// Runs kube-proxy-ts the way the DaemonSet's pod runs it, inside a network
// namespace made for the test:
//
// * argv and environment come from deploy/manifests (the kubelet's $(VAR)
//   expansion, fieldRef and configMapKeyRef resolution: manifests.ts);
// * the service-account dir is a temp dir bind-mounted read-only at
//   /var/run/secrets/kubernetes.io/serviceaccount in a private mount namespace
//   (over a private tmpfs /run, so nothing appears on the host), exactly the
//   path the proxy's in-cluster loader reads;
// * the ConfigMap volume is a temp dir holding its items; paths under its
//   mountPath in argv are rewritten to that dir (the one liberty taken: the
//   host has no /var/lib/kube-proxy-ts to mount over);
// * `kube-proxy` (command[0]) is the image's alias: from dist/ a symlink named
//   kube-proxy to bin/kube-proxy-ts, as deploy/Dockerfile makes; from source
//   the TypeScript entry point under tsx.

import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nsSpawn, repoScript, REPO_ROOT, type NsProcess } from '../netns/spawn.js';
import { containerArgv, containerEnv, type Container, type PodSpec, type PodWorld } from './manifests.js';

export const SERVICE_ACCOUNT_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';

/** Mount the SA dir ($1) where a pod has it, then exec the rest. /var/run is /run on Debian. */
const MOUNT_SA = [
  'set -e',
  'mount -t tmpfs -o mode=0755 kpt-dep-run /run',
  `mkdir -p ${SERVICE_ACCOUNT_PATH}`,
  `mount --bind "$1" ${SERVICE_ACCOUNT_PATH}`,
  `mount -o remount,bind,ro ${SERVICE_ACCOUNT_PATH}`,
  'shift',
  'exec "$@"',
].join('\n');

/** argv that runs `kube-proxy` (the alias) from this checkout. */
export function kubeProxyAlias(tmp: string): string[] {
  if (import.meta.url.includes('/dist/')) {
    const alias = join(tmp, 'kube-proxy');
    symlinkSync(join(REPO_ROOT, 'bin', 'kube-proxy-ts'), alias);
    return [process.execPath, alias];
  }
  return repoScript('src/cmd/main.ts');
}

export interface PodOptions {
  readonly ns: string;
  readonly spec: PodSpec;
  readonly container: Container;
  readonly world: PodWorld;
  /** The service-account dir (token, ca.crt, namespace). */
  readonly saDir: string;
}

export interface Pod {
  readonly proc: NsProcess;
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  dispose(): void;
}

/** Start the container's process. The caller waits for readiness and stops it. */
export function startPod(o: PodOptions): Pod {
  const tmp = mkdtempSync(join(tmpdir(), 'kpt-dep-pod-'));
  const env = containerEnv(o.container, o.world);
  let argv = containerArgv(o.container, env);
  for (const m of o.container.volumeMounts ?? []) {
    const vol = o.spec.volumes?.find((v) => v.name === m.name);
    if (!vol?.configMap) continue;
    const dir = join(tmp, m.name);
    mkdirSync(dir);
    const data = o.world.configMaps[vol.configMap.name] ?? {};
    const items = vol.configMap.items ?? Object.keys(data).map((k) => ({ key: k, path: k }));
    for (const it of items) if (data[it.key] !== undefined) writeFileSync(join(dir, it.path), data[it.key]!);
    argv = argv.map((a) => a.split(`${m.mountPath}/`).join(`${dir}/`));
  }
  const command = argv[0]!.endsWith('/kube-proxy') ? kubeProxyAlias(tmp) : [argv[0]!];
  const full = [
    'unshare',
    '--mount',
    '--propagation',
    'private',
    'sh',
    '-c',
    MOUNT_SA,
    'sh',
    o.saDir,
    ...command,
    ...argv.slice(1),
  ];
  const proc = nsSpawn(o.ns, full, { env });
  return { proc, argv, env, dispose: () => rmSync(tmp, { recursive: true, force: true }) };
}
