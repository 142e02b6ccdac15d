// IpvsDataplane: the IPVS mode for one IP family on a real kernel (upstream
// ipvs Proxier.syncProxyRules minus the pure planning: IpvsPlanner, the
// IPVS driver on the one reconciler, planner.ts). Each sync:
//   1. once: the sysctls upstream sets (vs/conntrack, expire_nodest_conn,
//      expire_quiescent_template, ip_forward, conn_reuse_mode on kernels that
//      need it, strict ARP when asked) and the IPVS timeouts when any is set;
//   2. full syncs (the first, after a failure or drift, the engine's, and at
//      least every syncPeriod, as upstream's IPVS mode syncs fully every
//      period): make sure kube-ipvs0 exists, read the node's addresses, and
//      read the IPVS table, the ipsets and kube-ipvs0's addresses back for
//      the planner to adopt, so the full plan also repairs what others
//      changed and nothing watches (a real server removed by hand);
//      partial syncs plan against the reconciler's memory;
//   3. plan, and apply in the order the kernel needs: ipsets (sets exist
//      before rules match them), iptables-restore (full syncs, or when a
//      rule came or went or a set filled or emptied) and jump rules (full
//      syncs), so the rules are in place before the virtual servers they
//      steer; IPVS requests in one netlink batch, the new kube-ipvs0
//      addresses (after their virtual servers, as upstream's syncService
//      binds after it adds one), and last the addresses that go;
//   4. real servers that are no longer wanted are drained (graceful.ts); a
//      timer checks the draining ones while there are any.
// Only our virtual servers are adopted (ownedVirtualServer, or one a Service
// wants), so others' are never deleted; none inside --ipvs-exclude-cidrs is.
// Any failure calls the planner's failed(), so the next sync is full and
// repairs from the kernel.
//
// Drift (watchDrift): IPVS has no change notifications, so every second,
// after a successful sync, the table's virtual servers of our family (one
// generic netlink dump) and kube-ipvs0's addresses (one rtnetlink dump) are
// compared with what the reconciler wants: a cleared table (`ipvsadm -C`), a
// deleted virtual server, a removed Service address or a deleted kube-ipvs0
// is reported, and the engine's full sync writes them back. Real servers are
// not listed (that takes a dump per virtual server, a thousand at 1k);
// one removed by others waits for the periodic full sync. Our iptables
// chains and jumps are watched as the iptables mode watches its own, through
// nf_tables events on the nf_tables backend (../iptables/driftwatch.ts); on
// the legacy backend they wait for the periodic full sync.
import { ProxyError } from '../../core/errors.js';
import type { Dataplane, DataplaneConfig, Drift, IPFamily, SyncOutcome, SyncState } from '../../core/types.js';
import type { Clock, TimerHandle } from '../../core/clock.js';
import { jumpRuleArgs } from '../../dataplane/iptables/jumps.js';
import type { CurrentVirtualServer, IpvsCurrent } from '../../dataplane/ipvs/live.js';
import {
  realServerKey,
  virtualServerKey,
  type IpvsOp,
  type RealServer,
  type VirtualServer,
} from '../../dataplane/ipvs/objects.js';
import { IPVS_JUMP_CHAINS } from '../../dataplane/ipvs/rules.js';
import { IptablesDriftWatch, iptablesModeOnly, restoreSections } from '../iptables/driftwatch.js';
import { parseIptablesVersion, supportsRandomFully } from '../iptables/features.js';
import { isNftBackend } from '../iptables/restore.js';
import { iptablesModeChains } from '../iptables/cleanup.js';
import { Iptables } from '../iptables/iptables.js';
import type { CommandRunner } from '../exec.js';
import { jumpRestoreInput, ruleLine } from '../iptables/dataplane.js';
import { cleanupIpvsLeftovers } from './cleanup.js';
import { DEFAULT_DRAIN_BOUNDS, GracefulTermination, type DrainAction, type DrainBounds } from './graceful.js';
import { DUMMY_DEVICE, type IpvsKernelDeps } from './kernel.js';
import { IpvsPlanner } from './planner.js';
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

export class IpvsDataplane implements Dataplane {
  readonly mode = 'ipvs' as const;
  readonly family: IPFamily;
  private kernel: IpvsKernelDeps | null = null;
  /** The driver on the reconciler; made once iptables' features are known. Forgets (failed()) on any failure or drift. */
  private planner: IpvsPlanner | null = null;
  private lastFull = Number.NEGATIVE_INFINITY;
  /** Until the first sync: it may take over from iptables mode (syncOnce). */
  private firstSync = true;
  private nodeAddresses: string[] = [];
  private dummyIndex = 0;
  private readonly graceful: GracefulTermination;
  private drainTimer: TimerHandle | null = null;
  /** watchDrift()'s listener. */
  private onDrift: ((drift: Drift) => void) | null = null;
  private driftTimer: TimerHandle | null = null;
  /** The nf_tables watch of our iptables chains. */
  private readonly chainWatch = new IptablesDriftWatch(iptablesModeOnly);
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

  private async init(): Promise<{ k: IpvsKernelDeps; planner: IpvsPlanner }> {
    if (this.kernel && this.planner) return { k: this.kernel, planner: this.planner };
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
      this.planner = new IpvsPlanner(this.o.config, {
        scheduler: t.scheduler || 'rr',
        randomFully: supportsRandomFully(parseIptablesVersion(version)),
        excludeCIDRs: t.excludeCIDRs,
      });
      this.kernel = k;
      return { k, planner: this.planner };
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
        // The one failure rule: forget, and let the next (full) sync start from what the kernel holds.
        this.planner?.failed();
        throw e instanceof ProxyError && e.code === 'KPT_SYNC_FAILED'
          ? e
          : new ProxyError('KPT_SYNC_FAILED', `ipvs ${this.family} sync failed: ${String(e)}`, { cause: e });
      }
    });
  }

  private async syncOnce(state: SyncState): Promise<SyncOutcome> {
    const { k, planner } = await this.init();
    await this.openMonitor();
    const clock = this.o.clock;
    const t0 = clock.monotonic();
    const asked = state.fullSync || planner.needsLive() || t0 - this.lastFull >= this.o.syncPeriodMs;
    if (asked) {
      this.dummyIndex = k.link.ensureDummy(DUMMY_DEVICE);
      this.nodeAddresses = k.link
        .addresses(this.family)
        .filter((a) => a.index !== this.dummyIndex)
        .map((a) => a.address);
    }
    const live = asked ? await this.readBack(k) : null;
    const t1 = clock.monotonic();
    // The node's addresses are read only for full plans: a partial one never finds them changed.
    const { plan, full, rules, skipped, virtualServers } = planner.plan({
      state,
      full: asked,
      nodeAddresses: this.nodeAddresses,
      live,
      draining: this.graceful.draining(),
    });
    const t2 = clock.monotonic();

    const errors: string[] = [];
    if (plan.ipsetScript) await k.ipset.restore(plan.ipsetScript);
    let iptablesMs = 0;
    const writeRules = async () => {
      const tRules = clock.monotonic();
      if (rules !== null) {
        await this.ownChange(
          () => k.iptables(this.family).restore(rules, { noflush: true, counters: true }),
          restoreSections([rules]),
        );
      }
      if (full) await this.ensureJumps(k);
      iptablesMs = clock.monotonic() - tRules;
    };
    // The rules before the virtual servers they steer: a new Service's first packets then already meet
    // its rules (an externalTrafficPolicy Local NodePort is not masqueraded, a source range applies),
    // instead of IPVS serving them by the rules of a moment before. Except when taking over from
    // iptables mode: our rules replace its KUBE-SERVICES, which DNATs every Service until then, so
    // IPVS must be ready first (src/cmd/handover.ts).
    const ipvsFirst = this.firstSync && iptablesModeChains(await k.iptables(this.family).save('nat'));
    if (ipvsFirst) this.o.onEvent?.('info', { family: this.family }, 'Taking over from iptables mode: IPVS first');
    else await writeRules();

    const drain = this.graceful.retire(plan.retired, clock.now());
    for (const v of plan.revived) this.graceful.revive(v.vs, v.rs);
    const drainOps = drain.map(drainOp);
    const ops: IpvsOp[] = [
      ...plan.ops,
      ...plan.revived.map((v) => ({ op: 'edit-dest' as const, vs: v.vs, rs: v.rs })),
      ...drainOps,
    ];
    const failures = k.ipvs.apply(ops);
    const failed = new Set(failures.map((f) => f.op));
    for (const f of failures) errors.push(`${f.op.op} ${virtualServerKey(f.op.vs)}: ${f.message}`);
    for (const op of ops)
      if (op.op === 'del-service' && !failed.has(op)) this.graceful.forgetVirtualServer(virtualServerKey(op.vs));
    await this.flushDeletedUDP(drain, drainOps, failed);
    // Bound only now that its virtual server (and its real servers) exist: an address on kube-ipvs0
    // without one is the node's own, so a packet sent to it meanwhile would reach the node's sockets
    // (a DNS server listening on 0.0.0.0, say) and leave an un-NATed conntrack entry behind.
    for (const f of k.link.changeAddresses(this.dummyIndex, true, plan.addAddresses))
      errors.push(`bind ${f.address}: ${f.error}`);

    if (ipvsFirst) await writeRules();
    const t3 = clock.monotonic();

    for (const f of k.link.changeAddresses(this.dummyIndex, false, plan.delAddresses))
      errors.push(`unbind ${f.address}: ${f.error}`);

    for (const s of skipped) this.o.onEvent?.('warn', { service: s.key, reason: s.reason }, 'service port skipped');
    if (errors.length > 0) {
      throw new ProxyError(
        'KPT_SYNC_FAILED',
        `ipvs ${this.family}: ${errors.length} change(s) refused, first: ${errors[0]}`,
      );
    }
    if (full) this.lastFull = t0;
    this.firstSync = false;
    this.armDrainCheck();
    this.armDriftCheck();
    return {
      partial: !full,
      counters: {
        virtualServers,
        ipvsRequests: ops.length,
        draining: this.graceful.size,
        skipped: skipped.length,
        readBackMs: t1 - t0,
        planMs: t2 - t1,
        ipvsMs: t3 - t2 - iptablesMs,
        iptablesMs,
      },
    };
  }

  /** The kernel's state for a full sync: our family's virtual servers, the sets, kube-ipvs0's addresses. */
  private async readBack(k: IpvsKernelDeps): Promise<IpvsCurrent> {
    const virtualServers = new Map<string, CurrentVirtualServer>();
    for (const vs of k.ipvs.listServices()) {
      if (vs.family !== this.family) continue;
      const dests = k.ipvs.listDests(vs).map((d) => ({ address: d.address, port: d.port, weight: d.weight }));
      virtualServers.set(virtualServerKey(vs), { vs, dests });
    }
    const ipsets = new Map<string, ReadonlySet<string>>();
    for (const [name, s] of await k.ipset.save()) ipsets.set(name, new Set(s.entries));
    const addresses = new Set(
      k.link
        .addresses(this.family)
        .filter((a) => a.index === this.dummyIndex)
        .map((a) => a.address),
    );
    return { virtualServers, ipsets, addresses };
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

  /** `ops[i]` is the request of `drain[i]`; those in `failed` were refused. */
  private async flushDeletedUDP(
    drain: readonly DrainAction[],
    ops: readonly IpvsOp[],
    failed: ReadonlySet<IpvsOp>,
  ): Promise<void> {
    if (!this.o.flushUDP) return;
    const deleted = drain.filter((a, i) => a.kind === 'delete' && a.vs.protocol === 'UDP' && !failed.has(ops[i]!));
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
      for (const a of actions)
        this.o.onEvent?.(
          'debug',
          { vs: virtualServerKey(a.vs), rs: realServerKey(a.rs), why: a.kind === 'delete' ? a.why : '' },
          'drained real server deleted',
        );
      await this.flushDeletedUDP(actions, ops, failed);
      if (failures.length) this.planner?.failed();
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
      // A partial sync restores the rules only when one came or went: it would trust chains that may be gone.
      this.planner?.failed();
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
   * Compare the kernel with what the reconciler wants after the last
   * successful sync and report what is missing. Reported once: the
   * reconciler forgets, so checks stop until a sync (the engine's repair)
   * succeeds. Null when nothing is missing or there is nothing to compare with.
   */
  checkDrift(): Promise<Drift | null> {
    return this.serial(async () => {
      const k = this.kernel;
      const p = this.planner;
      if (!k || !p || p.needsLive() || !this.onDrift || this.closed) return null;
      const drift = this.driftOf(k, p);
      if (drift) {
        p.failed();
        this.onDrift(drift);
      }
      return drift;
    });
  }

  private driftOf(k: IpvsKernelDeps, p: IpvsPlanner): Drift | null {
    const vss = p.count('vs');
    if (vss > 0) {
      const present = new Set<string>();
      for (const vs of k.ipvs.listServices()) if (vs.family === this.family) present.add(virtualServerKey(vs));
      const missing = p.missing('vs', present);
      if (missing.length > 0)
        return {
          reason: 'rules_changed',
          detail: `${missing.length} of ${vss} IPVS virtual servers gone: ${missing.slice(0, 3).join(', ')}`,
        };
    }
    const binds = p.count('bind');
    if (binds > 0) {
      // By index: a kube-ipvs0 deleted and made again by others has a new one, and none of our addresses.
      const bound = new Set(
        k.link
          .addresses(this.family)
          .filter((a) => a.index === this.dummyIndex)
          .map((a) => a.address),
      );
      const missing = p.missing('bind', bound);
      if (missing.length > 0)
        return {
          reason: 'address_removed',
          detail: `${missing.length} of ${binds} addresses gone from ${DUMMY_DEVICE}: ${missing.slice(0, 3).join(', ')}`,
        };
    }
    return null;
  }

  /** Remove this family's IPVS state (and kube-ipvs0 once no other family uses it). */
  cleanup(): Promise<void> {
    return this.serial(async () => {
      const { k, planner } = await this.init();
      planner.failed();
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
