// Which directory the socket-level programs attach to for
// --ebpf-socket-lb-cgroup. The DaemonSet's ebpf patch passes the host's
// /sys/fs/cgroup: on a cgroup v2 host that is the v2 root itself; on a
// hybrid host (v1 controllers there, v2 mounted at its `unified`) the v2
// root is that subdirectory. A host with no cgroup v2 at all cannot run
// socket programs; the caller then leaves every connection to the tc
// programs rather than failing the proxy.
import { statfsSync } from 'node:fs';

/** statfs f_type of a cgroup v2 filesystem (linux/magic.h). */
export const CGROUP2_SUPER_MAGIC = 0x63677270;

/** The filesystem type of path, or null when it cannot be read (absent, no permission). */
export type FsType = (path: string) => number | null;

const fsType: FsType = (path) => {
  try {
    return statfsSync(path).type;
  } catch {
    return null;
  }
};

/** The cgroup v2 directory for `path` (itself, or its `unified` on a hybrid host), or null when neither is one. */
export function cgroup2Dir(path: string, typeOf: FsType = fsType): string | null {
  if (typeOf(path) === CGROUP2_SUPER_MAGIC) return path;
  const unified = `${path.replace(/\/+$/, '')}/unified`;
  if (typeOf(unified) === CGROUP2_SUPER_MAGIC) return unified;
  return null;
}
