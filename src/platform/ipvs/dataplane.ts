// IpvsDataplane: the IPVS mode for one IP family on a real kernel (upstream
// ipvs Proxier.syncProxyRules minus the pure rendering, src/dataplane/ipvs).
// Each sync:
//   1. once: the sysctls upstream sets (vs/conntrack, expire_nodest_conn,
//      expire_quiescent_template, ip_forward, conn_reuse_mode on kernels that
//      need it, strict ARP when asked) and the IPVS timeouts when any is set;
//   2. full syncs (the first, after a failure, the engine's, and at least
//      every syncPeriod, as upstream's IPVS mode syncs fully every period):
//      make sure kube-ipvs0 exists, read the node's addresses, the IPVS table,
//      the ipsets and kube-ipvs0's addresses back from the kernel;
//      partial syncs use what the last syncs applied;
//   3. render, plan (src/dataplane/ipvs/plan.ts), and apply in the order
//      the kernel needs: ipsets (sets exist before rules match them),
//      addresses, IPVS requests in one netlink batch, iptables-restore (only
//      when its input changed, or on full syncs), jump rules (full syncs),
//      and last the addresses that go;
//   4. real servers that are no longer wanted are drained (graceful.ts); a
//      timer checks the draining ones while there are any.
// Virtual servers are deleted only when ours: in the render of the last
// syncs, on kube-ipvs0, or a NodePort on a node address whose port is in our
// NodePort sets; never inside --ipvs-exclude-cidrs. Any failure forgets
// what was applied, so the next sync is full and repairs from the kernel.
//
// Drift (watchDrift): IPVS has no change notifications, so every second,
// after a successful sync, the table's virtual servers of our family (one
// generic netlink dump) and kube-ipvs0's addresses (one rtnetlink dump) are
// compared with what that sync rendered: a cleared table (`ipvsadm -C`), a
// deleted virtual server, a removed Service address or a deleted kube-ipvs0
// is reported, and the engine's full sync writes them back. Real servers are
// not listed (that takes a dump per virtual server, a thousand at 1k);
// one removed by others waits for the periodic full sync. Our iptables
// chains and jumps are watched as the iptables mode watches its own, through
// nf_tables events on the nf_tables backend (../iptables/driftwatch.ts); on
// the legacy backend they wait for the periodic full sync.
import { ProxyError } from '../../core/errors.js';
import { cidrContains, parseCIDR, parseIP } from '../../core/ip.js';
import type { Dataplane, DataplaneConfig, Drift, IPFamily, SyncOutcome, SyncState } from '../../core/types.js';
import type { Clock, TimerHandle } from '../../core/clock.js';
import { jumpRuleArgs } from '../../dataplane/iptables/jumps.js';
import {
  IPSET,
  IPVS_JUMP_CHAINS,
  IpvsRenderer,
  ipsetName,
  planSync,
  realServerKey,
  virtualServerKey,
  type CurrentVirtualServer,
  type IpvsCurrent,
  type IpvsOp,
  type RealServer,
  type VirtualServer,
} from '../../dataplane/ipvs/index.js';
import { IptablesDriftWatch, restoreSections } from '../iptables/driftwatch.js';
import { parseIptablesVersion, supportsRandomFully } from '../iptables/features.js';
import { isNftBackend } from '../iptables/restore.js';
import { Iptables } from '../iptables/iptables.js';
import type { CommandRunner } from '../exec.js';
import { jumpRestoreInput, ruleLine } from '../iptables/dataplane.js';
import { cleanupIpvsLeftovers } from './cleanup.js';
import { DEFAULT_DRAIN_BOUNDS, GracefulTermination, type DrainAction, type DrainBounds } from './graceful.js';
import { DUMMY_DEVICE, type IpvsKernelDeps } from './kernel.js';
import { ensureIpvsSysctls } from './sysctls.js';

export interface IpvsModeOptions {
  /** --ipvs-scheduler ('' = rr). */
  readonly scheduler: string;
  /** --ipvs-exclude-cidrs: virtual servers there are never deleted. */
  readonly excludeCIDRs: readonly string[];
  readonly strictARP: boolean;
  /** Seconds; 0 leaves the kernel's value. */
  readonly tcpTimeout: number;
  readonly tcpFinTimeout: number;
  readonly udpTimeout: number;
}

export interface IpvsDataplaneOptions {
  readonly config: DataplaneConfig;
  readonly ipvs: IpvsModeOptions;
  /** The kernel interfaces (openKernel, or fakeKernel in tests); opened lazily when a factory. */
  readonly kernel: IpvsKernelDeps | (() => Promise<IpvsKernelDeps>);
  /** For iptables feature detection (hostRunner, or netnsRunner in tests). */
  readonly run: CommandRunner;
  readonly clock: Clock;
  /** Full reconciles at least this often (upstream: every sync, maxInterval = syncPeriod). */
  readonly syncPeriodMs: number;
  readonly drainBounds?: DrainBounds;
  /** How often draining real servers are checked; default 5 s. */
  readonly drainCheckMs?: number;
  /** How often the drift watch compares the kernel with the last sync; default 1 s. */
  readonly driftCheckMs?: number;
  /** The network namespace the kernel interfaces work in (tests), for the nf_tables events; default ours. */
  readonly netns?: string;
  /**
   * Flush the UDP conntrack entries of the real servers one sync deleted
   * (the caller's conntrack table; called once per sync, never with none).
   */
  readonly flushUDP?: (family: IPFamily, deleted: readonly { vs: VirtualServer; rs: RealServer }[]) => Promise<void>;
  readonly onEvent?: (level: 'debug' | 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string) => void;
}

/** What the kernel holds as far as our successful requests tell. */
interface Applied {
  readonly vss: Map<string, { vs: VirtualServer; dests: Map<string, RealServer> }>;
  readonly ipsets: Map<string, Set<string>>;
  readonly addresses: Set<string>;
  iptables: string;
}

export class IpvsDataplane implements Dataplane {
  readonly mode = 'ipvs' as const;
  readonly family: IPFamily;
  private kernel: IpvsKernelDeps | null = null;
  private renderer: IpvsRenderer | null = null;
  private applied: Applied | null = null;
  private lastFull = Number.NEGATIVE_INFINITY;
  private nodeAddresses: string[] = [];
  private dummyIndex = 0;
  private readonly graceful: GracefulTermination;
  private drainTimer: TimerHandle | null = null;
  /** watchDrift()'s listener, and what the last successful sync left in the kernel (by key). */
  private onDrift: ((drift: Drift) => void) | null = null;
  private driftTimer: TimerHandle | null = null;
  private expected: { vss: ReadonlyMap<string, unknown>; addresses: ReadonlySet<string> } | null = null;
  /** The nf_tables watch of our iptables chains. */
  private readonly chainWatch = new IptablesDriftWatch();
  private nftBackend = false;
  private lock: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(private readonly o: IpvsDataplaneOptions) {
    this.family = o.config.family;
    this.graceful = new GracefulTermination(o.drainBounds ?? DEFAULT_DRAIN_BOUNDS);
  }

  /** One operation on the kernel at a time (syncs and drain checks). */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.lock.then(fn, fn);
    this.lock = p.catch(() => {});
    return p;
  }

  private async init(): Promise<{ k: IpvsKernelDeps; r: IpvsRenderer }> {
    if (this.kernel && this.renderer) return { k: this.kernel, r: this.renderer };
    const k = typeof this.o.kernel === 'function' ? await this.o.kernel() : this.o.kernel;
    try {
      // MASQUERADE --random-fully needs iptables >= 1.6.2 (upstream HasRandomFully).
      const version = await new Iptables(this.family, this.o.run).versionString().catch(() => '');
      this.nftBackend = isNftBackend(version);
      await ensureIpvsSysctls(k.sysctl, this.family, this.o.ipvs.strictARP, (fields, msg) =>
        this.o.onEvent?.('info', fields, msg),
      );
      const t = this.o.ipvs;
      if (t.tcpTimeout > 0 || t.tcpFinTimeout > 0 || t.udpTimeout > 0)
        k.ipvs.setTimeouts({ tcp: t.tcpTimeout, tcpFin: t.tcpFinTimeout, udp: t.udpTimeout });
      this.renderer = new IpvsRenderer({
        scheduler: t.scheduler,
        randomFully: supportsRandomFully(parseIptablesVersion(version)),
      });
      this.kernel = k;
      return { k, r: this.renderer };
    } catch (e) {
      if (typeof this.o.kernel === 'function') k.close();
      throw e;
    }
  }

  sync(state: SyncState): Promise<SyncOutcome> {
    return this.serial(async () => {
      try {
        return await this.syncOnce(state);
      } catch (e) {
        this.applied = null;
        throw e instanceof ProxyError && e.code === 'KPT_SYNC_FAILED'
          ? e
          : new ProxyError('KPT_SYNC_FAILED', `ipvs ${this.family} sync failed: ${String(e)}`, { cause: e });
      }
    });
  }

  private async syncOnce(state: SyncState): Promise<SyncOutcome> {
    const { k, r } = await this.init();
    await this.openMonitor();
    const clock = this.o.clock;
    const t0 = clock.monotonic();
    const full = state.fullSync || this.applied === null || t0 - this.lastFull >= this.o.syncPeriodMs;
    if (full) {
      this.dummyIndex = k.link.ensureDummy(DUMMY_DEVICE);
      this.nodeAddresses = k.link
        .addresses(this.family)
        .filter((a) => a.index !== this.dummyIndex)
        .map((a) => a.address);
    }
    const render = r.render({
      state: full ? { ...state, fullSync: true } : state,
      config: this.o.config,
      nodeAddresses: this.nodeAddresses,
    });
    const t1 = clock.monotonic();
    const current = full ? await this.readBack(k) : this.applied!;
    const t2 = clock.monotonic();
    const plan = planSync(render, toCurrent(current), {
      family: this.family,
      owned: (vs) => this.owned(vs, current),
    });
    const applied: Applied = current;
    this.applied = null; // until everything below succeeded

    const errors: string[] = [];
    if (plan.ipsetScript) {
      await k.ipset.restore(plan.ipsetScript);
      applyIpsetScript(applied.ipsets, plan.ipsetScript);
    }
    for (const f of k.link.changeAddresses(this.dummyIndex, true, plan.addAddresses))
      errors.push(`bind ${f.address}: ${f.error}`);
    for (const a of plan.addAddresses) applied.addresses.add(a);

    const now = clock.now();
    const drain = this.graceful.retire(plan.retired, now);
    for (const v of plan.revived) this.graceful.revive(v.vs, v.rs);
    const ops: IpvsOp[] = [
      ...plan.ops,
      ...plan.revived.map((v) => ({ op: 'edit-dest' as const, vs: v.vs, rs: v.rs })),
      ...drain.map(drainOp),
    ];
    const failures = k.ipvs.apply(ops);
    const failed = new Set(failures.map((f) => f.op));
    for (const f of failures) errors.push(`${f.op.op} ${virtualServerKey(f.op.vs)}: ${f.message}`);
    for (const op of ops) if (!failed.has(op)) applyOp(applied.vss, op);
    for (const op of ops)
      if (op.op === 'del-service' && !failed.has(op)) this.graceful.forgetVirtualServer(virtualServerKey(op.vs));
    await this.flushDeletedUDP(drain, failed, ops);

    const t3 = clock.monotonic();
    if (full || render.iptables !== applied.iptables) {
      await this.ownChange(
        () => k.iptables(this.family).restore(render.iptables, { noflush: true, counters: true }),
        restoreSections([render.iptables]),
      );
      applied.iptables = render.iptables;
    }
    if (full) await this.ensureJumps(k);
    const t4 = clock.monotonic();

    for (const f of k.link.changeAddresses(this.dummyIndex, false, plan.delAddresses))
      errors.push(`unbind ${f.address}: ${f.error}`);
    for (const a of plan.delAddresses) applied.addresses.delete(a);

    for (const s of render.skipped)
      this.o.onEvent?.('warn', { service: s.key, reason: s.reason }, 'service port skipped');
    if (errors.length > 0) {
      throw new ProxyError(
        'KPT_SYNC_FAILED',
        `ipvs ${this.family}: ${errors.length} change(s) refused, first: ${errors[0]}`,
      );
    }
    this.applied = applied;
    // The renderer's maps hold every virtual server and address of the family, not only this sync's changes.
    this.expected = { vss: render.virtualServers, addresses: render.bindAddresses };
    if (full) this.lastFull = t0;
    this.armDrainCheck();
    this.armDriftCheck();
    return {
      partial: !full,
      counters: {
        virtualServers: render.virtualServers.size,
        ipvsRequests: ops.length,
        draining: this.graceful.size,
        skipped: render.skipped.length,
        noLocalInternal: render.noLocalEndpoints.internal,
        noLocalExternal: render.noLocalEndpoints.external,
        renderMs: t1 - t0,
        readBackMs: t2 - t1,
        ipvsMs: t3 - t2,
        iptablesMs: t4 - t3,
      },
    };
  }

  /** The kernel's state for a full sync: our family's virtual servers, the sets, kube-ipvs0's addresses. */
  private async readBack(k: IpvsKernelDeps): Promise<Applied> {
    const vss = new Map<string, { vs: VirtualServer; dests: Map<string, RealServer> }>();
    for (const vs of k.ipvs.listServices()) {
      if (vs.family !== this.family) continue;
      const dests = new Map<string, RealServer>();
      for (const d of k.ipvs.listDests(vs))
        dests.set(realServerKey(d), { address: d.address, port: d.port, weight: d.weight });
      vss.set(virtualServerKey(vs), { vs, dests });
    }
    const ipsets = new Map<string, Set<string>>();
    for (const [name, s] of await k.ipset.save()) ipsets.set(name, new Set(s.entries));
    const addresses = new Set(
      k.link
        .addresses(this.family)
        .filter((a) => a.index === this.dummyIndex)
        .map((a) => a.address),
    );
    return { vss, ipsets, addresses, iptables: this.applied?.iptables ?? '' };
  }

  /** Ours to delete: see the header. `current` is what the kernel held before this sync's changes. */
  private owned(vs: VirtualServer, current: Applied): boolean {
    if (vs.family !== this.family) return false;
    const ip = parseIP(vs.address);
    if (!ip) return false;
    for (const c of this.o.ipvs.excludeCIDRs) {
      const p = parseCIDR(c);
      if (p && p.family === ip.family && cidrContains(p, ip)) return false;
    }
    if (current.addresses.has(ip.text)) return true;
    if (!this.nodeAddresses.includes(ip.text)) return false;
    const proto = vs.protocol.toLowerCase();
    const set =
      vs.protocol === 'TCP' ? IPSET.NODE_PORT_TCP : vs.protocol === 'UDP' ? IPSET.NODE_PORT_UDP : IPSET.NODE_PORT_SCTP;
    const members = current.ipsets.get(ipsetName(set, this.family));
    return members?.has(vs.protocol === 'SCTP' ? `${ip.text},${proto}:${vs.port}` : String(vs.port)) ?? false;
  }

  /**
   * The jump rules from the built-in chains, prepended when missing (upstream
   * EnsureRule Prepend), checked against one iptables-save instead of one
   * `iptables -C` per rule: a process per rule is what costs here.
   */
  private async ensureJumps(k: IpvsKernelDeps): Promise<void> {
    const ipt = k.iptables(this.family);
    const save = await ipt.save();
    const missing = IPVS_JUMP_CHAINS.filter((jc) => !save.includes(`\n${ruleLine(jc.from, jumpRuleArgs(jc))}\n`));
    // In list order, each at position 1: the same result as upstream's sequence of prepends.
    if (missing.length === 0) return;
    const input = jumpRestoreInput(missing);
    await this.ownChange(() => ipt.restore(input, { noflush: true, counters: false }), restoreSections([input]));
  }

  private async flushDeletedUDP(drain: readonly DrainAction[], failed: ReadonlySet<IpvsOp>, ops: readonly IpvsOp[]) {
    if (!this.o.flushUDP) return;
    const deleted = drain.filter(
      (a, i) => a.kind === 'delete' && a.vs.protocol === 'UDP' && !failed.has(ops[ops.length - drain.length + i]!),
    );
    if (deleted.length === 0) return;
    await this.o
      .flushUDP(this.family, deleted)
      .catch((e: unknown) =>
        this.o.onEvent?.('warn', { err: String(e) }, 'conntrack flush of deleted UDP real servers failed'),
      );
  }

  private armDrainCheck(): void {
    if (this.drainTimer || this.graceful.size === 0 || this.closed) return;
    this.drainTimer = this.o.clock.setTimer(this.o.drainCheckMs ?? 5000, () => {
      this.drainTimer = null;
      void this.checkDraining().catch((e: unknown) =>
        this.o.onEvent?.('warn', { err: String(e) }, 'checking draining IPVS real servers failed'),
      );
    });
  }

  /** Delete drained real servers (or those past the bound); re-arms while any are left. */
  checkDraining(): Promise<number> {
    return this.serial(async () => {
      const k = this.kernel;
      if (!k || this.graceful.size === 0) return 0;
      const dests = new Map<string, ReturnType<IpvsKernelDeps['ipvs']['listDests']>>();
      const existing = new Set(k.ipvs.listServices().map(virtualServerKey));
      for (const vs of this.graceful.virtualServers()) {
        if (existing.has(virtualServerKey(vs))) dests.set(virtualServerKey(vs), k.ipvs.listDests(vs));
      }
      const actions = this.graceful.check(dests, this.o.clock.now());
      const ops = actions.map(drainOp);
      const failures = k.ipvs.apply(ops);
      const failed = new Set(failures.map((f) => f.op));
      for (const op of ops) if (!failed.has(op) && this.applied) applyOp(this.applied.vss, op);
      for (const a of actions)
        this.o.onEvent?.(
          'debug',
          { vs: virtualServerKey(a.vs), rs: realServerKey(a.rs), why: a.kind === 'delete' ? a.why : '' },
          'drained real server deleted',
        );
      await this.flushDeletedUDP(actions, failed, ops);
      if (failures.length) this.applied = null;
      this.armDrainCheck();
      return actions.length - failures.length;
    });
  }

  /**
   * Tell `onDrift` when another actor removes virtual servers of ours or
   * Service addresses from kube-ipvs0 (checked every second; see the top).
   */
  watchDrift(onDrift: (drift: Drift) => void): void {
    this.onDrift = onDrift;
  }

  private ownChange<T>(fn: () => Promise<T>, commits: number): Promise<T> {
    return this.chainWatch.ownChange(fn, commits);
  }

  private async openMonitor(): Promise<void> {
    const listener = this.onDrift;
    if (!listener) return;
    const o = { family: this.family, nftBackend: this.nftBackend, netns: this.o.netns, onEvent: this.o.onEvent };
    await this.chainWatch.open(o, (drift) => {
      // A partial sync restores only rules whose text changed: it would trust chains that may be gone.
      this.applied = null;
      this.expected = null;
      listener(drift);
    });
  }

  private armDriftCheck(): void {
    if (this.driftTimer || !this.onDrift || this.closed) return;
    this.driftTimer = this.o.clock.setTimer(this.o.driftCheckMs ?? DRIFT_CHECK_MS, () => {
      this.driftTimer = null;
      void this.checkDrift().then(
        () => this.armDriftCheck(),
        (e: unknown) => {
          this.o.onEvent?.('warn', { err: String(e) }, 'checking the IPVS table for drift failed; retrying');
          this.armDriftCheck();
        },
      );
    });
  }

  /**
   * Compare the kernel with the last successful sync and report what is
   * missing. Reported once: what was applied is forgotten, so checks stop
   * until a sync (the engine's repair) succeeds. Null when nothing is missing
   * or there is nothing to compare with.
   */
  checkDrift(): Promise<Drift | null> {
    return this.serial(async () => {
      const k = this.kernel;
      const want = this.expected;
      if (!k || !want || !this.applied || !this.onDrift || this.closed) return null;
      const drift = this.driftOf(k, want);
      if (drift) {
        this.applied = null;
        this.expected = null;
        this.onDrift(drift);
      }
      return drift;
    });
  }

  private driftOf(k: IpvsKernelDeps, want: NonNullable<IpvsDataplane['expected']>): Drift | null {
    if (want.vss.size > 0) {
      const present = new Set<string>();
      for (const vs of k.ipvs.listServices()) if (vs.family === this.family) present.add(virtualServerKey(vs));
      const missing: string[] = [];
      for (const key of want.vss.keys()) if (!present.has(key)) missing.push(key);
      if (missing.length > 0)
        return {
          reason: 'rules_changed',
          detail: `${missing.length} of ${want.vss.size} IPVS virtual servers gone: ${missing.slice(0, 3).join(', ')}`,
        };
    }
    if (want.addresses.size > 0) {
      // By index: a kube-ipvs0 deleted and made again by others has a new one, and none of our addresses.
      const bound = new Set(
        k.link
          .addresses(this.family)
          .filter((a) => a.index === this.dummyIndex)
          .map((a) => a.address),
      );
      const missing: string[] = [];
      for (const a of want.addresses) if (!bound.has(a)) missing.push(a);
      if (missing.length > 0)
        return {
          reason: 'address_removed',
          detail: `${missing.length} of ${want.addresses.size} addresses gone from ${DUMMY_DEVICE}: ${missing.slice(0, 3).join(', ')}`,
        };
    }
    return null;
  }

  /** Remove this family's IPVS state (and kube-ipvs0 once no other family uses it). */
  cleanup(): Promise<void> {
    return this.serial(async () => {
      const { k } = await this.init();
      this.applied = null;
      this.chainWatch.stop(); // our own removals are no drift
      const r = await cleanupIpvsLeftovers(k, { families: [this.family], excludeCIDRs: this.o.ipvs.excludeCIDRs });
      if (r.errors.length > 0)
        throw new ProxyError('KPT_EXEC_FAILED', `ipvs ${this.family} cleanup: ${r.errors.length} step(s) failed`, {
          cause: r.errors[0],
        });
    });
  }

  close(): void {
    this.closed = true;
    this.drainTimer?.cancel();
    this.drainTimer = null;
    this.driftTimer?.cancel();
    this.driftTimer = null;
    this.chainWatch.stop();
    if (typeof this.o.kernel === 'function') this.kernel?.close();
  }
}

/**
 * The drift check's period: a cleared table is repaired within about a
 * second, for two dumps a second (see the top; their cost at 1k virtual
 * servers is in docs/compatibility.md).
 */
const DRIFT_CHECK_MS = 1000;

function drainOp(a: DrainAction): IpvsOp {
  return a.kind === 'weight0' ? { op: 'edit-dest', vs: a.vs, rs: a.rs } : { op: 'del-dest', vs: a.vs, rs: a.rs };
}

/** Mirror one successful request in what we believe the kernel holds. */
function applyOp(vss: Applied['vss'], op: IpvsOp): void {
  const key = virtualServerKey(op.vs);
  switch (op.op) {
    case 'add-service':
    case 'edit-service': {
      const cur = vss.get(key);
      vss.set(key, { vs: op.vs, dests: cur?.dests ?? new Map() });
      return;
    }
    case 'del-service':
      vss.delete(key);
      return;
    case 'add-dest':
    case 'edit-dest':
      vss.get(key)?.dests.set(realServerKey(op.rs), op.rs);
      return;
    case 'del-dest':
      vss.get(key)?.dests.delete(realServerKey(op.rs));
      return;
  }
}

/** Mirror an ipset restore script (create/add/del lines) in the set memory. */
function applyIpsetScript(sets: Map<string, Set<string>>, script: string): void {
  for (const line of script.split('\n')) {
    const [cmd, name, member] = line.split(' ');
    if (!name) continue;
    if (cmd === 'create' && !sets.has(name)) sets.set(name, new Set());
    else if (cmd === 'add') sets.get(name)?.add(member!);
    else if (cmd === 'del') sets.get(name)?.delete(member!);
  }
}

function toCurrent(a: Applied): IpvsCurrent {
  const virtualServers = new Map<string, CurrentVirtualServer>();
  for (const [k, v] of a.vss) virtualServers.set(k, { vs: v.vs, dests: v.dests });
  return { virtualServers, ipsets: a.ipsets, addresses: a.addresses };
}
