// The contract every datapath mode fulfils towards the rest of the program
// (docs/architecture.md, "a mode is a driver"). The proxy's start-up, the
// --cleanup and start-up cleanups, `explain`, `diff`, the failure counters
// and the extras that ride along a datapath all ask the mode's driver; no
// file outside the registry (./index.ts) and the config decoding branches
// on a mode's name.
//
// A driver file imports its mode's platform code lazily (await import()
// inside each method), so a running proxy keeps only its own mode resident.
import type { ResolvedConfig } from '../../core/config/types.js';
import type { Clock } from '../../core/clock.js';
import type { Dataplane, DataplaneConfig, IPFamily, ProxyMode, SyncState } from '../../core/types.js';
import type { SyncFailureCounterKind } from '../../engine/syncfailures.js';
import type { ChainDiff } from '../../dataplane/iptables/diff.js';
import type { ConntrackTable } from '../../platform/conntrack.js';
import type { CommandRunner } from '../../platform/exec.js';
import type { Logger } from '../../platform/logger.js';
import type { ProxyMetrics } from '../../platform/metrics.js';
import type { StatusAnswer } from '../explaindump.js';
import type { ServiceSource } from '../explainservice.js';
import type { EbpfFlags, RunCommand } from '../options.js';

/** What a mode's datapath is built from. */
export interface DataplaneDeps {
  readonly config: DataplaneConfig;
  readonly resolved: ResolvedConfig;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: ProxyMetrics;
  readonly syncPeriodMs: number;
  /** Our --ebpf-* flags (ebpf mode). */
  readonly ebpf?: EbpfFlags;
  /** The conntrack table the proxy reconciles (ipvs mode flushes deleted UDP real servers through it). */
  readonly conntrack?: ConntrackTable;
}

export interface CleanupOptions {
  readonly ebpfPinRoot?: string;
  readonly excludeCIDRs?: readonly string[];
}

/** What rides along each family's datapath, beside the rules (traffic counters, localhost relays). */
export interface RiderContext {
  readonly cmd: RunCommand;
  readonly nodeIPs: Readonly<Partial<Record<IPFamily, string | null>>>;
  readonly metrics: ProxyMetrics;
  readonly log: Logger;
}

/** Reading one family's live state for `explain`. */
export interface LiveContext {
  readonly run: CommandRunner;
  readonly netns: string | null;
  readonly family: IPFamily;
  readonly pinRoot: string;
  /** The running proxy's status document, asked at most once. */
  status(): Promise<StatusAnswer>;
  /** The Service being explained (--service); null when one packet is (then a missing status is tolerated). */
  readonly service: string | null;
  /** The packet's source port (--sport), where the mode's choice depends on it. */
  readonly sport: number | null;
}

/** A saved state (`explain --from FILE`). */
export interface DumpContext {
  readonly text: string;
  readonly file: string;
  readonly family: IPFamily;
  readonly status: StatusAnswer | null;
  /** As in LiveContext. */
  readonly service: string | null;
  readonly sport: number | null;
}

/** One family's `diff`: the mode's desired state for `state`, against what the kernel holds. */
export interface DiffContext {
  readonly cmd: RunCommand;
  readonly run: CommandRunner;
  readonly netns: string | null;
  readonly family: IPFamily;
  readonly config: DataplaneConfig;
  readonly state: SyncState;
  readonly localIPs: readonly string[];
  /** The running proxy's status document (asked when wantsStatus(cmd)). */
  readonly status: StatusAnswer | null;
}

/** What `diff` found for one family. */
export interface FamilyDiff {
  readonly family: IPFamily;
  /** Number of rules/chains/elements added or removed. */
  readonly changes: number;
  readonly summary: string;
  readonly text: string;
  /** iptables: the chains that differ. */
  readonly chains?: readonly ChainDiff[];
  /** nftables: the chains and sets that differ (src/dataplane/nftables/tablediff.ts NftTableDiff[]). */
  readonly nft?: unknown;
  /** ebpf: the map entries that differ (ebpf/diff.ts EntryChange[]). */
  readonly ebpf?: unknown;
}

export interface ModeDriver {
  readonly mode: ProxyMode;
  /** Which of upstream's failure counters a failed sync increments (null: none). */
  readonly failureCounter: SyncFailureCounterKind | null;
  /**
   * The families whose datapath canary (--datapath-canary) this mode runs: each one proven by an e2e
   * test that breaks the mode's datapath (test/e2e/canary-<mode>.test.ts); empty for none.
   */
  readonly canaryFamilies: readonly IPFamily[];
  /** Whether the Service annotation kube-proxy-ts/lb-algorithm chooses endpoints in this mode. */
  readonly lbAlgorithm?: boolean;

  /** Why this host cannot run the mode (null: it can); checked before anything is changed. */
  unsupportedReason?(): Promise<string | null>;
  /** --init-only: privileged set-up the mode needs before an unprivileged proxy starts. */
  init?(cmd: RunCommand, log: Logger): Promise<void>;
  /** Upstream deprecated the mode: said at start as an error in the log and a Warning Event on the Node. */
  readonly deprecation?: { readonly log: string; readonly reason: string; readonly note: string };
  /** Whether the secondary IP family can be proxied on this host. */
  familyWorks(family: IPFamily): Promise<boolean>;
  /** One family's datapath. */
  create(d: DataplaneDeps): Promise<Dataplane>;
  /** Whether --service-traffic-metrics can count in this mode (its riders then do). */
  readonly countsTraffic: boolean;
  /** Wrap the datapaths with what rides along them (default: nothing). */
  riders?(dataplanes: Dataplane[], ctx: RiderContext): Promise<Dataplane[]>;

  /** Remove everything the mode created (--cleanup); the number of failed steps. */
  cleanup(log: Logger, o: CleanupOptions): Promise<number>;
  /**
   * After the `running` mode's first complete sync (src/cmd/handover.ts): remove this mode's leftovers,
   * never the running mode's own state, even where the two share names.
   */
  cleanupLeftovers(running: ProxyMode, log: Logger, o: CleanupOptions): Promise<void>;
  /**
   * For a mode whose state carries its established connections itself (not conntrack): stop it taking
   * new ones, so that they drain while it stays. True when such state is present: the handover then
   * waits --handover-drain-period before cleanupLeftovers.
   */
  retire?(log: Logger, o: CleanupOptions): Promise<boolean>;

  /** Whether the host (or namespace) holds this mode's state; asked in MODES' detection order. */
  detect(run: CommandRunner, family: IPFamily, pinRoot: string): Promise<boolean>;
  /** Hand `use` a view of the live state (kept open while it runs). */
  withLive<T>(ctx: LiveContext, use: (source: ServiceSource) => T): Promise<T>;
  /** Whether a saved file holds this mode's state (asked in MODES' detection order). */
  holdsDump(text: string): boolean;
  /** The view of a saved state, with the node addresses it records (null: none). */
  fromDump(d: DumpContext): Promise<{ readonly source: ServiceSource; readonly localIPs: readonly string[] | null }>;
  /** The families a saved file holds, when a file holds only one (null or absent: ask for each). */
  dumpFamilies?(text: string): IPFamily[] | null;
  /** How to save the mode's state for --from. */
  readonly saveWith: string;
  /** `explain --save`, for a mode whose state has no text form of its own: the saved state. */
  save?(pinRoot: string, localIPs: readonly string[]): Promise<string>;

  /** Whether `diff` needs the running proxy's status document. */
  diffWantsStatus(cmd: RunCommand): boolean;
  /** One family's diff. */
  diff(ctx: DiffContext): Promise<FamilyDiff>;
  /** The canary endpoint the stopped proxy's rules (or maps, under pinRoot) point at (ip, port), when its status cannot say. */
  runningCanary?(run: CommandRunner, family: IPFamily, pinRoot: string): Promise<readonly [string, number] | null>;
}
