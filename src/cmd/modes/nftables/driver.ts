// nftables mode's driver: upstream's kube-proxy table through nf_tables
// netlink, with localhost NodePorts and per-Service traffic counters riding
// along.
import { nftablesUnsupportedReason } from '../../../core/nftcheck.js';
import { DEFAULT_ENDPOINT_LAYOUT, ENDPOINT_LAYOUTS, type EndpointLayout } from '../../../dataplane/nftables/static.js';
import type { IPFamily } from '../../../core/types.js';
import { hostRunner } from '../../../platform/exec.js';
import type { Logger } from '../../../platform/logger.js';
import type { Fake as NftFake } from '../../../dataplane/nftables/fake.js';
import type { ServiceSource } from '../../explainservice.js';
import type { ModeDriver } from '../driver.js';
import { isNftablesDump } from '../dumps.js';
import { familyInKernel, rulesSource } from '../common.js';
import { canaryEndpointInNftTable } from '../canaryrules.js';

export const nftablesDriver: ModeDriver = {
  mode: 'nftables',
  failureCounter: 'nftables-sync',
  canaryFamilies: ['IPv4', 'IPv6'],
  lbAlgorithm: true,
  familyWorks: familyInKernel,

  async unsupportedReason() {
    const { nftablesHostVersions } = await import('../../../platform/nftables/versions.js');
    return nftablesUnsupportedReason(await nftablesHostVersions());
  },

  async create(d) {
    const { NftablesDataplane } = await import('../../../platform/nftables/dataplane.js');
    return new NftablesDataplane({
      config: d.config,
      clock: d.clock,
      layout: nftablesLayout(process.env, (msg) => d.log.warn(msg)),
      onEvent: (level, fields, msg) => d.log[level](fields, msg),
      // The transaction text is built only for this log line.
      ...(d.log.isLevelEnabled('trace')
        ? {
            onTransaction: (family: IPFamily, script: string, partial: boolean, via: string) =>
              d.log.trace({ family, partial, via, script }, 'nftables transaction'),
          }
        : {}),
    });
  },

  countsTraffic: true,
  async riders(dataplanes, ctx) {
    const [{ withLocalhostNodePortRelays }, { withNftablesTrafficCounters }] = await Promise.all([
      import('./localhost.js'),
      import('./traffic.js'),
    ]);
    const relayed = withLocalhostNodePortRelays(ctx.cmd.resolved, ctx.nodeIPs, dataplanes, ctx.metrics, ctx.log);
    return withNftablesTrafficCounters(ctx.cmd.serviceTrafficMetrics, relayed, ctx.metrics, ctx.log);
  },

  cleanup: (log) => cleanupNftables(log),
  async cleanupLeftovers(running, log) {
    if (running !== 'nftables') await cleanupNftables(log);
  },

  async detect(run, family) {
    const r = await run('nft', ['list', 'table', family === 'IPv4' ? 'ip' : 'ip6', 'kube-proxy'], {
      allowFailure: true,
    });
    return r.code === 0;
  },
  async withLive(ctx, use) {
    const { readNftablesRules } = await import('../../explainrules.js');
    return use(await nftablesSource(await readNftablesRules(ctx.run, ctx.family)));
  },
  holdsDump: isNftablesDump,
  async fromDump(d) {
    const { nftablesFromDump } = await import('../../explainrules.js');
    return { source: await nftablesSource(nftablesFromDump(d.text, d.family, d.file)), localIPs: null };
  },
  saveWith: '{ nft list table ip kube-proxy; nft -j list table ip kube-proxy; } > FILE (ip6 for IPv6)',

  diffWantsStatus: (cmd) => cmd.datapathCanary,
  async diff(ctx) {
    const { diffNftablesFamily } = await import('./diff.js');
    return diffNftablesFamily({ run: ctx.run, family: ctx.family, config: ctx.config, state: ctx.state });
  },
  async runningCanary(run, family) {
    const r = await run('nft', ['list', 'table', family === 'IPv4' ? 'ip' : 'ip6', 'kube-proxy'], {
      allowFailure: true,
    });
    return canaryEndpointInNftTable(r.code === 0 ? r.stdout : '');
  },
};

/**
 * The nftables endpoint layout: DEFAULT_ENDPOINT_LAYOUT unless
 * KPT_NFTABLES_LAYOUT names another (an experiment switch for tests and
 * benchmarks, not a flag). The only place that reads it. An unknown value
 * is reported through `warn` and ignored.
 */
export function nftablesLayout(
  env: Readonly<Record<string, string | undefined>> = process.env,
  warn: (msg: string) => void = () => {},
): EndpointLayout {
  const v = env['KPT_NFTABLES_LAYOUT'];
  if (v === undefined || v === '') return DEFAULT_ENDPOINT_LAYOUT;
  const layout = ENDPOINT_LAYOUTS.find((l) => l === v);
  if (layout === undefined)
    warn(`KPT_NFTABLES_LAYOUT=${v} is not one of ${ENDPOINT_LAYOUTS.join(', ')}; using ${DEFAULT_ENDPOINT_LAYOUT}`);
  return layout ?? DEFAULT_ENDPOINT_LAYOUT;
}

/** The table names its Services (in chain names and comments). */
async function nftablesSource(fake: NftFake): Promise<ServiceSource> {
  const [{ nftablesAddresses }, { traceNftablesRules }] = await Promise.all([
    import('../../explainservice.js'),
    import('../../explainrules.js'),
  ]);
  return rulesSource('nftables', fake, nftablesAddresses, traceNftablesRules);
}

async function cleanupNftables(log: Logger): Promise<number> {
  try {
    const { cleanupNftablesLeftovers } = await import('../../../platform/nftables/leftovers.js');
    await cleanupNftablesLeftovers();
    const { cleanupTrafficCounters } = await import('../../../platform/nftables/traffic.js');
    await cleanupTrafficCounters(hostRunner);
    return 0;
  } catch (e) {
    log.error({ err: String(e) }, 'nftables cleanup failed');
    return 1;
  }
}
