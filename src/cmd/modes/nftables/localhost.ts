// nftables mode's localhost NodePorts (KEP-6032, gate KubeProxyNFTablesLocalhostNodePorts):
// each family's datapath is wrapped so that its loopback relays and reject
// table follow its syncs (src/platform/nftables/localhost.ts). What each family
// does is decided once, by nftablesLocalhostNodePorts (src/core/config/nodeport.ts).
// nftables mode's driver (modes/nftables.ts) is the only caller.
import { nftablesLocalhostNodePorts } from '../../../core/config/nodeport.js';
import type { ResolvedConfig } from '../../../core/config/types.js';
import type { Dataplane, IPFamily } from '../../../core/types.js';
import type { Logger } from '../../../platform/logger.js';
import type { ProxyMetrics } from '../../../platform/metrics.js';
import { LocalhostNodePorts, withLocalhostNodePorts } from '../../../platform/nftables/localhost.js';
import { nftRunner } from '../../../platform/nftables/leftovers.js';
import { netlinkCounterReader } from '../../../platform/nftables/nlreadback.js';

export function withLocalhostNodePortRelays(
  config: ResolvedConfig,
  nodeIPs: Readonly<Partial<Record<IPFamily, string | null>>>,
  dataplanes: Dataplane[],
  metrics: ProxyMetrics,
  log: Logger,
): Dataplane[] {
  // One netfilter socket, opened at the first scrape, for the reject counters of every family.
  const readCounters = netlinkCounterReader();
  const relays = dataplanes.map((dp) => {
    const lnpMode = nftablesLocalhostNodePorts(config, dp.family, nodeIPs[dp.family] ?? null);
    log.info({ family: dp.family, localhostNodePorts: lnpMode }, 'Localhost NodePorts (nftables mode)');
    return new LocalhostNodePorts({
      family: dp.family,
      serving: lnpMode,
      runner: nftRunner(),
      readCounters,
      metrics,
      onEvent: (level, fields, msg) => log[level](fields, msg),
    });
  });
  metrics.addLocalhostNodePortMetrics(relays);
  return dataplanes.map((dp, i) => withLocalhostNodePorts(dp, relays[i]!));
}
