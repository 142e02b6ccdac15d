// iptables mode's driver: iptables-restore of upstream's chains, traced and
// diffed through the iptables Fake.
import { hostRunner } from '../../../platform/exec.js';
import type { Logger } from '../../../platform/logger.js';
import type { Fake as IptablesFake } from '../../../dataplane/iptables/fake.js';
import type { SharedRules } from '../../../dataplane/iptables/jumps.js';
import type { ServiceSource } from '../../explainservice.js';
import type { ModeDriver } from '../driver.js';
import { isIptablesDump } from '../dumps.js';
import { familyHasIptables, iptablesModeLeftovers, rulesSource } from '../common.js';
import { canaryEndpointInIptablesSave } from '../canaryrules.js';

export const iptablesDriver: ModeDriver = {
  mode: 'iptables',
  failureCounter: 'iptables-restore',
  canaryFamilies: ['IPv4', 'IPv6'],
  countsTraffic: false,
  familyWorks: familyHasIptables,

  async create(d) {
    const { IptablesDataplane, procSysctl } = await import('../../../platform/iptables/index.js');
    return new IptablesDataplane({
      config: d.config,
      run: hostRunner,
      sysctl: procSysctl,
      clock: d.clock,
      syncPeriodMs: d.syncPeriodMs,
      onEvent: (level, fields, msg) => d.log[level](fields, msg),
    });
  },

  cleanup: (log) => cleanupIptables(log),
  async cleanupLeftovers(running, log) {
    if (running === 'iptables') return;
    if (running !== 'ipvs') return void (await cleanupIptables(log));
    // IPVS mode shares some chain names and jump rules: only what is iptables mode's alone goes.
    if (!(await iptablesModeLeftovers())) return;
    const { IPVS_CHAINS, IPVS_JUMP_CHAINS } = await import('../../../dataplane/ipvs/rules.js');
    await cleanupIptables(log, { ...IPVS_CHAINS, jumps: IPVS_JUMP_CHAINS });
  },

  async detect(run, family) {
    const save = await run(family === 'IPv4' ? 'iptables-save' : 'ip6tables-save', ['-t', 'nat'], {
      allowFailure: true,
    });
    return save.code === 0 && /^:KUBE-SERVICES /m.test(save.stdout);
  },
  async withLive(ctx, use) {
    const { readIptablesRules } = await import('../../explainrules.js');
    return use(await iptablesSource(await readIptablesRules(ctx.run, ctx.family)));
  },
  holdsDump: isIptablesDump,
  async fromDump(d) {
    const { iptablesFromSave } = await import('../../explainrules.js');
    return { source: await iptablesSource(iptablesFromSave(d.text)), localIPs: null };
  },
  // iptables-save output is one family's; its addresses tell which.
  dumpFamilies: (text) =>
    /^\*nat/m.test(text) ? [/ -d [0-9a-f]*:[0-9a-f:]*(\/128)? /.test(text) ? 'IPv6' : 'IPv4'] : null,
  saveWith: 'iptables-save -c > FILE (ip6tables-save for IPv6)',

  diffWantsStatus: (cmd) => cmd.datapathCanary,
  async diff(ctx) {
    const { diffIptablesFamily } = await import('./diff.js');
    return diffIptablesFamily({
      run: ctx.run,
      family: ctx.family,
      config: ctx.config,
      state: ctx.state,
      syncPeriodMs: ctx.cmd.timing.syncPeriodMs,
    });
  },
  async runningCanary(run, family) {
    const save = family === 'IPv4' ? 'iptables-save' : 'ip6tables-save';
    const r = await run(save, ['-t', 'nat'], { allowFailure: true });
    return canaryEndpointInIptablesSave(r.code === 0 ? r.stdout : '');
  },
};

/** The rules name their Services (in comments). */
async function iptablesSource(fake: IptablesFake): Promise<ServiceSource> {
  const [{ iptablesAddresses }, { traceIptablesRules }] = await Promise.all([
    import('../../explainservice.js'),
    import('../../explainrules.js'),
  ]);
  return rulesSource('iptables', fake, iptablesAddresses, traceIptablesRules);
}

async function cleanupIptables(log: Logger, keep?: SharedRules): Promise<number> {
  // The cleanup's own modules, not the iptables mode's index: a proxy in another mode runs this at every start.
  const [{ cleanupLeftovers }, { Iptables }] = await Promise.all([
    import('../../../platform/iptables/cleanup.js'),
    import('../../../platform/iptables/iptables.js'),
  ]);
  let errors = 0;
  for (const family of ['IPv4', 'IPv6'] as const) {
    const ipt = new Iptables(family, hostRunner);
    try {
      const r = await cleanupLeftovers(ipt, { wholeTableCache: true, ...(keep ? { keep } : {}) });
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
