// The handover from one datapath mode to another on a running node. A proxy
// that starts in mode B where mode A's state is in the kernel (the operator
// switched modes, or rolled back) leaves A's state alone until B's first
// complete sync has programmed every Service, for every IP family; only
// then does A's state go. Until that moment A keeps serving, so a switch
// has no gap in which neither mode's rules are in place (upstream removes
// the other modes' state at start, a sync before its own rules exist).
//
// Both modes can be in place at once because whichever translates a new
// connection first wins and the other then sees the endpoint's address,
// which it does not match: the ebpf programs run before netfilter; among
// the netfilter modes, iptables and nftables DNAT at the same hook and
// either result is correct; IPVS sees a connection only when nothing has
// translated it before. Established connections are carried across as
// follows, which docs/migration.md tabulates per pair:
//   - a connection iptables, nftables or IPVS translated has a conntrack
//     entry with its NAT, which any next mode leaves alone (the ebpf
//     programs pass packets of such flows to netfilter);
//   - an ebpf or IPVS connection needs that mode's own state (the ebpf
//     connection map; IPVS's connection table and its kube-ipvs0
//     addresses): those modes are first retired (no new connections) and
//     removed only after --handover-drain-period.
import type { IPFamily, ProxyMode } from '../core/types.js';
import { nullObserver, type ProxierObserver } from '../engine/observer.js';
import type { Logger } from '../platform/logger.js';
import { DETECTION_ORDER } from './modes/index.js';
import type { CleanupOptions, ModeDriver } from './modes/driver.js';

/** What the handover asks of a mode's driver. */
export type HandoverDriver = Pick<ModeDriver, 'mode' | 'retire' | 'cleanupLeftovers'>;

/** Logged when every other mode's state is gone (tests wait for it). */
export const HANDOVER_DONE = "Handover done: no other mode's state is left";

/** Resolves once every family has completed a sync. */
export class FirstSyncs {
  private readonly waiting: Set<IPFamily>;
  private resolve!: () => void;
  readonly done: Promise<void>;
  readonly observer: ProxierObserver;

  constructor(families: readonly IPFamily[]) {
    this.waiting = new Set(families);
    this.done = new Promise((r) => (this.resolve = r));
    this.observer = {
      ...nullObserver,
      syncSucceeded: (report) => {
        if (this.waiting.delete(report.family) && this.waiting.size === 0) this.resolve();
      },
    };
  }
}

export interface HandoverOptions extends CleanupOptions {
  /** --handover-drain-period in ms. */
  readonly drainMs: number;
}

/**
 * The running mode has synced: retire every other mode and wait out the
 * drain when one carries its own connections. Returns false when `signal`
 * ended the drain (the state then stays, and the next start hands over
 * again); then removeOthers() removes it.
 */
export async function retireOthers(
  mode: ProxyMode,
  log: Logger,
  o: HandoverOptions,
  signal: AbortSignal,
  drivers: readonly HandoverDriver[] = DETECTION_ORDER,
): Promise<boolean> {
  const retired: ProxyMode[] = [];
  for (const d of drivers) if (d.mode !== mode && (await d.retire?.(log, o))) retired.push(d.mode);
  if (retired.length > 0 && o.drainMs > 0) {
    log.info(
      { modes: retired, drainSeconds: o.drainMs / 1000 },
      'Previous mode takes no new connections; its established ones drain before its state is removed',
    );
    return sleep(o.drainMs, signal);
  }
  return !signal.aborted;
}

/**
 * Remove every other mode's state. The caller runs it between two syncs of
 * the running mode (in the sync runner), so that the drift watches, which
 * tell the running mode's own writes from others' by when they happen, do
 * not take these writes for a change to our rules.
 */
export async function removeOthers(
  mode: ProxyMode,
  log: Logger,
  o: CleanupOptions,
  drivers: readonly HandoverDriver[] = DETECTION_ORDER,
): Promise<void> {
  for (const d of drivers) if (d.mode !== mode) await d.cleanupLeftovers(mode, log, o);
  log.info({ mode }, HANDOVER_DONE);
}

/** True when the time passed, false when the signal came first. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      resolve(false);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
