// The manifests in deploy/manifests/, loaded as plain objects, plus what the
// kubelet would make of the DaemonSet's container: its argv with $(VAR)
// references expanded and its environment (fieldRef spec.nodeName and
// configMapKeyRef resolved), so tests run the proxy exactly as a pod would.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { Manifest } from './schema.js';

/** deploy/manifests, from test/deploy or dist/test/deploy. */
export const MANIFEST_DIR = fileURLToPath(
  new URL(
    import.meta.url.includes('/dist/') ? '../../../deploy/manifests/' : '../../deploy/manifests/',
    import.meta.url,
  ),
);
/** deploy/ itself (the wrapper script, the Dockerfile). */
export const DEPLOY_DIR = join(MANIFEST_DIR, '..');

export interface LoadedManifest {
  readonly file: string;
  readonly object: Manifest;
}

/** Every document of every *.yaml file, in file order (the order `kubectl apply -f dir` uses). */
export function loadManifests(dir = MANIFEST_DIR): LoadedManifest[] {
  const out: LoadedManifest[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()) {
    for (const doc of parseAllDocuments(readFileSync(`${dir}${file}`, 'utf8'))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
      const object = doc.toJS() as Manifest | null;
      if (object) out.push({ file, object });
    }
  }
  return out;
}

/** The one manifest of a kind (throws if there is not exactly one). */
export function only<T = Record<string, unknown>>(all: readonly LoadedManifest[], kind: string): T & Manifest {
  const found = all.filter((m) => m.object.kind === kind);
  if (found.length !== 1) throw new Error(`want one ${kind}, have ${found.length}`);
  return found[0]!.object as T & Manifest;
}

type EnvVar = {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string }; configMapKeyRef?: { name: string; key: string; optional?: boolean } };
};
export type Container = {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  securityContext?: { privileged?: boolean };
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
};
export type PodSpec = {
  containers: Container[];
  initContainers?: Container[];
  hostNetwork?: boolean;
  priorityClassName?: string;
  serviceAccountName?: string;
  tolerations?: Array<Record<string, unknown>>;
  nodeSelector?: Record<string, string>;
  volumes?: Array<{
    name: string;
    configMap?: { name: string; items?: Array<{ key: string; path: string }> };
    hostPath?: { path: string; type?: string };
  }>;
};
export type DaemonSet = Manifest & {
  spec: {
    selector: { matchLabels: Record<string, string> };
    updateStrategy?: { type?: string };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
};
export type ConfigMap = Manifest & { data: Record<string, string> };

export interface PodWorld {
  readonly nodeName: string;
  /** ConfigMaps by name (data only). */
  readonly configMaps: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /** What the kubelet injects for the `kubernetes` Service (overridden by the container's own env). */
  readonly serviceEnv?: Readonly<Record<string, string>>;
}

/** The container's environment as the kubelet builds it. */
export function containerEnv(c: Container, world: PodWorld): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.fieldRef) {
      if (e.valueFrom.fieldRef.fieldPath !== 'spec.nodeName')
        throw new Error(`fieldRef ${e.valueFrom.fieldRef.fieldPath} not emulated`);
      env[e.name] = world.nodeName;
    } else if (e.valueFrom?.configMapKeyRef) {
      const ref = e.valueFrom.configMapKeyRef;
      const v = world.configMaps[ref.name]?.[ref.key];
      if (v !== undefined) env[e.name] = v;
      else if (!ref.optional) throw new Error(`configMapKeyRef ${ref.name}/${ref.key} missing and not optional`);
    }
  }
  // Service links fill in what the container did not set itself.
  for (const [k, v] of Object.entries(world.serviceEnv ?? {})) if (!(k in env)) env[k] = v;
  return env;
}

/** command + args with $(VAR) expanded from env; $$ escapes, unknown refs stay literal (kubelet rules). */
export function containerArgv(c: Container, env: Readonly<Record<string, string>>): string[] {
  return [...(c.command ?? []), ...(c.args ?? [])].map((a) =>
    a.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m: string, name?: string) =>
      m === '$$' ? '$' : (env[name!] ?? m),
    ),
  );
}

/**
 * The file at `path` as the container sees it, when path lies in a ConfigMap
 * volume mount (undefined otherwise): items select and rename keys.
 */
export function mountedConfigMapFile(spec: PodSpec, c: Container, world: PodWorld, path: string): string | undefined {
  for (const m of c.volumeMounts ?? []) {
    const prefix = m.mountPath.endsWith('/') ? m.mountPath : `${m.mountPath}/`;
    if (!path.startsWith(prefix)) continue;
    const vol = spec.volumes?.find((v) => v.name === m.name);
    if (!vol?.configMap) return undefined;
    const data = world.configMaps[vol.configMap.name] ?? {};
    const rel = path.slice(prefix.length);
    const key = vol.configMap.items ? vol.configMap.items.find((i) => i.path === rel)?.key : rel;
    return key === undefined ? undefined : data[key];
  }
  return undefined;
}
