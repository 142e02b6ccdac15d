// IPVS side of `diff`: the live state (live.ts) is read twice into the
// IPVS Fake; the real IpvsDataplane runs one full sync against one copy
// (fakeKernel: nothing reaches the kernel, not even the sysctls), and the
// two are compared: virtual and real servers (ipvsadm -Sn lines), set
// members, kube-ipvs0 addresses, and the rules chain by chain. Drained
// real servers show as weight changes (weight 0), as the sync would leave them.
import type { DataplaneConfig, IPFamily, SyncState } from '../../../core/types.js';
import { diffIptables, diffText } from '../../../dataplane/iptables/diff.js';
import type { Fake } from '../../../dataplane/ipvs/fake.js';
import { realClock } from '../../../platform/clock.js';
import type { CommandRunner } from '../../../platform/exec.js';
import { IpvsDataplane, type IpvsModeOptions } from '../../../platform/ipvs/dataplane.js';
import { fakeKernel } from '../../../platform/ipvs/kernel.js';
import type { FamilyDiff } from '../driver.js';
import { readLiveIpvs } from './live.js';

export interface IpvsFamilyInput {
  readonly run: CommandRunner;
  readonly netns: string | null;
  readonly family: IPFamily;
  readonly config: DataplaneConfig;
  readonly ipvs: IpvsModeOptions;
  readonly state: SyncState;
  readonly syncPeriodMs: number;
}

/** The parts of a dump that IPVS owns, one line per object. */
function ipvsLines(f: Fake): Map<string, string[]> {
  const sections = new Map<string, string[]>();
  let cur: string[] = [];
  for (const line of f.dump().split('\n')) {
    if (line.startsWith('# ')) sections.set(line.slice(2), (cur = []));
    else if (line !== '') cur.push(line);
  }
  return sections;
}

export function setDiff(before: readonly string[], after: readonly string[]): string[] {
  const b = new Set(before);
  const a = new Set(after);
  return [
    ...before.filter((l) => !a.has(l)).map((l) => `- ${l}`),
    ...after.filter((l) => !b.has(l)).map((l) => `+ ${l}`),
  ];
}

export async function diffIpvsFamily(i: IpvsFamilyInput): Promise<FamilyDiff> {
  const before = (await readLiveIpvs(i.run, i.netns, i.family)).fake;
  const after = (await readLiveIpvs(i.run, i.netns, i.family)).fake;
  const dp = new IpvsDataplane({
    config: i.config,
    ipvs: i.ipvs,
    kernel: fakeKernel(after),
    run: i.run, // only `iptables --version`
    clock: realClock,
    syncPeriodMs: i.syncPeriodMs,
  });
  try {
    await dp.sync(i.state);
  } finally {
    dp.close();
  }
  const b = ipvsLines(before);
  const a = ipvsLines(after);
  let text = '';
  let changes = 0;
  for (const part of ['ipvsadm -Sn', 'ip addr show kube-ipvs0', 'ipset save']) {
    const d = setDiff(b.get(part) ?? [], a.get(part) ?? []);
    changes += d.length;
    if (d.length) text += `## ${part}\n${d.join('\n')}\n`;
  }
  const chains = diffIptables(before.iptables, after.iptables);
  const ruleChanges = chains.reduce((n, c) => n + c.lines.filter((l) => l.op !== ' ').length, 0);
  changes += ruleChanges + chains.filter((c) => c.status !== 'changed').length;
  if (chains.length) text += `## iptables\n${diffText(chains)}`;
  const summary =
    changes === 0
      ? 'no changes'
      : `${changes} change(s): virtual/real servers, addresses and set members as listed; ${chains.length} chains differ`;
  return { family: i.family, changes, summary, text, chains };
}
