// cleanupIpvsLeftovers: remove what IPVS mode creates, and nothing else
// (upstream ipvs CleanupLeftovers, minus its flush of the whole IPVS table):
//   - per family: our jump rules (exact spec), then our chains (flushed and
//     deleted; IPVS_CHAINS, which includes the nat KUBE-SERVICES /
//     KUBE-POSTROUTING / KUBE-MARK-MASQ and filter KUBE-FORWARD /
//     KUBE-PROXY-FIREWALL it shares with iptables mode);
//   - our ipsets (after the rules that match them);
//   - the virtual servers that are ours: on a kube-ipvs0 address, or a
//     NodePort on a node address whose port is in our NodePort sets; never
//     one inside --ipvs-exclude-cidrs, never another tool's;
//   - kube-ipvs0 itself.
// With `keep` (a handover to iptables mode, which shares the chain names
// above), iptables mode's chains and jump rules survive.
// Failures are collected, not thrown, so one part does not stop the others.
import { ProxyError } from '../../core/errors.js';
import { cidrContains, parseCIDR, parseIP } from '../../core/ip.js';
import type { IPFamily } from '../../core/types.js';
import { chainsFromSave, jumpRuleArgs, sharedJump, type SharedRules } from '../../dataplane/iptables/jumps.js';
import { allIpsetNames, IPSET, ipsetName } from '../../dataplane/ipvs/ipsets.js';
import { virtualServerKey, type VirtualServer } from '../../dataplane/ipvs/objects.js';
import { IPVS_CHAINS, IPVS_JUMP_CHAINS } from '../../dataplane/ipvs/rules.js';
import type { SavedSet } from './ipset.js';
import { DUMMY_DEVICE, type IpvsKernelDeps } from './kernel.js';

export interface IpvsCleanupResult {
  readonly virtualServers: number;
  readonly jumpRules: number;
  readonly chains: number;
  readonly ipsets: number;
  readonly link: boolean;
  readonly errors: readonly unknown[];
}

export interface IpvsCleanupOptions {
  readonly families: readonly IPFamily[];
  readonly excludeCIDRs?: readonly string[];
  /** The running mode's rules, left in place. */
  readonly keep?: SharedRules;
}

/** True when anything IPVS mode makes is present (a cheap check before a mode-switch cleanup). */
export async function ipvsLeftoversPresent(k: IpvsKernelDeps): Promise<boolean> {
  if (k.link.dummyIndex(DUMMY_DEVICE) !== null) return true;
  return (await k.ipset.save(allIpsetNames())).size > 0;
}

export async function cleanupIpvsLeftovers(k: IpvsKernelDeps, o: IpvsCleanupOptions): Promise<IpvsCleanupResult> {
  const errors: unknown[] = [];
  const attempt = async <T>(fn: () => Promise<T> | T, fallback: T): Promise<T> => {
    try {
      return await fn();
    } catch (e) {
      errors.push(e);
      return fallback;
    }
  };

  // What tells our virtual servers apart, read before anything goes.
  const dummy = await attempt(() => k.link.dummyIndex(DUMMY_DEVICE), null);
  const addrs = await attempt(() => k.link.addresses(), []);
  const onDummy = new Set(addrs.filter((a) => a.index === dummy).map((a) => a.address));
  const nodeAddrs = new Set(addrs.filter((a) => a.index !== dummy).map((a) => a.address));
  const sets = await attempt(() => k.ipset.save(allIpsetNames()), new Map<string, SavedSet>());
  const nodePortMember = (vs: VirtualServer): boolean => {
    const ip = parseIP(vs.address)!.text;
    const set = { TCP: IPSET.NODE_PORT_TCP, UDP: IPSET.NODE_PORT_UDP, SCTP: IPSET.NODE_PORT_SCTP }[vs.protocol];
    const m = sets.get(ipsetName(set, vs.family))?.entries;
    return m?.has(vs.protocol === 'SCTP' ? `${ip},sctp:${vs.port}` : String(vs.port)) ?? false;
  };
  const excluded = (vs: VirtualServer) =>
    (o.excludeCIDRs ?? []).some((c) => {
      const p = parseCIDR(c);
      return p !== null && p.family === vs.family && cidrContains(p, vs.address);
    });
  const ours = (vs: VirtualServer) =>
    o.families.includes(vs.family) &&
    !excluded(vs) &&
    (onDummy.has(vs.address) || (nodeAddrs.has(vs.address) && nodePortMember(vs)));

  let jumpRules = 0;
  let chains = 0;
  for (const family of o.families) {
    const ipt = k.iptables(family);
    for (const jc of IPVS_JUMP_CHAINS) {
      if (sharedJump(jc, o.keep)) continue;
      if (await attempt(() => ipt.deleteRule(jc.table, jc.from, jumpRuleArgs(jc)), false)) jumpRules++;
    }
    for (const table of ['nat', 'filter'] as const) {
      const existing = new Set(chainsFromSave(await attempt(() => ipt.save(table), ''), table));
      const kept = new Set(o.keep?.[table] ?? []);
      const mine = IPVS_CHAINS[table].filter((c) => existing.has(c) && !kept.has(c));
      if (mine.length === 0) continue;
      // Declaring a chain flushes it, so every rule between our chains is gone before the -X lines.
      const input = [`*${table}`, ...mine.map((c) => `:${c} - [0:0]`), ...mine.map((c) => `-X ${c}`), 'COMMIT', ''];
      if (
        await attempt(() => ipt.restore(input.join('\n'), { noflush: true, counters: false }).then(() => true), false)
      )
        chains += mine.length;
    }
  }

  let ipsets = 0;
  const familyOf = (name: string): IPFamily => (name.startsWith('KUBE-6-') ? 'IPv6' : 'IPv4');
  const destroy = [...sets.keys()].filter((n) => o.families.includes(familyOf(n)));
  if (destroy.length > 0) {
    if (
      await attempt(() => k.ipset.restore(destroy.map((n) => `destroy ${n}`).join('\n') + '\n').then(() => true), false)
    )
      ipsets = destroy.length;
  }

  const victims = (await attempt(() => k.ipvs.listServices(), [])).filter(ours);
  const failures = await attempt(() => k.ipvs.apply(victims.map((vs) => ({ op: 'del-service' as const, vs }))), []);
  for (const f of failures)
    errors.push(new ProxyError('KPT_EXEC_FAILED', `deleting ${virtualServerKey(f.op.vs)}: ${f.message}`));

  // The link holds both families' addresses: it goes when every family is
  // cleaned, or when no other family's address is left on it.
  const others = [...onDummy].filter((a) => !o.families.includes(parseIP(a)?.family ?? 'IPv4'));
  const cleanAll = (o.families.includes('IPv4') && o.families.includes('IPv6')) || others.length === 0;
  const link = cleanAll && dummy !== null ? await attempt(() => k.link.deleteDummy(DUMMY_DEVICE), false) : false;
  return { virtualServers: victims.length - failures.length, jumpRules, chains, ipsets, link, errors };
}
