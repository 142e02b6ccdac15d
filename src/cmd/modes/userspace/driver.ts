// userspace mode's driver: a relay process per Service port, reached through
// a small nftables redirect table of its own.
import type { IPFamily } from '../../../core/types.js';
import type { Logger } from '../../../platform/logger.js';
import type { ModeDriver } from '../driver.js';
import { isUserspaceDump } from '../dumps.js';
import { dumpStatusAddresses, familyInKernel, statusAddressesFor } from '../common.js';

const NO_STATUS = 'the saved state names no Service; add --status FILE (kube-proxy-ts status -o json from that node)';
const fam = (family: IPFamily) => (family === 'IPv4' ? 'ip' : 'ip6');

export const userspaceDriver: ModeDriver = {
  mode: 'userspace',
  failureCounter: null,
  canaryFamilies: ['IPv4', 'IPv6'],
  countsTraffic: false,
  familyWorks: familyInKernel,

  async create(d) {
    const { UserspaceDataplane } = await import('../../../platform/userspace/dataplane.js');
    return new UserspaceDataplane({
      config: d.config,
      clock: d.clock,
      onEvent: (level, fields, msg) => d.log[level](fields, msg),
      onTransaction: (family, script) => d.log.trace({ family, script }, 'nft transaction'),
    });
  },

  cleanup: (log) => cleanupUserspace(log),
  async cleanupLeftovers(running, log) {
    if (running !== 'userspace') await cleanupUserspace(log);
  },

  async detect(run, family) {
    const table = await userspaceTable();
    return (await run('nft', ['list', 'table', fam(family), table], { allowFailure: true })).code === 0;
  },
  async withLive(ctx, use) {
    const { explainUserspaceListing } = await import('./explain.js');
    // Which endpoints each listener relays to is known only to the running proxy.
    const { answer, addresses } = await statusAddressesFor('userspace', ctx);
    const listing = (await ctx.run('nft', ['list', 'table', fam(ctx.family), await userspaceTable()])).stdout;
    return use({
      mode: 'userspace',
      addresses,
      trace: (packet, locals) => explainUserspaceListing(listing, ctx.family, packet, locals, answer.doc, answer.error),
    });
  },
  holdsDump: isUserspaceDump,
  async fromDump(d) {
    const { explainUserspaceListing } = await import('./explain.js');
    const { addresses } = await dumpStatusAddresses(d, NO_STATUS);
    const why = d.status?.error ?? 'a saved dump has only the table; add --status FILE or run explain on the node';
    return {
      source: {
        mode: 'userspace',
        addresses,
        trace: (p, l) => explainUserspaceListing(d.text, d.family, p, l, d.status?.doc ?? null, why),
      },
      localIPs: null,
    };
  },
  saveWith: 'nft list ruleset > FILE',

  diffWantsStatus: () => true,
  async diff(ctx) {
    const { diffUserspaceFamily } = await import('./diff.js');
    return diffUserspaceFamily({
      run: ctx.run,
      family: ctx.family,
      config: ctx.config,
      state: ctx.state,
      status: ctx.status?.doc ?? null,
      statusError: ctx.status?.error ?? 'the proxy was not asked',
    });
  },
};

const userspaceTable = async (): Promise<string> => (await import('../../../dataplane/userspace/rules.js')).TABLE_NAME;

async function cleanupUserspace(log: Logger): Promise<number> {
  const { cleanupUserspaceLeftovers } = await import('../../../platform/userspace/leftovers.js');
  const errors = await cleanupUserspaceLeftovers().catch((e: unknown) => [e]);
  for (const e of errors) log.error({ err: String(e) }, 'userspace cleanup failed');
  return errors.length;
}
