// --cleanup and the mode-switch cleanup at start (upstream platformCleanup):
// each mode removes only what it created. Errors are logged and counted, and
// --cleanup exits non-zero if any step failed.
import { cleanupLeftovers, hostRunner, Iptables } from '../platform/iptables/index.js';
import { cleanupNftablesLeftovers } from '../platform/nftables/dataplane.js';
import type { Logger } from '../platform/logger.js';
import { cleanupUserspaceLeftovers } from '../platform/userspace/dataplane.js';
import { cleanupEbpfMode } from '../platform/ebpf/dataplane.js';

async function cleanupIptables(log: Logger): Promise<number> {
  let errors = 0;
  for (const family of ['IPv4', 'IPv6'] as const) {
    const ipt = new Iptables(family, hostRunner);
    try {
      const r = await cleanupLeftovers(ipt, { wholeTableCache: true });
      for (const e of r.errors) log.error({ family, err: String(e) }, 'iptables cleanup step failed');
      errors += r.errors.length;
      if (r.chainsDeleted + r.jumpRulesDeleted > 0)
        log.info({ family, chains: r.chainsDeleted, jumps: r.jumpRulesDeleted }, 'Removed iptables rules');
    } catch (e) {
      // No ip6tables on this host is not an error for cleanup.
      log.debug({ family, err: String(e) }, 'iptables cleanup skipped');
    }
  }
  return errors;
}

async function cleanupNftables(log: Logger): Promise<number> {
  try {
    await cleanupNftablesLeftovers();
    return 0;
  } catch (e) {
    log.error({ err: String(e) }, 'nftables cleanup failed');
    return 1;
  }
}

async function cleanupUserspace(log: Logger): Promise<number> {
  const errors = await cleanupUserspaceLeftovers().catch((e: unknown) => [e]);
  for (const e of errors) log.error({ err: String(e) }, 'userspace cleanup failed');
  return errors.length;
}

async function cleanupEbpf(log: Logger, pinRoot?: string): Promise<number> {
  try {
    const removed = await cleanupEbpfMode(pinRoot);
    if (removed.length > 0) log.info({ removed }, 'Removed ebpf programs and pinned maps');
    return 0;
  } catch (e) {
    log.error({ err: String(e) }, 'ebpf cleanup failed');
    return 1;
  }
}

/** --cleanup: every mode's state. Returns the number of failed steps. */
export async function cleanupAll(log: Logger, ebpfPinRoot?: string): Promise<number> {
  const errors =
    (await cleanupIptables(log)) +
    (await cleanupNftables(log)) +
    (await cleanupUserspace(log)) +
    (await cleanupEbpf(log, ebpfPinRoot));
  log.info({ errors }, 'Cleanup finished');
  return errors;
}

/** At start: remove what other modes may have left (upstream runs the same). */
export async function cleanupOtherModes(mode: string, log: Logger, ebpfPinRoot?: string): Promise<void> {
  if (mode !== 'iptables') await cleanupIptables(log);
  if (mode !== 'nftables') await cleanupNftables(log);
  if (mode !== 'userspace') await cleanupUserspace(log);
  if (mode !== 'ebpf') await cleanupEbpf(log, ebpfPinRoot);
}
