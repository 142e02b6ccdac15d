// NftWriter: how a Transaction of one of our nftables tables reaches the
// kernel, for every mode that keeps one (nftables: `kube-proxy`, userspace:
// `kube-proxy-userspace`). One nf_tables netlink batch (nlencode.ts,
// netlink.ts), applied atomically, with no `nft` process; `nft -f` of the
// transaction's text where netlink is unavailable (no koffi), with the 'nft'
// transport (a runner given: tests, `kube-proxy-ts diff`), or for a
// transaction holding an operation the encoder does not know (a bug:
// reported through onEvent).
import type { IPFamily } from '../../core/types.js';
import { nftFamily } from '../../dataplane/nftables/names.js';
import type { Transaction } from '../../dataplane/nftables/transaction.js';
import type { NftRunner } from './leftovers.js';
import type { NftMonitor } from './monitor.js';
import { openNftNetlink, type NftNetlink } from './netlink.js';
import { encodeBatchSteps, UnencodableError } from './nlencode.js';
import { runSliced } from '../slices.js';
import type { SetSchema } from './nlset.js';

export type NftTransport = 'netlink' | 'nft';

export type NftEvent = (
  level: 'debug' | 'info' | 'warn' | 'error',
  fields: Record<string, unknown>,
  msg: string,
) => void;

export interface NftWriterOptions {
  readonly family: IPFamily;
  /** Runs `nft` (the fallback, and the whole path with the 'nft' transport). */
  readonly runner: NftRunner;
  readonly transport: NftTransport;
  /** Network namespace the netlink socket is opened in (tests, benchmarks). */
  readonly netns?: string;
  /** Called with each transaction's text before it is applied (debug logging; the text is built only for it). */
  readonly onTransaction?: (family: IPFamily, script: string, partial: boolean, via: NftTransport) => void;
  /** Called after each transaction is in the kernel, with its size and path; costs nothing (no text is built). */
  readonly onApplied?: (family: IPFamily, operations: number, partial: boolean, via: NftTransport) => void;
  /** Things an operator should know: the fallback to nft and why. */
  readonly onEvent?: NftEvent;
}

export class NftWriter {
  /** undefined = not opened yet; null = unavailable (use nft). */
  private nl: NftNetlink | null | undefined = undefined;
  /** Sets and maps created so far, for encoding their elements in later batches. */
  private readonly schemas = new Map<string, SetSchema>();

  constructor(private readonly opts: NftWriterOptions) {}

  /** The netlink channel (opened on first use), or null with the 'nft' transport or where netlink is unavailable. */
  async channel(): Promise<NftNetlink | null> {
    if (this.opts.transport !== 'netlink') return null;
    if (this.nl === undefined) {
      this.nl = await openNftNetlink(this.opts.netns);
      if (this.nl === null)
        this.opts.onEvent?.('warn', { family: this.opts.family }, 'nf_tables netlink unavailable here; using nft');
    }
    return this.nl;
  }

  /** Apply `tx` atomically; a change made under `monitor` is not reported as drift. */
  async apply(tx: Transaction, partial: boolean, monitor: NftMonitor | null): Promise<void> {
    const { family, runner } = this.opts;
    const nl = await this.channel();
    if (nl) {
      try {
        const batch = await runSliced(
          encodeBatchSteps(tx.operations, nftFamily(family), this.schemas, nl.nextSeq(), tx.table),
        );
        this.opts.onTransaction?.(family, tx.toString(), partial, 'netlink');
        if (monitor) await monitor.ownChange(() => nl.apply(batch));
        else await nl.apply(batch);
        this.opts.onApplied?.(family, tx.numOperations, partial, 'netlink');
        return;
      } catch (err) {
        if (!(err instanceof UnencodableError)) throw err;
        this.opts.onEvent?.(
          'error',
          { family, table: tx.table, operation: err.op, error: err.message },
          'nftables operation the netlink encoder does not know; this transaction goes through nft -f',
        );
      }
    }
    const script = tx.toString();
    this.opts.onTransaction?.(family, script, partial, 'nft');
    if (monitor) await monitor.ownChange(() => runner(['-f', '-'], script));
    else await runner(['-f', '-'], script);
    this.opts.onApplied?.(family, tx.numOperations, partial, 'nft');
  }

  /** Release the socket (the next apply opens a new one): after a failure, a socket may still hold replies. */
  reset(): void {
    this.nl?.close();
    this.nl = undefined;
  }
}
