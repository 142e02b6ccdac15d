// ebpf mode's driver: our BPF programs (src/bpf) and the maps they read,
// written through libbpf; per-Service traffic counted in the maps.
import { availableParallelism } from 'node:os';
import type { ResolvedConfig } from '../../../core/config/types.js';
import { BugError } from '../../../core/errors.js';
import type { Logger } from '../../../platform/logger.js';
import type { ModeDriver } from '../driver.js';
import { isEbpfDump } from '../dumps.js';
import { familyInKernel } from '../common.js';

export const ebpfDriver: ModeDriver = {
  mode: 'ebpf',
  failureCounter: null,
  canaryFamilies: ['IPv4', 'IPv6'],
  lbAlgorithm: true,
  countsTraffic: true,
  familyWorks: familyInKernel,

  async create(d) {
    if (!d.ebpf) throw new BugError('ebpf mode needs its options');
    const { EbpfDataplane } = await import('../../../platform/ebpf/dataplane.js');
    return new EbpfDataplane({
      config: d.config,
      ebpf: { ...d.ebpf, ctEntries: ebpfConnectionEntries(d.resolved) },
      onEvent: (level, fields, msg) => d.log[level](fields, msg),
    });
  },
  async riders(dataplanes, ctx) {
    const { withEbpfTrafficCounters } = await import('./traffic.js');
    return withEbpfTrafficCounters(ctx.cmd.serviceTrafficMetrics, dataplanes, ctx.metrics, ctx.log);
  },

  cleanup: (log, o) => cleanupEbpf(log, o.ebpfPinRoot),
  async cleanupLeftovers(running, log, o) {
    if (running !== 'ebpf') await cleanupEbpf(log, o.ebpfPinRoot);
  },
  async retire(log, o) {
    // The connection map translates established flows both ways; conntrack has no NAT for them.
    try {
      const { stopNewFlows } = await import('../../../platform/ebpf/retire.js');
      const removed = stopNewFlows(o.ebpfPinRoot);
      if (removed !== null) log.info({ addresses: removed }, 'ebpf programs take no new connections');
      return removed !== null;
    } catch (e) {
      log.error({ err: String(e) }, 'could not stop the ebpf programs taking new connections');
      return false;
    }
  },

  async detect(_run, _family, pinRoot) {
    const { PinnedMaps } = await import('../../../platform/ebpf/pinned.js');
    return PinnedMaps.present(pinRoot);
  },
  async withLive(ctx, use) {
    const { ebpfServiceAddresses, explainEbpfMaps, liveIfindexOf, withPinnedMaps } = await import('./explain.js');
    const ifindexOf = await liveIfindexOf();
    return withPinnedMaps(ctx.pinRoot, (maps) =>
      use({
        mode: 'ebpf',
        addresses: (service, family) => ebpfServiceAddresses(maps, service, family),
        trace: (packet, locals) => explainEbpfMaps(maps, packet, locals, { sport: ctx.sport, ifindexOf }),
      }),
    );
  },
  holdsDump: isEbpfDump,
  async fromDump(d) {
    const { ebpfFromDump, ebpfServiceAddresses, explainEbpfMaps } = await import('./explain.js');
    const saved = ebpfFromDump(d.text, d.file);
    return {
      source: {
        mode: 'ebpf',
        addresses: (service, family) => ebpfServiceAddresses(saved.maps, service, family),
        trace: (p, l) => explainEbpfMaps(saved.maps, p, l, { sport: d.sport, ifindexOf: saved.ifindexOf }),
      },
      localIPs: saved.localIPs,
    };
  },
  saveWith: 'kube-proxy-ts explain --save FILE',
  // Maps have no text form of their own: `explain --save` writes them.
  async save(pinRoot, localIPs) {
    const { saveEbpfMaps, withPinnedMaps } = await import('./explain.js');
    return withPinnedMaps(pinRoot, (maps) => saveEbpfMaps(maps, localIPs));
  },

  diffWantsStatus: (cmd) => cmd.datapathCanary,
  async runningCanary(_run, family, pinRoot) {
    const { PinnedMaps } = await import('../../../platform/ebpf/pinned.js');
    if (!PinnedMaps.present(pinRoot)) return null;
    const { ebpfCanaryEndpoint, withPinnedMaps } = await import('./explain.js');
    return withPinnedMaps(pinRoot, (maps) => ebpfCanaryEndpoint(maps, family));
  },
  async diff(ctx) {
    const { diffEbpfFamily } = await import('./diff.js');
    return diffEbpfFamily({
      family: ctx.family,
      config: ctx.config,
      state: ctx.state,
      ebpf: ctx.cmd.ebpf,
      localIPs: ctx.localIPs,
      // --service-traffic-metrics: the proxy sets CFG_TRAFFIC, so that is no change.
      trafficCounters: ctx.cmd.serviceTrafficMetrics > 0,
    });
  },
};

/**
 * The ebpf mode's connection map holds two entries per connection; it is
 * sized like the kernel's connection table upstream asks for
 * (conntrack.maxPerCore x CPUs, at least conntrack.min; 131072 connections
 * when those are left unset).
 */
export function ebpfConnectionEntries(resolved: ResolvedConfig): number {
  const ct = resolved.linux.conntrack;
  const perCore = ct.maxPerCore ?? 0;
  const flows = perCore > 0 ? Math.max(perCore * availableParallelism(), ct.min ?? 0) : 131072;
  return 2 * Math.min(flows, 1 << 21);
}

async function cleanupEbpf(log: Logger, pinRoot?: string): Promise<number> {
  try {
    const { cleanupEbpfMode } = await import('../../../platform/ebpf/cleanup.js');
    const removed = await cleanupEbpfMode(pinRoot);
    if (removed.length > 0) log.info({ removed }, 'Removed ebpf programs and pinned maps');
    return 0;
  } catch (e) {
    log.error({ err: String(e) }, 'ebpf cleanup failed');
    return 1;
  }
}
