// iptables side of `diff`: the real IptablesDataplane runs one full sync
// against the fake runner (src/platform/iptables/fakerunner.ts) whose
// Fake holds the kernel's iptables-save dump; the result is compared
// chain by chain with the dump. Features (random-fully, nfacct counters,
// be_liberal) are read from the real system without changing it (`nfacct
// get`, never `nfacct add`), and passed as the renderer's options.

import type { DataplaneConfig, IPFamily, SyncState } from '../../../core/types.js';
import { sameRule } from '../../../dataplane/iptables/canon.js';
import { diffIptables, diffText } from '../../../dataplane/iptables/diff.js';
import { Fake, type IptablesTable } from '../../../dataplane/iptables/fake.js';
import { DEFAULT_IPTABLES_OPTIONS, type IptablesOptions } from '../../../dataplane/iptables/index.js';
import { realClock } from '../../../platform/clock.js';
import { ExecError, type CommandRunner } from '../../../platform/exec.js';
import {
  CT_INVALID_COUNTER,
  LOCALHOST_NP_COUNTER,
  parseIptablesVersion,
  supportsRandomFully,
} from '../../../platform/iptables/features.js';
import { fakeRunner, type FakeRunner } from '../../../platform/iptables/fakerunner.js';
import type { FamilyDiff } from '../driver.js';
import { IptablesDataplane } from '../../../platform/iptables/dataplane.js';
import { runnerSysctl } from '../../../platform/iptables/sysctl.js';

export interface IptablesFamilyInput {
  readonly run: CommandRunner;
  readonly family: IPFamily;
  readonly config: DataplaneConfig;
  readonly state: SyncState;
  readonly syncPeriodMs: number;
}

/** What detectFeatures would find, read without side effects. */
async function readOnlyOptions(
  run: CommandRunner,
  family: IPFamily,
): Promise<{ version: string; options: Partial<IptablesOptions> }> {
  const version = (await run(family === 'IPv4' ? 'iptables' : 'ip6tables', ['--version'])).stdout.trim();
  const has = async (name: string) => {
    try {
      return (await run('nfacct', ['get', name], { allowFailure: true })).code === 0;
    } catch {
      return false;
    }
  };
  const [ctInvalid, localhostNp] = await Promise.all([has(CT_INVALID_COUNTER), has(LOCALHOST_NP_COUNTER)]);
  const beLiberal = (await runnerSysctl(run).get('net/netfilter/nf_conntrack_tcp_be_liberal')) === '1';
  return {
    version,
    options: {
      ...DEFAULT_IPTABLES_OPTIONS,
      randomFully: supportsRandomFully(parseIptablesVersion(version)),
      nfacct: { ctStateInvalidDropped: ctInvalid, localhostNodePortsAccepted: localhostNp },
      beLiberal,
    },
  };
}

const quote = (a: string) => (/\s/.test(a) ? `"${a}"` : a);

/** The fake runner, but `iptables -C` compares rules canonically (the dump has iptables-save's spelling). */
function canonicalCheck(fr: FakeRunner): CommandRunner {
  return async (command, args, opts = {}) => {
    const ci = args.indexOf('-C');
    if (!/^ip6?tables$/.test(command) || ci < 0) return fr.run(command, args, opts);
    const table = args[args.indexOf('-t') + 1] as IptablesTable;
    const rule = args
      .slice(ci + 2)
      .map(quote)
      .join(' ');
    const found = fr.ipt.rules(table, args[ci + 1]!).some((r) => sameRule(r, rule));
    const result = {
      stdout: '',
      stderr: found ? '' : 'Bad rule (does a matching rule exist in that chain?)',
      code: found ? 0 : 1,
    };
    if (!found && !opts.allowFailure) throw new ExecError(command, args, result);
    return result;
  };
}

export async function diffIptablesFamily(i: IptablesFamilyInput): Promise<FamilyDiff> {
  const save = (await i.run(i.family === 'IPv4' ? 'iptables-save' : 'ip6tables-save', [])).stdout;
  const { version, options } = await readOnlyOptions(i.run, i.family);
  const before = new Fake();
  before.load(save);
  const fr = fakeRunner({ version });
  fr.ipt.load(save);
  const run = canonicalCheck(fr);
  const dp = new IptablesDataplane({
    config: i.config,
    run,
    sysctl: runnerSysctl(run),
    clock: realClock,
    syncPeriodMs: i.syncPeriodMs,
    options,
    wholeTableCache: 'never',
  });
  await dp.sync(i.state);
  const chains = diffIptables(before, fr.ipt);
  const added = chains.reduce((n, c) => n + c.lines.filter((l) => l.op === '+').length, 0);
  const removed = chains.reduce((n, c) => n + c.lines.filter((l) => l.op === '-').length, 0);
  const newChains = chains.filter((c) => c.status === 'added').length;
  const goneChains = chains.filter((c) => c.status === 'removed').length;
  const changes = added + removed + newChains + goneChains;
  const summary =
    changes === 0
      ? 'no changes'
      : `${chains.length} chains differ: ${newChains} added, ${goneChains} removed; ${added} rules added, ${removed} removed`;
  return { family: i.family, changes, summary, text: diffText(chains), chains };
}
