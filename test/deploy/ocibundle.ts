// The DaemonSet's pod as an OCI runtime bundle, for running the real image
// (deploy/image/build) with an OCI runtime: the image's rootfs and config
// (unpacked by umoci), then what the kubelet would add for this pod:
//
// * argv and environment from deploy/manifests (manifests.ts rules);
// * hostNetwork: the network namespace is the test's "host" (a netns path);
// * privileged: every capability this process may grant, no masked or
//   read-only paths, no seccomp, no rlimits, /sys read-write;
// * volumes: the ConfigMap's items in a temp dir, hostPaths under the test's
//   "host" dir (the xtables lock is a temp file, not the machine's), and the
//   service account at /var/run/secrets/kubernetes.io/serviceaccount.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { containerArgv, containerEnv, type Container, type PodSpec, type PodWorld } from './manifests.js';
import { SERVICE_ACCOUNT_PATH } from './pod.js';

/** Capability names by bit number (linux/capability.h). */
const CAPS = [
  'CHOWN', 'DAC_OVERRIDE', 'DAC_READ_SEARCH', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID', 'SETPCAP',
  'LINUX_IMMUTABLE', 'NET_BIND_SERVICE', 'NET_BROADCAST', 'NET_ADMIN', 'NET_RAW', 'IPC_LOCK', 'IPC_OWNER',
  'SYS_MODULE', 'SYS_RAWIO', 'SYS_CHROOT', 'SYS_PTRACE', 'SYS_PACCT', 'SYS_ADMIN', 'SYS_BOOT', 'SYS_NICE',
  'SYS_RESOURCE', 'SYS_TIME', 'SYS_TTY_CONFIG', 'MKNOD', 'LEASE', 'AUDIT_WRITE', 'AUDIT_CONTROL', 'SETFCAP',
  'MAC_OVERRIDE', 'MAC_ADMIN', 'SYSLOG', 'WAKE_ALARM', 'BLOCK_SUSPEND', 'AUDIT_READ', 'PERFMON', 'BPF',
  'CHECKPOINT_RESTORE',
]; // prettier-ignore

/** "privileged": every capability in this process's bounding set (a runtime cannot grant more). */
export function privilegedCaps(): string[] {
  const hex = /^CapBnd:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? '0';
  const bnd = BigInt(`0x${hex}`);
  return CAPS.flatMap((name, bit) => ((bnd >> BigInt(bit)) & 1n ? [`CAP_${name}`] : []));
}

export interface BundleOptions {
  /** The bundle dir umoci unpacked (config.json + rootfs/). */
  readonly bundle: string;
  /** The netns the pod's hostNetwork means here. */
  readonly netnsPath: string;
  readonly spec: PodSpec;
  readonly container: Container;
  readonly world: PodWorld;
  readonly saDir: string;
  /** Where ConfigMap items and the stand-ins for hostPath volumes are written. */
  readonly hostDir: string;
  /** cgroupsPath for the runtime (a name of this run's own). */
  readonly cgroupsPath: string;
}

type Mount = { destination: string; type: string; source: string; options: string[] };
type OciConfig = {
  process: {
    terminal: boolean;
    args: string[];
    env: string[];
    capabilities?: Record<string, string[]>;
    rlimits?: unknown;
    noNewPrivileges?: boolean;
  };
  mounts: Mount[];
  hostname?: string;
  linux: Record<string, unknown> & { namespaces: Array<{ type: string; path?: string }> };
};

const bind = (source: string, destination: string, ro: boolean): Mount => ({
  destination,
  type: 'bind',
  source,
  options: ['rbind', ro ? 'ro' : 'rw'],
});

/** Rewrite bundle/config.json for the pod; returns the argv and env the container runs with. */
export function writePodBundle(o: BundleOptions): { argv: string[]; env: Record<string, string> } {
  const path = join(o.bundle, 'config.json');
  const config = JSON.parse(readFileSync(path, 'utf8')) as OciConfig;
  const env = containerEnv(o.container, o.world);
  const argv = containerArgv(o.container, env);
  const imageEnv = config.process.env.filter((e) => !(e.split('=')[0]! in env));
  config.process = {
    ...config.process,
    terminal: false,
    args: argv,
    env: [...imageEnv, ...Object.entries(env).map(([k, v]) => `${k}=${v}`)],
    noNewPrivileges: false,
  };
  delete config.process.rlimits;
  if (o.container.securityContext?.privileged) {
    const caps = privilegedCaps();
    config.process.capabilities = {
      bounding: caps,
      effective: caps,
      permitted: caps,
      inheritable: caps,
      ambient: caps,
    };
    delete config.linux['maskedPaths'];
    delete config.linux['readonlyPaths'];
    delete config.linux['seccomp'];
    for (const m of config.mounts) if (m.destination === '/sys') m.options = m.options.filter((x) => x !== 'ro');
  }
  config.linux['resources'] = {};
  config.linux['cgroupsPath'] = o.cgroupsPath;
  config.linux.namespaces = config.linux.namespaces
    .filter((n) => n.type !== 'user')
    .map((n) => (n.type === 'network' && o.spec.hostNetwork ? { type: 'network', path: o.netnsPath } : n));
  if (o.spec.hostNetwork) delete config.hostname;

  for (const m of o.container.volumeMounts ?? []) {
    const vol = o.spec.volumes?.find((v) => v.name === m.name);
    if (vol?.configMap) {
      const dir = join(o.hostDir, 'configmaps', m.name);
      mkdirSync(dir, { recursive: true });
      const data = o.world.configMaps[vol.configMap.name] ?? {};
      const items = vol.configMap.items ?? Object.keys(data).map((k) => ({ key: k, path: k }));
      for (const it of items) if (data[it.key] !== undefined) writeFileSync(join(dir, it.path), data[it.key]!);
      config.mounts.push(bind(dir, m.mountPath, true));
    } else if (vol?.hostPath) {
      // The test's host: read-only system paths (/lib/modules) are shared as they are when they exist,
      // anything else is a stand-in under hostDir (never the machine's own xtables lock).
      const shared = m.readOnly && existsSync(vol.hostPath.path);
      const source = shared ? vol.hostPath.path : join(o.hostDir, 'host', vol.hostPath.path);
      if (!shared) {
        mkdirSync(join(source, '..'), { recursive: true });
        if (vol.hostPath.type === 'FileOrCreate') writeFileSync(source, '');
        else mkdirSync(source, { recursive: true });
      }
      config.mounts.push(bind(source, m.mountPath, m.readOnly ?? false));
    }
  }
  config.mounts.push(bind(o.saDir, SERVICE_ACCOUNT_PATH, true));
  writeFileSync(path, JSON.stringify(config, null, 2));
  return { argv, env };
}
