// NftablesDataplane: the nftables mode's Dataplane for one IP family. Plans
// a transaction with the nftables driver on the one reconciler (planner.ts)
// and applies it atomically as one nf_tables netlink batch (writer.ts,
// nlencode.ts); full syncs first read the table back over netlink, and the
// reconciler adopts it, so only differences are written. No `nft` process on
// the sync path.
//
// The `nft` transport (`nft -f`, and `nft -j list` for the read-back) remains
// for `kube-proxy-ts diff`, which runs this dataplane against an in-memory
// copy of the live table through a runner, and as the fallback where netlink
// sockets are unavailable (no koffi) or a transaction holds an operation the
// encoder does not know (a bug: reported through onEvent). Any failure, and
// any change of the table by another actor, makes the reconciler forget what
// it knew (failed()), so the next sync is full against the table read back.
import { runSliced } from '../slices.js';
import { ProxyError } from '../../core/errors.js';
import type { DataplaneConfig, Drift, IPFamily, SyncOutcome, SyncState } from '../../core/types.js';
import type { Dataplane } from '../../core/types.js';
import type { Clock } from '../../core/clock.js';
import { nftFamily, TABLE_NAME } from '../../dataplane/nftables/names.js';
import { EMPTY_SNAPSHOT, type KernelSnapshot, type RenderResult } from '../../dataplane/nftables/driver.js';
import { realClock } from '../clock.js';
import { DEFAULT_ENDPOINT_LAYOUT, type EndpointLayout } from '../../dataplane/nftables/static.js';
import { NftMonitor, type NftChange } from './monitor.js';
import { NftablesPlanner } from './planner.js';
import { parseTableJSON } from './readback.js';
import { deleteTableIfPresent, nftRunner, tableExists, type NftRunner } from './leftovers.js';
import { NftWriter, type NftEvent, type NftTransport } from './writer.js';

export { cleanupNftablesLeftovers, nftRunner, type NftRunner } from './leftovers.js';
export type { NftTransport } from './writer.js';

export interface NftablesDataplaneOptions {
  readonly config: DataplaneConfig;
  readonly runner?: NftRunner;
  readonly clock?: Clock;
  /** Endpoint selection layout (see EndpointLayout); default DEFAULT_ENDPOINT_LAYOUT. */
  readonly layout?: EndpointLayout;
  /**
   * Network namespace to work in (tests, benchmarks): the netlink socket is
   * opened inside it, and `ip netns exec <ns> nft` is the nft runner.
   */
  readonly netns?: string;
  /**
   * 'netlink' (the default without a runner): batches and read-back over
   * nf_tables netlink, falling back to nft only where netlink is unavailable.
   * 'nft' (the default with a runner): `nft -f` and `nft -j list`.
   */
  readonly transport?: NftTransport;
  /** Called with each transaction's text before it is applied (debug logging; the text is built only for it). */
  readonly onTransaction?: (family: IPFamily, script: string, partial: boolean, via: NftTransport) => void;
  /** Called after each transaction is in the kernel, with its size and path; costs nothing (no text is built). */
  readonly onApplied?: (family: IPFamily, operations: number, partial: boolean, via: NftTransport) => void;
  /** Things an operator should know: the fallback to nft and why. */
  readonly onEvent?: NftEvent;
}

export class NftablesDataplane implements Dataplane {
  readonly mode = 'nftables' as const;
  readonly family: IPFamily;
  private readonly planner: NftablesPlanner;
  private readonly runner: NftRunner;
  private readonly clock: Clock;
  private readonly transport: NftTransport;
  /** Applies transactions: a netlink batch, or nft -f. */
  private readonly writer: NftWriter;
  /** watchDrift()'s listener, and the monitor once opened (null: unavailable, undefined: not yet). */
  private onDrift: ((drift: Drift) => void) | null = null;
  private monitor: NftMonitor | null | undefined = undefined;
  private unsubscribe: (() => void) | null = null;
  /** A sliced plan is running; a drift seen meanwhile fails the planner once it is done. */
  private planning = false;
  private driftWhilePlanning = false;

  constructor(private readonly opts: NftablesDataplaneOptions) {
    this.family = opts.config.family;
    this.planner = new NftablesPlanner(opts.config, opts.layout ?? DEFAULT_ENDPOINT_LAYOUT);
    this.runner = opts.runner ?? nftRunner(opts.netns);
    this.clock = opts.clock ?? realClock;
    this.transport = opts.transport ?? (opts.runner ? 'nft' : 'netlink');
    this.writer = new NftWriter({
      family: this.family,
      runner: this.runner,
      transport: this.transport,
      ...(opts.netns !== undefined ? { netns: opts.netns } : {}),
      ...(opts.onTransaction ? { onTransaction: opts.onTransaction } : {}),
      ...(opts.onApplied ? { onApplied: opts.onApplied } : {}),
      ...(opts.onEvent ? { onEvent: opts.onEvent } : {}),
    });
  }

  /**
   * Tell `onDrift` when another actor changes or deletes our table, a
   * chain, set or element of it (nf_tables notifications, monitor.ts); the
   * caller then makes the next sync full. Only with the netlink transport;
   * the monitor opens with the first sync.
   */
  watchDrift(onDrift: (drift: Drift) => void): void {
    this.onDrift = onDrift;
  }

  /** No table of ours in the family (asked over netlink; with the nft transport: never said). */
  async startsEmpty(): Promise<boolean> {
    const nl = await this.writer.channel();
    return nl !== null && !nl.hasTable(nftFamily(this.family));
  }

  async sync(state: SyncState): Promise<SyncOutcome> {
    try {
      await this.openMonitor();
      const live = this.planner.needsFullSync(state) ? await this.readSnapshot() : null;
      // In slices: a plan of 10k Services would otherwise hold the event loop for its whole length.
      // Until it is done the planner must not be told of a drift: it is told right after.
      this.planning = true;
      let plan: RenderResult;
      try {
        plan = await runSliced(this.planner.planSteps(state, this.clock.now(), live));
      } finally {
        this.planning = false;
        if (this.driftWhilePlanning) {
          this.driftWhilePlanning = false;
          this.planner.failed();
        }
      }
      const { tx, partial, counters } = plan;
      if (tx.error) throw tx.error;
      if (tx.numOperations > 0) await this.writer.apply(tx, partial, this.monitor ?? null);
      return { partial, counters };
    } catch (err) {
      this.planner.failed();
      // A socket left mid-exchange may still hold replies; start afresh.
      this.writer.reset();
      throw err instanceof ProxyError && err.code === 'KPT_SYNC_FAILED'
        ? err
        : new ProxyError('KPT_SYNC_FAILED', `nftables ${this.family} sync failed: ${(err as Error).message}`, {
            cause: err,
          });
    }
  }

  private async openMonitor(): Promise<void> {
    if (this.monitor !== undefined || !this.onDrift || this.transport !== 'netlink') return;
    const listener = this.onDrift;
    this.monitor = await NftMonitor.open(this.opts.netns);
    if (!this.monitor) {
      this.opts.onEvent?.(
        'warn',
        { family: this.family },
        'nf_tables monitor unavailable; a table changed by others is repaired only by the next full sync',
      );
      return;
    }
    const ours = (c: NftChange) => c.table === TABLE_NAME;
    this.unsubscribe = this.monitor.subscribe(nftFamily(this.family), ours, (drift) => {
      // Whatever the reconciler remembers of the table may be wrong now.
      if (this.planning) this.driftWhilePlanning = true;
      else this.planner.failed();
      listener(drift);
    });
  }

  /** Release the netlink sockets (the next sync opens a new one; the monitor stays closed). */
  close(): void {
    this.writer.reset();
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.monitor = null;
  }

  /** Stale chains flushed but not yet deleted (deleted by a sync >= 1 s later). */
  pendingStaleChains(): number {
    return this.planner.pendingStaleChains().size;
  }

  /** Delete this family's kube-proxy table, if present, and nothing else. */
  async cleanup(): Promise<void> {
    await deleteTableIfPresent(this.runner, nftFamily(this.family));
    this.planner.failed();
  }

  private async readSnapshot(): Promise<KernelSnapshot> {
    const fam = nftFamily(this.family);
    const nl = await this.writer.channel();
    if (nl) return nl.readSnapshot(fam);
    if (!(await tableExists(this.runner, fam))) return EMPTY_SNAPSHOT;
    // Chains, sets and maps only: listing the whole table would also have nft
    // render every rule, costing far more time and memory in a large cluster,
    // when the reconciler needs only names and elements.
    const outs = await Promise.all(['chains', 'sets', 'maps'].map((what) => this.runner(['-j', 'list', what, fam])));
    const parts = outs.map((o) => parseTableJSON(o.stdout, TABLE_NAME));
    return {
      chains: parts.flatMap((p) => p.chains),
      sets: parts.flatMap((p) => p.sets),
      elements: new Map(parts.flatMap((p) => [...p.elements])),
    };
  }
}
