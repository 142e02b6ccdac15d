// IptablesDataplane: the iptables mode for one IP family on a real kernel
// (upstream iptables Proxier.syncProxyRules minus the pure rendering, which is
// src/dataplane/iptables). Each sync:
//   1. on a partial sync, checks the KUBE-PROXY-CANARY chains (mangle, nat,
//      filter); any one missing means the ruleset was wiped (e.g. a firewall
//      reload), so this sync becomes full (upstream ipt.Monitor);
//   2. reads `iptables-save -t nat` (every sync; in large-cluster mode only
//      when the planner needs the live chain list, and, when no drift watch
//      runs, at most once per syncPeriod, like upstream's stale-chain
//      cleanup): a full sync starts from its chain list, so stale chains are
//      deleted; on a partial sync, if it shows that another actor removed our
//      nat rules (a missing jump or chain, an emptied KUBE-POSTROUTING:
//      natDrift), this sync becomes full, so a `iptables -t nat -F` is
//      repaired by the next periodic sync at the latest (upstream waits for
//      its hourly full sync). At 10k Services that read takes 2-4 s, and the
//      changes that arrive meanwhile wait for it (bench/README.md, churn);
//      where the drift watch runs it reports the same changes within a
//      second, so large-cluster partial syncs leave the read out;
//   3. plans and renders (planner.ts); on a full sync adds the canary
//      declarations to the input; adds the whole-table cache request when it
//      is cheaper (restore.ts);
//   4. sets route_localnet=1 once when localhost NodePorts are served;
//   5. on a full sync, checks the jump rules from the built-in chains (-C);
//   6. applies with `iptables-restore -w --noflush --counters`: one atomic
//      transaction per table (chains, rules and canaries together);
//   7. inserts the missing jump rules (`-I FROM 1`, upstream order) with one
//      more small restore.
// Which service chains are written and which are deleted is the one
// reconciler's decision (planner.ts); any failure calls its failed(), so
// the next sync is full and starts from the live chain list.
//
// Between syncs, on the nf_tables backend, watchDrift() reports changes by
// others to our chains and jumps within a second (driftwatch.ts); the engine
// answers with a full sync, which rewrites every chain and checks every jump.
import { ProxyError } from '../../core/errors.js';
import type { DataplaneConfig, Dataplane, Drift, IPFamily, SyncOutcome, SyncState } from '../../core/types.js';
import type { Clock } from '../../core/clock.js';
import type { Steps } from '../../core/steps.js';
import { IPTABLES_JUMP_CHAINS, jumpRuleArgs, type JumpChain } from '../../dataplane/iptables/jumps.js';
import { natDrift, SavedTableReader, type SavedTable } from '../../dataplane/iptables/drift.js';
import type { IptablesOptions, IptablesRender } from '../../dataplane/iptables/renderer.js';
import { CANARY_CHAIN, cleanupLeftovers } from './cleanup.js';
import { detectFeatures, type IptablesFeatures } from './features.js';
import { Iptables, type Table } from './iptables.js';
import { insertAfterHeaders, wholeTableCachePays } from './restore.js';
import type { CommandRunner } from '../exec.js';
import { IptablesDriftWatch, ipvsModeOnly, restoreSections, type DriftWatch } from './driftwatch.js';
import { IptablesPlanner } from './planner.js';
import { runSliced } from '../slices.js';
import type { Sysctl } from './sysctl.js';

export const ROUTE_LOCALNET = 'net/ipv4/conf/all/route_localnet';

const CANARY_TABLES: readonly Table[] = ['mangle', 'nat', 'filter'];

export interface IptablesDataplaneOptions {
  readonly config: DataplaneConfig;
  /** hostRunner in production; netnsRunner(ns) in tests and the benchmark. */
  readonly run: CommandRunner;
  readonly sysctl: Sysctl;
  readonly clock: Clock;
  /** Large-cluster mode runs the iptables-save stale-chain cleanup at most this often. */
  readonly syncPeriodMs: number;
  /** Overrides of the detected renderer options (tests). */
  readonly options?: Partial<IptablesOptions>;
  /** 'auto' (default) uses restore.ts's cost model on the nf_tables backend. */
  readonly wholeTableCache?: 'auto' | 'always' | 'never';
  readonly onEvent?: (level: 'debug' | 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string) => void;
  /** The network namespace `run` works in (tests, benchmarks), for the drift watch's netlink socket. */
  readonly netns?: string;
  /** The watch of changes by others (tests); default an IptablesDriftWatch. */
  readonly driftWatch?: DriftWatch;
  /** Runs the planner's steps; default runSliced (a slice at a time between turns of the loop). */
  readonly runSteps?: <T>(steps: Steps<T>) => Promise<T>;
}

/** A rule as iptables-save prints it: `-A CHAIN args`, arguments with spaces in double quotes. */
export function ruleLine(chain: string, args: readonly string[]): string {
  return ['-A', chain, ...args.map((a) => (/\s/.test(a) ? `"${a}"` : a))].join(' ');
}

/**
 * The restore input as pieces: the render's, with the canary chain declared
 * in filter and nat (after their headers) and in a mangle section of its own
 * on a full sync, and the whole-table cache request (`-S`) first in nat when
 * it pays. Nothing is joined: the pieces are streamed into the restore.
 */
export function restoreInput(parts: readonly string[], o: { canaries: boolean; wholeTableCache: boolean }): string[] {
  const decl = `:${CANARY_CHAIN} - [0:0]`;
  const nat = [...(o.wholeTableCache ? ['-S'] : []), ...(o.canaries ? [decl] : [])];
  const out = insertAfterHeaders(parts, { ...(o.canaries ? { filter: [decl] } : {}), nat });
  if (o.canaries) {
    const last = out.findLast((p) => p.length > 0) ?? '\n';
    out.push(`${last.endsWith('\n') ? '' : '\n'}*mangle\n${decl}\nCOMMIT\n`);
  }
  return out;
}

/** Declare KUBE-PROXY-CANARY in filter and nat (after their headers) and in a mangle section. */
export function withCanaries(text: string): string {
  return restoreInput([text], { canaries: true, wholeTableCache: false }).join('');
}

/**
 * `-I FROM 1 ...` lines per table, in the given order, so the result equals
 * upstream's sequence of `iptables -I FROM 1` commands.
 */
export function jumpRestoreInput(jumps: readonly JumpChain[]): string {
  let out = '';
  for (const table of ['filter', 'nat', 'mangle'] as const) {
    const lines = jumps
      .filter((j) => j.table === table)
      .map((j) => ruleLine(j.from, jumpRuleArgs(j)).replace(/^-A (\S+)/, '-I $1 1'));
    if (lines.length > 0) out += `*${table}\n${lines.join('\n')}\nCOMMIT\n`;
  }
  return out;
}

export class IptablesDataplane implements Dataplane {
  readonly mode = 'iptables' as const;
  readonly family: IPFamily;
  readonly ipt: Iptables;
  private readonly planner = new IptablesPlanner();
  private features: Promise<IptablesFeatures> | null = null;
  private lastLargeClusterMode = false;
  /** Rules the last restore left in nat KUBE-SERVICES and KUBE-NODEPORTS, checked by natDrift in large-cluster mode. */
  private lastNatTopRules: number | undefined = undefined;
  private lastStaleCleanup = Number.NEGATIVE_INFINITY;
  private routeLocalnetSet = false;
  /** watchDrift()'s listener, and the nf_tables watch of our chains. */
  private onDrift: ((drift: Drift) => void) | null = null;
  private readonly drift: DriftWatch;
  /** A sliced plan is running; a drift seen meanwhile fails the planner once it is done. */
  private planning = false;
  private driftWhilePlanning = false;

  constructor(private readonly o: IptablesDataplaneOptions) {
    this.family = o.config.family;
    this.ipt = new Iptables(this.family, o.run);
    this.drift = o.driftWatch ?? new IptablesDriftWatch(ipvsModeOnly);
  }

  /** Detected once; a failed detection is retried on the next sync. */
  detect(): Promise<IptablesFeatures> {
    if (this.features === null) {
      this.features = detectFeatures(this.ipt, this.o.run, this.o.sysctl).catch((e: unknown) => {
        this.features = null;
        throw e;
      });
    }
    return this.features;
  }

  /**
   * Tell `onDrift` when another actor changes our chains or jumps (nf_tables
   * backend only; driftwatch.ts). The watch opens with the first sync.
   */
  watchDrift(onDrift: (drift: Drift) => void): void {
    this.onDrift = onDrift;
  }

  async sync(state: SyncState): Promise<SyncOutcome> {
    try {
      return await this.syncOnce(state);
    } catch (e) {
      this.planner.failed();
      throw e instanceof ProxyError && e.code === 'KPT_SYNC_FAILED'
        ? e
        : new ProxyError('KPT_SYNC_FAILED', `iptables ${this.family} sync failed: ${String(e)}`, { cause: e });
    }
  }

  private async syncOnce(state: SyncState): Promise<SyncOutcome> {
    const clock = this.o.clock;
    const features = await this.detect();
    await this.openMonitor(features);
    const tStart = clock.monotonic();
    let full = state.fullSync || this.planner.needsLive();
    let canaryMissing = false;
    if (!full && !(await this.canariesPresent())) {
      full = true;
      canaryMissing = true;
      this.o.onEvent?.(
        'warn',
        { family: this.family },
        'iptables canary missing: ruleset was flushed, forcing a full sync',
      );
    }
    const tSave = clock.monotonic();
    const natSave = await this.natSaveForStaleCleanup();
    let drifted = false;
    if (!full && natSave !== null) {
      const why = natDrift(natSave, this.planner.chains(), this.lastNatTopRules);
      if (why !== null) {
        full = drifted = true;
        this.o.onEvent?.(
          'warn',
          { family: this.family, reason: why },
          'iptables nat rules were changed by someone else, forcing a full sync',
        );
      }
    }
    const t0 = clock.monotonic();
    const cpu0 = process.cpuUsage();
    // In slices: a 10k-Service render would otherwise hold the event loop for its whole length (bench/README.md,
    // churn). Until it is done the planner must not be told of a drift: it is told right after.
    this.planning = true;
    let render: IptablesRender;
    try {
      render = await (this.o.runSteps ?? runSliced)(
        this.planner.planSteps(
          { state, config: this.o.config, options: { ...features.options, ...this.o.options } },
          full,
          natSave?.chains ?? null,
        ),
      );
    } finally {
      this.planning = false;
      if (this.driftWhilePlanning) {
        this.driftWhilePlanning = false;
        this.planner.failed();
      }
    }
    // The canaries ride in the same atomic restore (declaring an empty chain is idempotent).
    const whole = this.useWholeTableCache(features, render);
    const input = restoreInput(render.restoreParts, { canaries: full, wholeTableCache: whole });
    const t1 = clock.monotonic();
    const cpu = process.cpuUsage(cpu0);

    if (render.filterChains.includes('KUBE-FIREWALL') && !this.routeLocalnetSet) {
      await this.o.sysctl.set(ROUTE_LOCALNET, '1');
      this.routeLocalnetSet = true;
    }
    // Checked before the restore, while a first sync's tables are still small.
    const missingJumps = full ? await this.missingJumpRules(render, natSave) : [];
    const t2a = clock.monotonic();
    await this.ownChange(
      () => this.ipt.restore(input, { noflush: true, counters: true, discardStdout: whole }),
      restoreSections(input),
    );
    const t2 = clock.monotonic();
    // Missing jumps go in one small restore of their own, after the main one
    // created their targets. Not inside the main restore: with the whole-table
    // cache request iptables-nft fails `-I <built-in chain> 1` (ENOENT) when
    // the table did not exist before.
    if (missingJumps.length > 0) {
      const jumps = jumpRestoreInput(missingJumps);
      await this.ownChange(() => this.ipt.restore(jumps, { noflush: true, counters: false }), restoreSections([jumps]));
    }
    this.lastLargeClusterMode = render.largeClusterMode;
    this.lastNatTopRules = render.largeClusterMode ? render.natTopRules : undefined;
    for (const s of render.skipped)
      this.o.onEvent?.('warn', { service: s.key, reason: s.reason }, 'service port skipped');
    return {
      partial: render.partial,
      counters: {
        filterRules: render.filterRules,
        natRules: render.natRules,
        natRulesTotal: render.natRulesTotal,
        deletedChains: render.deletedChains.length,
        skipped: render.skipped.length,
        canaryCheckMs: tSave - tStart,
        natSaveMs: natSave === null ? 0 : t0 - tSave,
        // The plan runs in slices: both include what the loop served between them (little, as a rule).
        renderMs: t1 - t0,
        renderCpuMs: (cpu.user + cpu.system) / 1000,
        restoreMs: t2 - t2a,
        wholeTableCache: whole ? 1 : 0,
        canaryMissing: canaryMissing ? 1 : 0,
        natDrift: drifted ? 1 : 0,
        natTopKept: render.natTopKept ? 1 : 0,
      },
    };
  }

  /**
   * Upstream syncProxyRules (PR #138571): no hourly full sync while the last
   * sync was in large-cluster mode; a full rewrite of that many rules
   * disturbs traffic, and partial syncs plus the canary check keep the
   * rules right.
   */
  skipsPeriodicFullSync(): boolean {
    return this.lastLargeClusterMode;
  }

  private ownChange<T>(fn: () => Promise<T>, commits: number): Promise<T> {
    return this.drift.ownChange(fn, commits);
  }

  private async openMonitor(features: IptablesFeatures): Promise<void> {
    const listener = this.onDrift;
    if (!listener) return;
    const o = { family: this.family, nftBackend: features.nftBackend, netns: this.o.netns, onEvent: this.o.onEvent };
    await this.drift.open(o, (drift) => {
      // A partial sync would trust chains that may be gone.
      if (this.planning) this.driftWhilePlanning = true;
      else this.planner.failed();
      listener(drift);
    });
  }

  /** Stop the drift watch; the rules stay. */
  close(): void {
    this.drift.stop();
  }

  /** Upstream Monitor: all three canaries must exist. */
  async canariesPresent(): Promise<boolean> {
    const found = await Promise.all(CANARY_TABLES.map((t) => this.ipt.chainExists(t, CANARY_CHAIN)));
    return found.every(Boolean);
  }

  /**
   * What this sync needs of `iptables-save -t nat` (the chains, for the
   * stale-chain cleanup; rule counts and the built-in chains' rules, for the
   * drift and jump checks), read line by line so the whole save, large in a big cluster, is never held;
   * or null when it is not read this time: in large-cluster mode when the
   * planner knows the chains and either the drift watch reports changes by
   * others or the last read is less than a sync period old (upstream's
   * stale-chain cleanup period). Stale chains of ours only come from a failed
   * restore or an earlier process, and both make the planner need the list.
   */
  private async natSaveForStaleCleanup(): Promise<SavedTable | null> {
    const now = this.o.clock.monotonic();
    if (
      this.lastLargeClusterMode &&
      !this.planner.needsLive() &&
      (this.drift.watching() || now - this.lastStaleCleanup < this.o.syncPeriodMs)
    )
      return null;
    this.lastStaleCleanup = now;
    const reader = new SavedTableReader('nat');
    await this.ipt.saveLines('nat', (line) => reader.line(line));
    return reader.table;
  }

  private useWholeTableCache(f: IptablesFeatures, r: IptablesRender): boolean {
    const setting = this.o.wholeTableCache ?? 'auto';
    if (setting !== 'auto') return setting === 'always';
    if (!f.nftBackend) return false;
    const commands = r.natRules + r.deletedChains.length;
    // Chains named: every active chain on a full sync; on a partial one the
    // top-level chains still jump to every service chain, so about one name
    // per rule written.
    const chainNames = Math.min(r.natChains + r.deletedChains.length, commands);
    return wholeTableCachePays({ commands, chainNames, tableRules: Math.max(r.natRulesTotal, 1) });
  }

  /**
   * The jump rules from built-in chains that are missing, in
   * IPTABLES_JUMP_CHAINS order. Checked with -C, concurrently, except nat
   * rules already visible in this sync's `iptables-save -t nat`: a nat -C
   * makes iptables-nft read the nat chain list, while a filter -C is cheap and
   * `iptables-save -t filter` dumps every table, so filter is always checked
   * with -C (figures under iptables-sync in bench/README.md).
   */
  private async missingJumpRules(r: IptablesRender, natSave: SavedTable | null): Promise<JumpChain[]> {
    const wanted = IPTABLES_JUMP_CHAINS.filter((jc) => !jc.onlyIfChainRendered || r.filterChains.includes(jc.to));
    const present = await Promise.all(
      wanted.map(async (jc) => {
        const args = jumpRuleArgs(jc);
        if (jc.table === 'nat' && natSave?.lines.includes(ruleLine(jc.from, args))) return true;
        return this.ipt.ruleExists(jc.table, jc.from, args);
      }),
    );
    return wanted.filter((_, i) => !present[i]);
  }

  async cleanup(): Promise<void> {
    const f = await this.detect().catch(() => null);
    const res = await cleanupLeftovers(this.ipt, { wholeTableCache: f?.nftBackend ?? false });
    this.planner.failed();
    if (res.errors.length > 0) {
      throw new ProxyError('KPT_EXEC_FAILED', `iptables ${this.family} cleanup: ${res.errors.length} step(s) failed`, {
        cause: res.errors[0],
      });
    }
  }
}
