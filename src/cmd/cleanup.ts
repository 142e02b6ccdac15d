// --cleanup and the mode-switch cleanup at start (upstream platformCleanup):
// each mode removes only what it created. Errors are logged and counted, and
// --cleanup exits non-zero if any step failed.
//
// Each mode's cleanup code is imported when that step runs, and the IPVS
// step only where the kernel has IPVS: the start-up cleanup runs in every
// proxy, which should not keep the other modes' code resident.
import type { ProxyMode } from '../core/types.js';
import { hostRunner } from '../platform/exec.js';
import type { Logger } from '../platform/logger.js';
import { ipv6Supported } from '../platform/netinfo.js';

async function cleanupIptables(log: Logger): Promise<number> {
  const { cleanupLeftovers, Iptables } = await import('../platform/iptables/index.js');
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
    const { cleanupNftablesLeftovers } = await import('../platform/nftables/leftovers.js');
    await cleanupNftablesLeftovers();
    const { cleanupTrafficCounters } = await import('../platform/nftables/traffic.js');
    await cleanupTrafficCounters(hostRunner);
    return 0;
  } catch (e) {
    log.error({ err: String(e) }, 'nftables cleanup failed');
    return 1;
  }
}

async function cleanupUserspace(log: Logger): Promise<number> {
  const { cleanupUserspaceLeftovers } = await import('../platform/userspace/leftovers.js');
  const errors = await cleanupUserspaceLeftovers().catch((e: unknown) => [e]);
  for (const e of errors) log.error({ err: String(e) }, 'userspace cleanup failed');
  return errors.length;
}

async function cleanupEbpf(log: Logger, pinRoot?: string): Promise<number> {
  try {
    const { cleanupEbpfMode } = await import('../platform/ebpf/cleanup.js');
    const removed = await cleanupEbpfMode(pinRoot);
    if (removed.length > 0) log.info({ removed }, 'Removed ebpf programs and pinned maps');
    return 0;
  } catch (e) {
    log.error({ err: String(e) }, 'ebpf cleanup failed');
    return 1;
  }
}

/**
 * IPVS mode's state: only when the kernel has IPVS and something of ours is
 * there (`always`: --cleanup). Runs before the iptables cleanup, whose chains
 * it shares, so the rules matching our ipsets are gone before the sets.
 */
async function cleanupIpvs(log: Logger, o: { always: boolean; excludeCIDRs: readonly string[] }): Promise<number> {
  let k;
  try {
    // The IPVS generic netlink family first: without it (no ip_vs in the
    // kernel) there is nothing to do, and the rest of IPVS mode stays unloaded.
    const { IpvsKernel } = await import('../platform/ipvs/client.js');
    (await IpvsKernel.open()).close();
    const [{ openKernel }, { procSysctl }] = await Promise.all([
      import('../platform/ipvs/kernel.js'),
      import('../platform/iptables/index.js'),
    ]);
    k = await openKernel(hostRunner, procSysctl);
  } catch (e) {
    log.debug({ err: String(e) }, 'ipvs cleanup skipped: no IPVS here');
    return 0;
  }
  try {
    const { cleanupIpvsLeftovers, ipvsLeftoversPresent } = await import('../platform/ipvs/cleanup.js');
    if (!o.always && !(await ipvsLeftoversPresent(k))) return 0;
    const families = (['IPv4', 'IPv6'] as const).filter((f) => f === 'IPv4' || ipv6Supported());
    const r = await cleanupIpvsLeftovers(k, { families, excludeCIDRs: o.excludeCIDRs });
    for (const e of r.errors) log.error({ err: String(e) }, 'ipvs cleanup step failed');
    if (r.virtualServers + r.chains + r.ipsets > 0 || r.link)
      log.info(
        { virtualServers: r.virtualServers, chains: r.chains, ipsets: r.ipsets, link: r.link },
        'Removed IPVS state',
      );
    return r.errors.length;
  } finally {
    k.close();
  }
}

/** --cleanup: every mode's state. Returns the number of failed steps. */
export async function cleanupAll(
  log: Logger,
  o: { ebpfPinRoot?: string; excludeCIDRs?: readonly string[] } = {},
): Promise<number> {
  const errors =
    (await cleanupIpvs(log, { always: true, excludeCIDRs: o.excludeCIDRs ?? [] })) +
    (await cleanupIptables(log)) +
    (await cleanupNftables(log)) +
    (await cleanupUserspace(log)) +
    (await cleanupEbpf(log, o.ebpfPinRoot));
  log.info({ errors }, 'Cleanup finished');
  return errors;
}

/**
 * At start: remove what other modes may have left (upstream runs the same).
 * iptables and IPVS modes share chain names: each removes the other's state
 * only when that state is there (a switch between them), never on a restart.
 */
export async function cleanupOtherModes(
  mode: ProxyMode,
  log: Logger,
  o: { ebpfPinRoot?: string; excludeCIDRs?: readonly string[] } = {},
): Promise<void> {
  if (mode !== 'ipvs') await cleanupIpvs(log, { always: false, excludeCIDRs: o.excludeCIDRs ?? [] });
  if (mode === 'ipvs') {
    if (await iptablesModeLeftovers()) await cleanupIptables(log);
  } else if (mode !== 'iptables') await cleanupIptables(log);
  if (mode !== 'nftables') await cleanupNftables(log);
  if (mode !== 'userspace') await cleanupUserspace(log);
  if (mode !== 'ebpf') await cleanupEbpf(log, o.ebpfPinRoot);
}

/** iptables mode's own chains (KUBE-NODEPORTS, KUBE-SVC-*...) exist in either family. */
async function iptablesModeLeftovers(): Promise<boolean> {
  const { Iptables } = await import('../platform/iptables/index.js');
  for (const family of ['IPv4', 'IPv6'] as const) {
    try {
      const save = await new Iptables(family, hostRunner).save('nat');
      if (/^:(KUBE-NODEPORTS|KUBE-SVC-|KUBE-SEP-|KUBE-EXT-|KUBE-SVL-|KUBE-FW-)/m.test(save)) return true;
    } catch {
      // no ip6tables: nothing of that family
    }
  }
  return false;
}
