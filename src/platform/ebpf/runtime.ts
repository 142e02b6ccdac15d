// Everything the ebpf mode holds in the kernel for one node: the loaded
// programs, the pinned maps (a MapStore for the planner's writes and the
// tracer), the tc attachments on every interface and, optionally, the cgroup
// socket hooks. Both IP families share one runtime; each family's datapath writes
// only its own keys.
import type { Drift } from '../../core/types.js';
import type { MapName } from '../../dataplane/ebpf/layout.js';
import * as L from '../../dataplane/ebpf/layout.js';
import type { MapOp, MapStore } from '../../dataplane/ebpf/store.js';
import type { PutOp } from '../../core/objects.js';
import { BugError } from '../../core/errors.js';
import { type AttachMode, type Programs, type ReconcileResult, TcAttacher } from './attach.js';
import { attachCgroup } from './cgroup.js';
import { listIfaces, openIfaceSource, type Iface } from './ifaces.js';
import { BpfError, closeFd, libbpf } from './libbpf.js';
import { mapInfo } from './map.js';
import { injectedFault } from '../faults.js';
import { loadObject, type LoadedObject, type MapAdoption } from './object.js';
import { ensureBpffs, PinDir } from './pins.js';
import { HotFilter, trustSeen } from './hotfilter.js';
import { XdpAttacher, type XdpMode, type XdpReconcileResult } from './xdpattach.js';

export interface RuntimeOptions {
  /** Pin root on a bpf filesystem; null keeps everything private to this process (tests). */
  readonly pinRoot: string | null;
  /** 'auto': tcx where the kernel has it, else cls_bpf. */
  readonly attachMode?: AttachMode | 'auto';
  readonly maglevM?: number;
  readonly ctEntries?: number;
  /** Attach the socket-level programs to this cgroup v2 directory. */
  readonly socketLBCgroup?: string | null;
  readonly objectPath?: string;
  /** The XDP program on the uplinks (attachXdp); 'off' does not even load it. Default 'auto'. */
  readonly xdp?: XdpMode;
}

export interface RuntimeOpenReport {
  /** The bpf filesystem was mounted by us (pins live as long as this mount namespace). */
  readonly mountedBpffs: boolean;
  readonly adoption: readonly MapAdoption[];
}

const EINVAL = 22;
const ENOENT = 2;
const EOPNOTSUPP = 95;
const ENOTSUPP = 524;

export class EbpfRuntime implements MapStore {
  private attacher: TcAttacher | null = null;
  private xdpAttacher: XdpAttacher | null = null;
  private readonly mapIds = new Map<MapName, number>();
  /** kpt_hot, kept in step with kpt_addrs and kpt_svc_cidrs (hotfilter.ts). */
  private readonly hot: HotFilter;

  private constructor(
    readonly pins: PinDir | null,
    readonly obj: LoadedObject,
    private readonly wantAttach: AttachMode | 'auto',
    readonly report: RuntimeOpenReport,
    readonly xdpMode: XdpMode = 'auto',
  ) {
    this.hot = new HotFilter({ hot: obj.map('hot'), addrs: obj.map('addrs'), svcCidrs: obj.map('svcCidrs') });
    // A connection map of our own (not adopted) only ever gets entries from our programs, which mark
    // kpt_seen before they add one: the first check can trust kpt_seen from the start.
    if (!report.adoption.some((a) => a.map === 'ct' && a.outcome === 'adopted')) this.trustSeen();
  }

  /**
   * Let the first check trust kpt_seen once every connection entry is marked
   * (after an upgrade over pinned maps, the entries of the older programs are
   * marked by their next packet). Returns whether it does.
   */
  trustSeen(): boolean {
    return trustSeen(this.obj.map('seen'), this.obj.map('ct'));
  }

  static async open(opts: RuntimeOptions): Promise<EbpfRuntime> {
    await openIfaceSource();
    let mounted = false;
    let pins: PinDir | null = null;
    if (opts.pinRoot !== null) {
      mounted = ensureBpffs(opts.pinRoot);
      pins = new PinDir(opts.pinRoot);
      pins.ensure();
    }
    const obj = loadObject({
      pins,
      socketLB: !!opts.socketLBCgroup,
      xdp: opts.xdp !== 'off',
      ...(opts.objectPath ? { objectPath: opts.objectPath } : {}),
      ...(opts.maglevM ? { maglevM: opts.maglevM } : {}),
      ...(opts.ctEntries ? { ctEntries: opts.ctEntries } : {}),
    });
    const rt = new EbpfRuntime(
      pins,
      obj,
      opts.attachMode ?? 'auto',
      { mountedBpffs: mounted, adoption: obj.adoption },
      opts.xdp ?? 'auto',
    );
    if (opts.socketLBCgroup && pins) attachCgroup(pins, opts.socketLBCgroup, (p) => obj.program(p));
    return rt;
  }

  get attachMode(): AttachMode | null {
    return this.attacher?.attachMode ?? null;
  }

  /** Attach to every current interface (new ones included); forget vanished ones. */
  attachInterfaces(ifaces: readonly Iface[] = listIfaces()): ReconcileResult {
    if (!this.pins) throw new BpfError('attach', EINVAL, 'attaching needs a pin root');
    const progs = this.programs();
    if (!this.attacher) {
      const first: AttachMode = this.wantAttach === 'tc' ? 'tc' : 'tcx';
      this.attacher = new TcAttacher(this.pins, first);
      if (this.wantAttach === 'auto') {
        try {
          return this.attacher.reconcile(ifaces, progs);
        } catch (err) {
          const e = err instanceof BpfError ? err.errno : 0;
          if (e !== EINVAL && e !== EOPNOTSUPP && e !== ENOTSUPP) throw err;
          this.attacher = new TcAttacher(this.pins, 'tc'); // the kernel predates tcx
        }
      }
    }
    return this.attacher.reconcile(ifaces, progs);
  }

  /**
   * Run the XDP program on exactly these uplinks (xdpattach.ts); with
   * --ebpf-xdp=off, take it off wherever an earlier proxy put it.
   */
  attachXdp(uplinks: readonly Iface[]): XdpReconcileResult {
    if (!this.pins) throw new BpfError('attach', EINVAL, 'attaching needs a pin root');
    if (this.xdpMode === 'off')
      return { attached: [], updated: [], removed: XdpAttacher.detachAll(this.pins), foreign: [] };
    this.xdpAttacher ??= new XdpAttacher(this.pins, this.xdpMode);
    return this.xdpAttacher.reconcile(uplinks, this.obj.program('kpt_xdp'));
  }

  /**
   * How the kernel differs from what this runtime set up, checked without
   * changing anything: a map no longer pinned at its path (unlinked, or
   * another map there), or a program no longer attached to one of `ifaces`.
   * null when nothing does. The maps themselves live on while our programs
   * and fds hold them, so an unpinned map loses no entry; what is lost is the
   * next proxy's (and the tools') way to find it. About 2 syscalls per map
   * and per hook.
   */
  drift(ifaces: readonly Iface[]): Drift | null {
    if (!this.pins) return null;
    for (const name of L.MAP_NAMES) {
      const path = this.pins.map(L.MAPS[name].name);
      const fd = libbpf().bpf_obj_get(path);
      if (fd < 0) return { reason: 'map_unpinned', detail: `${path} is gone` };
      try {
        if (mapInfo(fd).id !== this.mapId(name)) return { reason: 'map_unpinned', detail: `${path} holds another map` };
      } finally {
        closeFd(fd);
      }
    }
    const detached = this.attacher?.check(ifaces, this.programs()) ?? null;
    return detached === null ? null : { reason: 'program_detached', detail: detached };
  }

  /**
   * Pin again every map whose pin is gone or replaced (the repair of
   * drift()'s map_unpinned); returns the names pinned.
   */
  repairPins(): string[] {
    if (!this.pins) return [];
    const out: string[] = [];
    for (const name of L.MAP_NAMES) {
      const path = this.pins.map(L.MAPS[name].name);
      const fd = libbpf().bpf_obj_get(path);
      if (fd >= 0) {
        let ours: boolean;
        try {
          ours = mapInfo(fd).id === this.mapId(name);
        } finally {
          closeFd(fd);
        }
        if (ours) continue;
        this.pins.unpin(path);
      }
      this.pins.ensure();
      const rc = libbpf().bpf_obj_pin(this.obj.map(name).fd, path);
      if (rc < 0) throw new BpfError(`pin ${L.MAPS[name].name}`, -rc);
      out.push(name);
    }
    return out;
  }

  private mapId(name: MapName): number {
    let id = this.mapIds.get(name);
    if (id === undefined) {
      id = mapInfo(this.obj.map(name).fd).id;
      this.mapIds.set(name, id);
    }
    return id;
  }

  private programs(): Programs {
    return { ingress: this.obj.program('kpt_ingress'), egress: this.obj.program('kpt_egress') };
  }

  lookup(map: MapName, key: Uint8Array): Uint8Array | null {
    return this.obj.map(map).lookup(key);
  }

  dump(map: MapName): Array<[Uint8Array, Uint8Array]> {
    return this.obj.map(map).dump();
  }

  /** Apply ops in order; runs of updates to one map go in one batch. */
  apply(ops: readonly MapOp[]): void {
    if (ops.length > 0 && injectedFault('bpf-maps')) throw new BpfError('map write (injected fault)', 5);
    const filtered = this.hot.before(ops);
    try {
      this.write(ops);
    } catch (err) {
      if (filtered) this.hot.rebuild(); // which of the writes happened is unknown: count what the maps hold
      throw err;
    }
    if (filtered) this.hot.after(ops);
  }

  private write(ops: readonly MapOp[]): void {
    let i = 0;
    while (i < ops.length) {
      const op = ops[i]!;
      if (op.op === 'delete') {
        // Strict, as the Fake: deleting what is not there means our memory of the maps is wrong.
        if (!this.obj.map(op.map).delete(op.key)) throw new BpfError(`delete ${L.MAPS[op.map].name}`, ENOENT);
        i++;
        continue;
      }
      let j = i;
      const run: Array<[Uint8Array, Uint8Array]> = [];
      while (j < ops.length && ops[j]!.op === 'update' && ops[j]!.map === op.map) {
        run.push([ops[j]!.key, ops[j]!.value!]);
        j++;
      }
      this.obj.map(op.map).updateMany(run);
      i = j;
    }
  }

  /**
   * A plan of puts only (a cold start's), in the order they must be written
   * (a map's entries together, maps in the driver's order). Each map's run
   * is packed straight from the reconciler's keys (one byte per character)
   * and values into one buffer pair and written with one
   * BPF_MAP_UPDATE_BATCH, without a MapOp per entry: what apply() writes for
   * the same updates. Throws on the first failure, as apply() does.
   */
  writePuts(puts: readonly PutOp<MapName, string>[]): void {
    if (puts.length > 0 && injectedFault('bpf-maps')) throw new BpfError('map write (injected fault)', 5);
    const filtered = this.hot.before(
      puts
        .filter((p) => p.kind === 'addrs' || p.kind === 'svcCidrs')
        .map((p) => ({ map: p.kind, op: 'update', key: Buffer.from(p.key, 'latin1') })),
    );
    try {
      this.writePacked(puts);
    } catch (err) {
      if (filtered) this.hot.rebuild();
      throw err;
    }
  }

  private writePacked(puts: readonly PutOp<MapName, string>[]): void {
    let i = 0;
    while (i < puts.length) {
      const kind = puts[i]!.kind;
      let j = i;
      while (j < puts.length && puts[j]!.kind === kind) j++;
      const m = this.obj.map(kind);
      const keyText = new Array<string>(j - i);
      const valueText = new Array<string>(j - i);
      for (let n = 0; i + n < j; n++) {
        const op = puts[i + n]!;
        if (op.key.length !== m.keySize || op.value.length > m.valueSize)
          throw new BugError(`${L.MAPS[kind].name}: entry of ${op.key.length}/${op.value.length} bytes`);
        keyText[n] = op.key;
        // A value shorter than the map's (a prefix of its struct) is written zero-filled, as update() does.
        valueText[n] = op.value.length === m.valueSize ? op.value : op.value.padEnd(m.valueSize, '\0');
      }
      // One conversion of all the keys, and of all the values: a write() per entry costs several times more
      // on a first sync.
      m.updatePacked(Buffer.from(keyText.join(''), 'latin1'), Buffer.from(valueText.join(''), 'latin1'), j - i);
      i = j;
    }
  }

  /** Per-CPU counters summed (kpt_stats). */
  stats(): bigint[] {
    const m = this.obj.map('stats');
    const out: bigint[] = [];
    for (let i = 0; i < L.STAT_MAX; i++) out.push(m.lookupPercpuSum(i));
    return out;
  }

  /** Close our file descriptors; pinned state stays in the kernel. */
  close(): void {
    this.obj.close();
  }

  static mapSpec(name: MapName) {
    return L.MAPS[name];
  }
}
