// NftablesDataplane: the nftables mode's Dataplane for one IP family. Renders
// a transaction with the pure NftablesRenderer and applies it atomically with
// `nft -f -`. Full syncs first read the table back (`nft -j list table`) so
// only differences are written. Any failure makes the next sync full.
// The runner is injectable so tests can target a network namespace
// (`ip netns exec <ns> nft ...`).
import { ProxyError } from '../../core/errors.js';
import type { DataplaneConfig, IPFamily, SyncOutcome, SyncState } from '../../core/types.js';
import type { Dataplane } from '../../core/types.js';
import type { Clock } from '../../engine/clock.js';
import { isEndpointsMapName, nftFamily, TABLE_NAME } from '../../dataplane/nftables/names.js';
import { EMPTY_SNAPSHOT, NftablesRenderer, type KernelSnapshot } from '../../dataplane/nftables/renderer.js';
import { realClock } from '../clock.js';
import { commandRunner, type ExecResult } from '../exec.js';
import { DEFAULT_ENDPOINT_LAYOUT, type EndpointLayout } from '../../dataplane/nftables/static.js';
import type { Operation } from '../../dataplane/nftables/objects.js';
import { openNftNetlink, type NftNetlink } from './netlink.js';
import { encodeOperation, type EncodedOp, type SetKind } from './nlencode.js';
import { parseTableJSON } from './readback.js';
import { readSnapshotNetlink } from './nlreadback.js';
import { NETLINK_PROTOCOL, openNetlink, type NetlinkSocket } from '../netlink/index.js';

/** Managed set/map names -> is it a map (for element encoding). */
const SET_KINDS: ReadonlyMap<string, boolean> = new Map([
  ['cluster-ips', false],
  ['nodeport-ips', false],
  ['hairpin-connections', false],
  ['service-ips', true],
  ['service-nodeports', true],
  ['no-endpoint-services', true],
  ['no-endpoint-nodeports', true],
  ['firewall-ips', true],
]);

function setKind(name: string): SetKind | undefined {
  return SET_KINDS.get(name) ?? (isEndpointsMapName(name) ? 'endpoints' : undefined);
}

/** Runs `nft <args>` with optional stdin; rejects with ExecError on failure. Tests may script one. */
export type NftRunner = (args: readonly string[], input?: string) => Promise<ExecResult>;

/** nft through the process runner (src/platform/exec.ts): the host's, or inside a named network namespace. */
export function nftRunner(netns?: string): NftRunner {
  const run = commandRunner(netns);
  return (args, input) => run('nft', args, input === undefined ? {} : { input });
}

export interface NftablesDataplaneOptions {
  readonly config: DataplaneConfig;
  readonly runner?: NftRunner;
  readonly clock?: Clock;
  /** Endpoint selection layout (see EndpointLayout); default DEFAULT_ENDPOINT_LAYOUT. */
  readonly layout?: EndpointLayout;
  /**
   * Network namespace to work in (tests, benchmarks): `ip netns exec <ns> nft`
   * and the netlink socket opened inside it. Default: our own.
   */
  readonly netns?: string;
  /**
   * Apply partial syncs through nf_tables netlink directly when every
   * operation is supported (see nlencode.ts); default true with the lean
   * and maps layouts. Full syncs and anything unsupported use `nft -f`.
   */
  readonly fastPath?: boolean;
  /**
   * Read the table back over netlink (feature gate NFTablesNetlink) instead of
   * `nft -j list`; falls back to nft where netlink is unavailable. Default false.
   */
  readViaNetlink?: boolean;
  /** Called with each transaction's text before it is applied (debug logging). */
  readonly onTransaction?: (family: IPFamily, script: string, partial: boolean, via: 'nft' | 'netlink') => void;
}

export class NftablesDataplane implements Dataplane {
  readonly mode = 'nftables' as const;
  readonly family: IPFamily;
  private readonly renderer: NftablesRenderer;
  private readonly layout: EndpointLayout;
  private readonly runner: NftRunner;
  private readonly clock: Clock;
  /** undefined = not tried yet; null = unavailable. */
  private netlink: NftNetlink | null | undefined = undefined;
  /** The read-back socket (NFTablesNetlink): undefined = not opened yet, null = unavailable. */
  private readSock: NetlinkSocket | null | undefined = undefined;

  constructor(private readonly opts: NftablesDataplaneOptions) {
    this.family = opts.config.family;
    this.layout = opts.layout ?? DEFAULT_ENDPOINT_LAYOUT;
    this.renderer = new NftablesRenderer(opts.config, this.layout);
    this.runner = opts.runner ?? nftRunner(opts.netns);
    this.clock = opts.clock ?? realClock;
  }

  async sync(state: SyncState): Promise<SyncOutcome> {
    try {
      const snapshot = this.renderer.needsFullSync(state) ? await this.readSnapshot() : null;
      const { tx, partial, counters } = this.renderer.render(state, this.clock.now(), snapshot);
      if (tx.error) throw tx.error;
      if (tx.numOperations > 0) {
        const fast = partial ? await this.encodeFast(tx.operations) : null;
        const script = tx.toString();
        this.opts.onTransaction?.(this.family, script, partial, fast ? 'netlink' : 'nft');
        if (fast) fast.nl.apply(fast.ops, nftFamily(this.family));
        else await this.runner(['-f', '-'], script);
      }
      return { partial, counters };
    } catch (err) {
      this.renderer.reset();
      throw err instanceof ProxyError && err.code === 'KPT_SYNC_FAILED'
        ? err
        : new ProxyError('KPT_SYNC_FAILED', `nftables ${this.family} sync failed: ${(err as Error).message}`, {
            cause: err,
          });
    }
  }

  /** The whole transaction as netlink messages, or null (use nft -f). */
  private async encodeFast(ops: readonly Operation[]): Promise<{ nl: NftNetlink; ops: EncodedOp[] } | null> {
    if (!(this.opts.fastPath ?? this.layout !== 'upstream')) return null;
    if (this.netlink === undefined) this.netlink = await openNftNetlink(this.opts.netns);
    if (this.netlink === null) return null;
    const fam = nftFamily(this.family);
    const out: EncodedOp[] = [];
    for (const op of ops) {
      const e = encodeOperation(op, fam, TABLE_NAME, setKind);
      if (e === null) return null;
      out.push(e);
    }
    return { nl: this.netlink, ops: out };
  }

  /** Release the netlink socket (the dataplane can still sync through nft). */
  close(): void {
    this.netlink?.close();
    this.netlink = undefined;
    this.readSock?.close();
    this.readSock = undefined;
  }

  /** Stale chains flushed but not yet deleted (deleted by a sync >= 1 s later). */
  pendingStaleChains(): number {
    return this.renderer.pendingStaleChains().size;
  }

  /** Delete this family's kube-proxy table, if present, and nothing else. */
  async cleanup(): Promise<void> {
    await deleteTableIfPresent(this.runner, nftFamily(this.family));
    this.renderer.reset();
  }

  private async readSnapshot(): Promise<KernelSnapshot> {
    const fam = nftFamily(this.family);
    if (this.opts.readViaNetlink) {
      if (this.readSock === undefined)
        this.readSock = await openNetlink(
          NETLINK_PROTOCOL.NETFILTER,
          this.opts.netns === undefined ? {} : { netns: this.opts.netns },
        );
      if (this.readSock) return readSnapshotNetlink(this.readSock, fam, TABLE_NAME);
    }
    if (!(await tableExists(this.runner, fam))) return EMPTY_SNAPSHOT;
    // Chains, sets and maps only: listing the whole table would also render
    // every rule (at 20k Services 1.9 s, 17 MB of JSON, 370 MB in nft) when
    // the renderer needs only names and elements (0.6 s, 2.4 MB).
    const outs = await Promise.all(['chains', 'sets', 'maps'].map((what) => this.runner(['-j', 'list', what, fam])));
    const parts = outs.map((o) => parseTableJSON(o.stdout, TABLE_NAME));
    return {
      chains: parts.flatMap((p) => p.chains),
      sets: parts.flatMap((p) => p.sets),
      elements: new Map(parts.flatMap((p) => [...p.elements])),
    };
  }
}

async function tableExists(runner: NftRunner, fam: string): Promise<boolean> {
  const out = await runner(['list', 'tables', fam]);
  return out.stdout.split('\n').some((l) => l.trim() === `table ${fam} ${TABLE_NAME}`);
}

async function deleteTableIfPresent(runner: NftRunner, fam: 'ip' | 'ip6'): Promise<void> {
  if (await tableExists(runner, fam)) await runner(['delete', 'table', fam, TABLE_NAME]);
}

/**
 * Upstream nftables.CleanupLeftovers: delete `ip kube-proxy` and `ip6
 * kube-proxy` (used by --cleanup and when running another mode).
 */
export async function cleanupNftablesLeftovers(runner: NftRunner = nftRunner()): Promise<void> {
  await deleteTableIfPresent(runner, 'ip');
  await deleteTableIfPresent(runner, 'ip6');
}
