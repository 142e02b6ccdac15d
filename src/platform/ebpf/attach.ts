// Attaching the tc programs to the node's interfaces, and taking them off.
//
// tcx (kernel 6.6+): one BPF link per interface and direction, placed first
// on the hook and pinned (links/tcx-<ifindex>-<dir>) so it stays attached
// while the proxy restarts; a new proxy swaps its freshly loaded program
// into the existing link (BPF_LINK_UPDATE, atomic). Where the kernel has no
// tcx, the same programs go in as cls_bpf filters (direct action) on a
// clsact qdisc, at our own priority and handle; tc keeps those without pins.
//
// Only Ethernet and loopback interfaces get the programs: they parse an
// Ethernet header. Other tools' programs and filters are never touched:
// cls_bpf filters are removed only at our priority/handle and only when
// their program is one of ours (by name).
import { addressOf, BpfError, closeFd, libbpf, objInfo } from './libbpf.js';
import { ARPHRD_ETHER, ARPHRD_LOOPBACK, type Iface } from './ifaces.js';
import type { PinDir } from './pins.js';

export type AttachMode = 'tcx' | 'tc';
export type Direction = 'ingress' | 'egress';
export const DIRECTIONS: readonly Direction[] = ['ingress', 'egress'];

const BPF_TCX_INGRESS = 46;
const BPF_TCX_EGRESS = 47;
const BPF_F_BEFORE = 1 << 3;
const BPF_LINK_TYPE_TCX = 11;
const BPF_TC_INGRESS = 1;
const BPF_TC_EGRESS = 2;
const BPF_TC_F_REPLACE = 1;
/** cls_bpf position of our filters: first (priority 1), with a handle no one else is likely to pick ("KPTS"). */
export const TC_PRIORITY = 1;
export const TC_HANDLE = 0x4b505453;
const EEXIST = 17;

export interface Programs {
  readonly ingress: number;
  readonly egress: number;
}

export function attachable(i: Iface): boolean {
  return i.type === ARPHRD_ETHER || i.type === ARPHRD_LOOPBACK;
}

interface LinkInfo {
  readonly type: number;
  readonly progId: number;
  readonly ifindex: number;
  readonly attachType: number;
  /** Cgroup links: the cgroup's id. */
  readonly cgroupId: bigint;
}

export function linkInfo(fd: number): LinkInfo {
  const info = objInfo(fd, 64, 'link');
  return {
    type: info.readUInt32LE(0),
    progId: info.readUInt32LE(8),
    ifindex: info.readUInt32LE(16),
    attachType: info.readUInt32LE(20),
    cgroupId: info.readBigUInt64LE(16),
  };
}

export interface ProgInfo {
  readonly id: number;
  readonly name: string;
  readonly tag: string;
}

export function progInfo(fd: number): ProgInfo {
  const info = objInfo(fd, 232, 'program');
  const end = info.indexOf(0, 64);
  return {
    id: info.readUInt32LE(4),
    tag: info.toString('hex', 8, 16),
    name: info.toString('latin1', 64, end < 0 || end > 80 ? 80 : end),
  };
}

/** Name of a loaded program by id ('' when it is gone). */
/** A program's id by its fd, asked of the kernel once per fd (the attachers compare ids on every sync). */
export function cachedProgId(cache: Map<number, number>, fd: number): number {
  let id = cache.get(fd);
  if (id === undefined) {
    id = progInfo(fd).id;
    cache.set(fd, id);
  }
  return id;
}

export function progNameById(id: number): string {
  const fd = libbpf().bpf_prog_get_fd_by_id(id);
  if (fd < 0) return '';
  try {
    return progInfo(fd).name;
  } finally {
    closeFd(fd);
  }
}

function tcHook(ifindex: number, dir: Direction): Buffer {
  const h = Buffer.alloc(24);
  h.writeBigUInt64LE(24n, 0);
  h.writeInt32LE(ifindex, 8);
  h.writeUInt32LE(dir === 'ingress' ? BPF_TC_INGRESS : BPF_TC_EGRESS, 12);
  return h;
}

function tcOpts(progFd: number, flags: number): Buffer {
  const o = Buffer.alloc(32);
  o.writeBigUInt64LE(32n, 0);
  o.writeInt32LE(progFd, 8);
  o.writeUInt32LE(flags, 12);
  o.writeUInt32LE(TC_HANDLE, 20);
  o.writeUInt32LE(TC_PRIORITY, 24);
  return o;
}

export interface ReconcileResult {
  readonly attached: string[];
  readonly updated: string[];
  readonly removed: string[];
}

export class TcAttacher {
  private progIds = new Map<number, number>();

  constructor(
    private readonly pins: PinDir,
    readonly attachMode: AttachMode,
  ) {}

  /**
   * Make every attachable interface run these programs at both hooks, and
   * forget pins of interfaces that are gone. Idempotent; cheap when nothing
   * changed (one pin read per hook).
   */
  reconcile(ifaces: readonly Iface[], progs: Programs): ReconcileResult {
    const res: ReconcileResult = { attached: [], updated: [], removed: [] };
    const live = new Set<number>();
    for (const i of ifaces) {
      if (!attachable(i)) continue;
      live.add(i.index);
      for (const dir of DIRECTIONS) {
        const fd = dir === 'ingress' ? progs.ingress : progs.egress;
        const what = this.attachMode === 'tcx' ? this.tcx(i.index, dir, fd) : this.tc(i.index, dir, fd);
        if (what === 'attached') res.attached.push(`${i.name}/${dir}`);
        if (what === 'updated') res.updated.push(`${i.name}/${dir}`);
      }
    }
    for (const name of this.pins.links()) {
      const m = /^tcx-(\d+)-(ingress|egress)$/.exec(name);
      if (!m || live.has(Number(m[1]))) continue;
      this.pins.unpin(`${this.pins.linksDir}/${name}`); // the interface is gone; so is the attachment
      res.removed.push(name);
    }
    return res;
  }

  private progId(fd: number): number {
    return cachedProgId(this.progIds, fd);
  }

  private tcx(ifindex: number, dir: Direction, progFd: number): 'attached' | 'updated' | 'kept' {
    const lib = libbpf();
    const path = this.pins.tcxLink(ifindex, dir);
    const pinned = lib.bpf_obj_get(path);
    if (pinned >= 0) {
      try {
        const li = linkInfo(pinned);
        if (li.type === BPF_LINK_TYPE_TCX && li.ifindex === ifindex) {
          if (li.progId === this.progId(progFd)) return 'kept';
          const rc = lib.bpf_link_update(pinned, progFd, null);
          if (rc < 0) throw new BpfError(`update tcx link on ifindex ${ifindex} ${dir}`, -rc);
          return 'updated';
        }
      } finally {
        closeFd(pinned);
      }
      this.pins.detachLink(path); // a link of an interface that was replaced
    }
    const opts = Buffer.alloc(16);
    opts.writeBigUInt64LE(16n, 0);
    opts.writeUInt32LE(BPF_F_BEFORE, 8);
    const type = dir === 'ingress' ? BPF_TCX_INGRESS : BPF_TCX_EGRESS;
    const link = lib.bpf_link_create(progFd, ifindex, type, opts);
    if (link < 0) throw new BpfError(`attach tcx ${dir} to ifindex ${ifindex}`, -link);
    try {
      const rc = lib.bpf_obj_pin(link, path);
      if (rc < 0) throw new BpfError(`pin ${path}`, -rc);
    } finally {
      closeFd(link);
    }
    return 'attached';
  }

  private tc(ifindex: number, dir: Direction, progFd: number): 'attached' | 'updated' | 'kept' {
    const lib = libbpf();
    const hook = tcHook(ifindex, dir);
    const rcHook = lib.bpf_tc_hook_create(hook);
    if (rcHook < 0 && -rcHook !== EEXIST) throw new BpfError(`clsact qdisc on ifindex ${ifindex}`, -rcHook);
    const q = tcOpts(0, 0);
    const had = lib.bpf_tc_query(hook, q) === 0;
    if (had && q.readUInt32LE(16) === this.progId(progFd)) return 'kept';
    const rc = lib.bpf_tc_attach(hook, tcOpts(progFd, BPF_TC_F_REPLACE));
    if (rc < 0) throw new BpfError(`attach cls_bpf ${dir} to ifindex ${ifindex}`, -rc);
    return had ? 'updated' : 'attached';
  }

  /**
   * The first hook of an attachable interface that does not run our program
   * (a tcx link unpinned or detached, a cls_bpf filter deleted, another
   * program in its place), as a sentence; null when every one does. Changes
   * nothing: reconcile() repairs. Costs a pin read (tcx) or a filter query
   * (tc) per hook.
   */
  check(ifaces: readonly Iface[], progs: Programs): string | null {
    for (const i of ifaces) {
      if (!attachable(i)) continue;
      for (const dir of DIRECTIONS) {
        const want = this.progId(dir === 'ingress' ? progs.ingress : progs.egress);
        const have = this.attachMode === 'tcx' ? this.tcxProgram(i.index, dir) : this.tcProgram(i.index, dir);
        if (have !== want)
          return `${this.attachMode} ${i.name}/${dir}: ${have === null ? 'no program of ours' : `program id ${have}`} where ours (id ${want}) was attached`;
      }
    }
    return null;
  }

  /** The program id our pinned tcx link runs on this hook, or null when the link is gone or detached. */
  private tcxProgram(ifindex: number, dir: Direction): number | null {
    const pinned = libbpf().bpf_obj_get(this.pins.tcxLink(ifindex, dir));
    if (pinned < 0) return null;
    try {
      const li = linkInfo(pinned);
      return li.type === BPF_LINK_TYPE_TCX && li.ifindex === ifindex ? li.progId : null;
    } finally {
      closeFd(pinned);
    }
  }

  /** The program id of the cls_bpf filter at our priority and handle, or null. */
  private tcProgram(ifindex: number, dir: Direction): number | null {
    const q = tcOpts(0, 0);
    return libbpf().bpf_tc_query(tcHook(ifindex, dir), q) === 0 ? q.readUInt32LE(16) : null;
  }

  /** Take our programs off: detach and unpin every tcx link; remove our cls_bpf filters from these interfaces. */
  detachAll(ifaces: readonly Iface[]): string[] {
    const removed: string[] = [];
    for (const name of this.pins.links()) {
      if (!name.startsWith('tcx-')) continue;
      this.pins.detachLink(`${this.pins.linksDir}/${name}`);
      removed.push(name);
    }
    for (const i of ifaces)
      for (const dir of DIRECTIONS) if (removeOurTcFilter(i.index, dir)) removed.push(`${i.name}/${dir}`);
    return removed;
  }
}

/** Remove the cls_bpf filter at our priority/handle if its program is ours; true when removed. */
export function removeOurTcFilter(ifindex: number, dir: Direction): boolean {
  const lib = libbpf();
  const hook = tcHook(ifindex, dir);
  const q = tcOpts(0, 0);
  if (lib.bpf_tc_query(hook, q) < 0) return false; // no clsact qdisc, or nothing at our position
  if (!progNameById(q.readUInt32LE(16)).startsWith('kpt_')) return false;
  const d = lib.bpf_tc_detach(hook, tcOpts(0, 0));
  return d === 0;
}

/** Ids of the programs attached with tcx to one hook, in run order (BPF_PROG_QUERY). */
export function tcxProgramIds(ifindex: number, dir: Direction): number[] {
  const ids = Buffer.alloc(4 * 64);
  const o = Buffer.alloc(40);
  o.writeBigUInt64LE(40n, 0);
  o.writeBigUInt64LE(addressOf(ids), 16);
  o.writeUInt32LE(64, 24);
  const rc = libbpf().bpf_prog_query_opts(ifindex, dir === 'ingress' ? BPF_TCX_INGRESS : BPF_TCX_EGRESS, o);
  if (rc < 0) throw new BpfError(`query tcx ${dir} of ifindex ${ifindex}`, -rc);
  const n = o.readUInt32LE(24);
  return Array.from({ length: n }, (_, i) => ids.readUInt32LE(4 * i));
}
