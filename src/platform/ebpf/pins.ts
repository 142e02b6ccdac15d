// Where the proxy keeps what must outlive it: pinned maps and links in a
// bpf filesystem. The layout, under the pin root (default
// /sys/fs/bpf/kube-proxy-ts):
//
//   v<ABI>/maps/kpt_*       the maps, adopted by the next proxy with the same ABI
//   links/tcx-<ifindex>-<ingress|egress>     tc programs attached with tcx
//   links/cgroup-<hook>     socket-level programs (--ebpf-socket-lb-cgroup)
//   links/xdp-<ifindex>     the XDP program on an uplink (--ebpf-xdp)
//
// Programs are not pinned: the links hold them, and a new proxy loads its
// own and swaps them into the existing links atomically.
import { existsSync, mkdirSync, readdirSync, rmSync, unlinkSync } from 'node:fs';
import { dirname } from 'node:path';
import koffi from 'koffi';
import { ABI_VERSION } from '../../dataplane/ebpf/layout.js';
import { DEFAULT_EBPF_OPTIONS } from '../../dataplane/ebpf/options.js';
import { BpfError, closeFd, libbpf, libbpfAvailable } from './libbpf.js';

export const DEFAULT_PIN_ROOT = DEFAULT_EBPF_OPTIONS.pinRoot;
const BPF_FS_MAGIC = 0xcafe4a11;

interface FsLibc {
  statfs(path: string, buf: Buffer): number;
  mount(src: string, target: string, type: string, flags: number, data: null): number;
}
let fsLibc: FsLibc | null = null;
function fsCalls(): FsLibc {
  if (fsLibc) return fsLibc;
  const l = koffi.load('libc.so.6');
  fsLibc = {
    statfs: l.func('int statfs(const char *path, void *buf)'),
    mount: l.func('int mount(const char *src, const char *target, const char *type, unsigned long flags, void *data)'),
  } as unknown as FsLibc;
  return fsLibc;
}

/** True when path is on a bpf filesystem. */
export function isBpffs(path: string): boolean {
  const buf = Buffer.alloc(128);
  if (fsCalls().statfs(path, buf) !== 0) return false;
  return Number(buf.readBigInt64LE(0) & 0xffffffffn) === BPF_FS_MAGIC;
}

/**
 * Make sure the pin root sits on a bpf filesystem. When the nearest
 * existing ancestor is not one and is /sys/fs/bpf (the conventional mount
 * point), mount one there; returns true when it mounted. Pins then live as
 * long as this mount namespace, which the caller should say in a warning.
 */
export function ensureBpffs(root: string): boolean {
  let dir = root;
  while (!existsSync(dir)) dir = dirname(dir);
  if (isBpffs(dir)) return false;
  if (dir !== '/sys/fs/bpf')
    throw new BpfError(`pin root ${root}`, 22, `${dir} is not on a bpf filesystem (mount -t bpf bpf ${dir})`);
  if (fsCalls().mount('bpf', dir, 'bpf', 0, null) !== 0)
    throw new BpfError(`mount bpf on ${dir}`, koffi.errno(), 'mount a bpf filesystem there before starting');
  return true;
}

export class PinDir {
  constructor(readonly root: string = DEFAULT_PIN_ROOT) {}

  get mapsDir(): string {
    return `${this.root}/v${ABI_VERSION}/maps`;
  }
  get linksDir(): string {
    return `${this.root}/links`;
  }
  map(name: string): string {
    return `${this.mapsDir}/${name}`;
  }
  tcxLink(ifindex: number, dir: 'ingress' | 'egress'): string {
    return `${this.linksDir}/tcx-${ifindex}-${dir}`;
  }
  cgroupLink(hook: string): string {
    return `${this.linksDir}/cgroup-${hook}`;
  }
  xdpLink(ifindex: number): string {
    return `${this.linksDir}/xdp-${ifindex}`;
  }

  ensure(): void {
    mkdirSync(this.mapsDir, { recursive: true });
    mkdirSync(this.linksDir, { recursive: true });
  }

  /** Names in the links directory. */
  links(): string[] {
    return existsSync(this.linksDir) ? readdirSync(this.linksDir) : [];
  }

  /** Map pin directories of other ABI versions (left by an older or newer proxy). */
  otherVersions(): string[] {
    if (!existsSync(this.root)) return [];
    return readdirSync(this.root)
      .filter((d) => /^v\d+$/.test(d) && d !== `v${ABI_VERSION}`)
      .map((d) => `${this.root}/${d}`);
  }

  unpin(path: string): void {
    try {
      unlinkSync(path);
    } catch {
      /* already gone */
    }
  }

  /**
   * Take a pinned link off its hook now, then unpin it. Unpinning alone
   * is not enough: the kernel frees the pin's inode after an RCU grace
   * period (lazy RCU can hold that for seconds) and releases the link from
   * a work queue after that, so the program would go on translating
   * packets for a while after --cleanup returned. BPF_LINK_DETACH cuts the
   * attachment at once, whoever still holds the link.
   */
  detachLink(path: string): void {
    if (libbpfAvailable()) {
      const fd = libbpf().bpf_obj_get(path);
      if (fd >= 0) {
        try {
          libbpf().bpf_link_detach(fd); // fails only for a link that is already detached
        } finally {
          closeFd(fd);
        }
      }
    }
    this.unpin(path);
  }

  /** Remove the whole pin root (cleanup): unpinning drops the kernel objects no one else holds. */
  removeAll(): void {
    if (existsSync(this.root)) rmSync(this.root, { recursive: true, force: true });
  }
}
