// ipvs mode's driver: the kernel's IPVS table, upstream's ipsets and the
// iptables chains beside them. Deprecated upstream (KEP-5495); its real-kernel
// tests run in a QEMU guest.
import type { ResolvedConfig } from '../../../core/config/types.js';
import { hostRunner } from '../../../platform/exec.js';
import type { SharedRules } from '../../../dataplane/iptables/jumps.js';
import type { DrainBounds } from '../../../platform/ipvs/graceful.js';
import type { IpvsKernelDeps } from '../../../platform/ipvs/kernel.js';
import type { IpvsModeOptions } from '../../../platform/ipvs/dataplane.js';
import type { Logger } from '../../../platform/logger.js';
import { ipv6Supported } from '../../../platform/netinfo.js';
import type { RunCommand } from '../../options.js';
import type { ModeDriver } from '../driver.js';
import { isIpvsBundle } from '../dumps.js';
import { dumpStatusAddresses, familyHasIptables, statusAddressesFor } from '../common.js';

const NO_STATUS = 'the saved state names no Service; add --status FILE (kube-proxy-ts status -o json from that node)';

export const ipvsDriver: ModeDriver = {
  mode: 'ipvs',
  // Upstream's IPVS proxier counts its failed iptables-restore runs.
  failureCounter: 'iptables-restore',
  // IPv4 only: IPVS runs only in the QEMU guest, where the IPv6 canary has not been tried yet
  // (test/e2e/canary-ipvs.test.ts proves the IPv4 one there).
  canaryFamilies: ['IPv4'],
  countsTraffic: false,
  familyWorks: familyHasIptables,
  init: ipvsInit,
  // Upstream logs this and records an IPVSDeprecation event since 1.35 (KEP-5495).
  deprecation: {
    log: 'ipvs mode is deprecated upstream and may be dropped in a later release; nftables mode is its successor',
    reason: 'IPVSDeprecation',
    note: 'The ipvs proxy mode is deprecated upstream; nftables is its successor.',
  },

  async create(d) {
    const [{ IpvsDataplane }, { openKernel }, { procSysctl }, { Conntrack, flushUDPFlows }] = await Promise.all([
      import('../../../platform/ipvs/dataplane.js'),
      import('../../../platform/ipvs/kernel.js'),
      import('../../../platform/iptables/index.js'),
      import('../../../platform/conntrack.js'),
    ]);
    const ct = d.conntrack ?? new Conntrack();
    const drainBounds = ipvsDrainBounds(process.env, (msg) => d.log.warn(msg));
    return new IpvsDataplane({
      config: d.config,
      ipvs: ipvsModeOptions(d.resolved),
      kernel: () => openKernel(hostRunner, procSysctl),
      run: hostRunner,
      clock: d.clock,
      syncPeriodMs: d.syncPeriodMs,
      ...(drainBounds ? { drainBounds } : {}),
      flushUDP: async (family, deleted) => {
        const r = await flushUDPFlows(
          ct,
          family,
          deleted.map(({ vs, rs }) => ({
            origDst: vs.address,
            origDstPort: vs.port,
            replySrc: rs.address,
            replySrcPort: rs.port,
          })),
        );
        for (const err of r.errors) d.log.warn({ err }, 'conntrack delete failed');
      },
      onEvent: (level, fields, msg) => d.log[level](fields, msg),
    });
  },

  cleanup: (log, o) => cleanupIpvs(log, { always: true, excludeCIDRs: o.excludeCIDRs ?? [] }),
  async cleanupLeftovers(running, log, o) {
    if (running === 'ipvs') return;
    // iptables mode writes some of the same chains and jump rules: after a handover they are its own.
    const keep = running === 'iptables' ? await iptablesRules() : undefined;
    await cleanupIpvs(log, { always: false, excludeCIDRs: o.excludeCIDRs ?? [], ...(keep ? { keep } : {}) });
  },
  async retire(log) {
    // Nothing to stop: every other mode translates a new connection before IPVS sees it (netfilter's
    // DNAT hooks run before IPVS's, and the ebpf programs before netfilter). Established IPVS
    // connections are not new to conntrack, so they keep going through IPVS while its state stays.
    const present = await withIpvsKernel(log, async (k) => {
      const { ipvsLeftoversPresent } = await import('../../../platform/ipvs/cleanup.js');
      return ipvsLeftoversPresent(k);
    });
    return present ?? false;
  },

  async detect(run, family) {
    const save = await run(family === 'IPv4' ? 'iptables-save' : 'ip6tables-save', ['-t', 'nat'], {
      allowFailure: true,
    });
    return save.code === 0 && /^:KUBE-(NODE-PORT|LOAD-BALANCER) /m.test(save.stdout);
  },
  async withLive(ctx, use) {
    const [{ readLiveIpvs }, { explainIpvsFake }] = await Promise.all([import('./live.js'), import('./explain.js')]);
    const { addresses } = await statusAddressesFor('ipvs', ctx);
    const { fake } = await readLiveIpvs(ctx.run, ctx.netns, ctx.family);
    return use({ mode: 'ipvs', addresses, trace: (packet, locals) => explainIpvsFake(fake, packet, locals) });
  },
  holdsDump: isIpvsBundle,
  async fromDump(d) {
    const [{ ipvsFromBundle }, { explainIpvsFake }] = await Promise.all([import('./live.js'), import('./explain.js')]);
    const bundle = ipvsFromBundle(d.text, d.family, d.file);
    const { addresses } = await dumpStatusAddresses(d, NO_STATUS);
    return {
      source: { mode: 'ipvs', addresses, trace: (p, l) => explainIpvsFake(bundle.fake, p, l) },
      localIPs: bundle.localIPs,
    };
  },
  saveWith: '{ ipvsadm -Sn; ipset save; iptables-save; ip -o addr; } > FILE',

  diffWantsStatus: (cmd) => cmd.datapathCanary,
  async diff(ctx) {
    const { diffIpvsFamily } = await import('./diff.js');
    return diffIpvsFamily({
      run: ctx.run,
      netns: ctx.netns,
      family: ctx.family,
      config: ctx.config,
      ipvs: ipvsModeOptions(ctx.cmd.resolved),
      state: ctx.state,
      syncPeriodMs: ctx.cmd.timing.syncPeriodMs,
    });
  },
};

const seconds = (ns: number) => Math.round(ns / 1e9);

/** The --ipvs-* settings as IPVS mode takes them (timeouts in seconds). */
export function ipvsModeOptions(resolved: ResolvedConfig): IpvsModeOptions {
  const v = resolved.ipvs;
  return {
    scheduler: v.scheduler,
    excludeCIDRs: v.excludeCIDRs,
    strictARP: v.strictARP,
    tcpTimeout: seconds(v.tcpTimeout),
    tcpFinTimeout: seconds(v.tcpFinTimeout),
    udpTimeout: seconds(v.udpTimeout),
  };
}

/**
 * How long IPVS mode lets an unwanted real server drain before deleting it:
 * undefined (IPVS mode's DEFAULT_DRAIN_BOUNDS) unless KPT_IPVS_DRAIN_TIMEOUT
 * gives seconds (for both TCP and UDP). An environment switch for tests, read
 * only here.
 */
export function ipvsDrainBounds(
  env: Readonly<Record<string, string | undefined>> = process.env,
  warn: (msg: string) => void = () => {},
): DrainBounds | undefined {
  const v = env['KPT_IPVS_DRAIN_TIMEOUT'];
  if (v === undefined || v === '') return undefined;
  const s = Number(v);
  if (!Number.isFinite(s) || s < 0) {
    warn(`KPT_IPVS_DRAIN_TIMEOUT=${v} is not a number of seconds; using the defaults`);
    return undefined;
  }
  return { tcpMs: s * 1000, udpMs: s * 1000 };
}

/** --init-only in IPVS mode: the sysctls and timeouts upstream's NewProxier sets before it returns. */
async function ipvsInit(cmd: RunCommand, log: Logger): Promise<void> {
  const [{ IpvsKernel }, { ensureIpvsSysctls }, { procSysctl }] = await Promise.all([
    import('../../../platform/ipvs/client.js'),
    import('../../../platform/ipvs/sysctls.js'),
    import('../../../platform/iptables/index.js'),
  ]);
  const v = cmd.resolved.ipvs;
  await ensureIpvsSysctls(procSysctl, 'IPv4', v.strictARP, (fields, msg) => log.info(fields, msg));
  if (v.tcpTimeout > 0 || v.tcpFinTimeout > 0 || v.udpTimeout > 0) {
    const k = await IpvsKernel.open();
    try {
      k.setTimeouts({ tcp: seconds(v.tcpTimeout), tcpFin: seconds(v.tcpFinTimeout), udp: seconds(v.udpTimeout) });
    } finally {
      k.close();
    }
  }
}

/** Run `use` with the IPVS kernel interfaces; null (and nothing run) when the kernel has no IPVS. */
async function withIpvsKernel<T>(log: Logger, use: (k: IpvsKernelDeps) => Promise<T>): Promise<T | null> {
  let k;
  try {
    // The IPVS generic netlink family first: without it (no ip_vs in the
    // kernel) there is nothing to do, and the rest of IPVS mode stays unloaded.
    const { IpvsKernel } = await import('../../../platform/ipvs/client.js');
    (await IpvsKernel.open()).close();
    const [{ openKernel }, { procSysctl }] = await Promise.all([
      import('../../../platform/ipvs/kernel.js'),
      import('../../../platform/iptables/index.js'),
    ]);
    k = await openKernel(hostRunner, procSysctl);
  } catch (e) {
    log.debug({ err: String(e) }, 'no IPVS here: nothing of IPVS mode to look at');
    return null;
  }
  try {
    return await use(k);
  } finally {
    k.close();
  }
}

/** iptables mode's chains and jump rules, which IPVS mode's cleanup leaves to a running iptables mode. */
async function iptablesRules(): Promise<SharedRules> {
  const { NAT_CHAINS_TO_REMOVE, FILTER_CHAINS_TO_REMOVE } = await import('../../../platform/iptables/cleanup.js');
  const { IPTABLES_JUMP_CHAINS } = await import('../../../dataplane/iptables/jumps.js');
  return { nat: NAT_CHAINS_TO_REMOVE, filter: FILTER_CHAINS_TO_REMOVE, jumps: IPTABLES_JUMP_CHAINS };
}

/**
 * IPVS mode's state: only when the kernel has IPVS and something of ours is
 * there (`always`: --cleanup). Runs before the iptables cleanup, whose chains
 * it shares, so the rules matching our ipsets are gone before the sets.
 */
async function cleanupIpvs(
  log: Logger,
  o: { always: boolean; excludeCIDRs: readonly string[]; keep?: SharedRules },
): Promise<number> {
  const errors = await withIpvsKernel(log, async (k) => {
    const { cleanupIpvsLeftovers, ipvsLeftoversPresent } = await import('../../../platform/ipvs/cleanup.js');
    if (!o.always && !(await ipvsLeftoversPresent(k))) return 0;
    const families = (['IPv4', 'IPv6'] as const).filter((f) => f === 'IPv4' || ipv6Supported());
    const r = await cleanupIpvsLeftovers(k, {
      families,
      excludeCIDRs: o.excludeCIDRs,
      ...(o.keep ? { keep: o.keep } : {}),
    });
    for (const e of r.errors) log.error({ err: String(e) }, 'ipvs cleanup step failed');
    if (r.virtualServers + r.chains + r.ipsets > 0 || r.link)
      log.info(
        { virtualServers: r.virtualServers, chains: r.chains, ipsets: r.ipsets, link: r.link },
        'Removed IPVS state',
      );
    return r.errors.length;
  });
  return errors ?? 0;
}
