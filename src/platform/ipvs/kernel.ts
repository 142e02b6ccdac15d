// The kernel interfaces IPVS mode talks to, behind one type so the dataplane
// runs the same code against the real kernel (netlink, ipset, iptables,
// /proc/sys) and against the IPVS Fake (unit tests, `diff`):
//   ipvs      virtual and real servers, timeouts (generic netlink)
//   link      kube-ipvs0 and the addresses of every link (rtnetlink)
//   ipset     save / restore
//   iptables  restore, save, single-rule checks for the jump rules
//   sysctl    /proc/sys of the namespace
import type { IPFamily } from '../../core/types.js';
import type { FakeOpFailure } from '../../dataplane/ipvs/fake.js';
import { Fake } from '../../dataplane/ipvs/fake.js';
import type { IpvsOp, RealServerStatus, VirtualServer } from '../../dataplane/ipvs/objects.js';
import { Iptables, type RestoreFlags, type Table } from '../iptables/iptables.js';
import type { CommandRunner } from '../exec.js';
import type { Sysctl } from '../iptables/sysctl.js';
import { IpvsKernel, type IpvsOpFailure } from './client.js';
import type { IpvsTimeouts } from './genl.js';
import { IpsetTool, parseIpsetSave, type SavedSet } from './ipset.js';
import { Rtnl, type LinkAddress } from './rtnl.js';

export const DUMMY_DEVICE = 'kube-ipvs0';

export interface IpvsKernelDeps {
  readonly ipvs: {
    listServices(): VirtualServer[];
    listDests(vs: VirtualServer): RealServerStatus[];
    apply(ops: readonly IpvsOp[]): Array<IpvsOpFailure | FakeOpFailure>;
    setTimeouts(t: IpvsTimeouts): void;
  };
  readonly link: {
    /** Index of the dummy link, creating it when missing. */
    ensureDummy(name: string): number;
    /** Its index, or null when it does not exist. */
    dummyIndex(name: string): number | null;
    deleteDummy(name: string): boolean;
    addresses(family?: IPFamily): LinkAddress[];
    changeAddresses(index: number, add: boolean, addrs: readonly string[]): Array<{ address: string; error: string }>;
  };
  readonly ipset: {
    save(names?: readonly string[]): Promise<Map<string, SavedSet>>;
    restore(script: string): Promise<void>;
  };
  readonly iptables: (family: IPFamily) => {
    restore(text: string, flags: RestoreFlags): Promise<void>;
    save(table?: Table): Promise<string>;
    ruleExists(table: Table, chain: string, args: readonly string[]): Promise<boolean>;
    prependRule(table: Table, chain: string, args: readonly string[]): Promise<void>;
    deleteRule(table: Table, chain: string, args: readonly string[]): Promise<boolean>;
  };
  readonly sysctl: Sysctl;
  close(): void;
}

/** The real kernel: netlink sockets in `netns` (or ours), commands through `run`. */
export async function openKernel(run: CommandRunner, sysctl: Sysctl, netns?: string): Promise<IpvsKernelDeps> {
  const ipvs = await IpvsKernel.open(netns);
  let rtnl: Rtnl;
  try {
    rtnl = await Rtnl.open(netns);
  } catch (e) {
    ipvs.close();
    throw e;
  }
  const ipset = new IpsetTool(run);
  const ipts = { IPv4: new Iptables('IPv4', run), IPv6: new Iptables('IPv6', run) };
  return {
    ipvs: {
      listServices: () => ipvs.listServices(),
      listDests: (vs) => ipvs.listDests(vs),
      apply: (ops) => ipvs.apply(ops),
      setTimeouts: (t) => ipvs.setTimeouts(t),
    },
    link: {
      ensureDummy: (name) => rtnl.ensureDummy(name),
      dummyIndex: (name) => rtnl.link(name)?.index ?? null,
      deleteDummy: (name) => rtnl.deleteDummy(name),
      addresses: (family) => rtnl.addresses(family),
      changeAddresses: (index, add, addrs) => rtnl.changeAddresses(index, add, addrs),
    },
    ipset,
    iptables: (family) => ipts[family],
    sysctl,
    close() {
      ipvs.close();
      rtnl.close();
    },
  };
}

/** Everything against an IPVS Fake (node addresses from the Fake). */
export function fakeKernel(fake: Fake): IpvsKernelDeps {
  const DUMMY_INDEX = 1000;
  const sysctl: Sysctl = {
    async get(name) {
      return fake.sysctls.get(name) ?? null;
    },
    async set(name, value) {
      fake.sysctls.set(name, value);
    },
  };
  const ipt = {
    async restore(text: string, flags: RestoreFlags) {
      fake.iptablesRestore(text, { noflush: flags.noflush });
    },
    async save(table?: Table) {
      return fake.iptables.save(table);
    },
    async ruleExists(table: Table, chain: string, args: readonly string[]) {
      const text = args.map((a) => (a.includes(' ') ? `"${a}"` : a)).join(' ');
      return fake.iptables.rules(table, chain).includes(text);
    },
    async prependRule(table: Table, chain: string, args: readonly string[]) {
      fake.iptables.ensureRule('prepend', table, chain, args);
    },
    async deleteRule(table: Table, chain: string, args: readonly string[]) {
      const text = args.map((a) => (a.includes(' ') ? `"${a}"` : a)).join(' ');
      if (!fake.iptables.rules(table, chain).includes(text)) return false;
      fake.iptables.restore(`*${table}\n-D ${chain} ${text}\nCOMMIT\n`, { noflush: true });
      return true;
    },
  };
  return {
    ipvs: {
      listServices: () => fake.listServices(),
      listDests: (vs) => fake.listDests(vs),
      apply: (ops) => fake.applyIpvs(ops),
      setTimeouts: (t) => fake.setTimeouts(t),
    },
    link: {
      ensureDummy: () => {
        fake.ensureDummy();
        return DUMMY_INDEX;
      },
      dummyIndex: () => (fake.hasDummy() ? DUMMY_INDEX : null),
      deleteDummy: () => fake.deleteDummy(),
      addresses: (family) =>
        [
          ...fake.dummyAddresses().map((a) => ({ index: DUMMY_INDEX, address: a })),
          ...fake.nodeAddresses.map((a) => ({ index: 1, address: a })),
        ]
          .map((x) => ({ ...x, family: (x.address.includes(':') ? 'IPv6' : 'IPv4') as IPFamily, prefix: 32 }))
          .filter((x) => family === undefined || x.family === family),
      changeAddresses: (_index, add, addrs) => fake.changeAddresses(add, addrs),
    },
    ipset: {
      async save(names) {
        const all = parseIpsetSave(fake.ipsetSave());
        if (!names) return all;
        const want = new Set(names);
        return new Map([...all].filter(([n]) => want.has(n)));
      },
      async restore(script) {
        fake.ipsetRestore(script);
      },
    },
    iptables: () => ipt,
    sysctl,
    close() {},
  };
}
