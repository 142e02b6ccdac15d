// IPVS side of `explain` and `diff`: read what IPVS mode holds in the kernel
// (virtual and real servers over generic netlink, kube-ipvs0's addresses over
// rtnetlink, our ipsets with `ipset save`, the rules with iptables-save) into
// the IPVS Fake. Reads only. Virtual servers with a scheduler the Fake does
// not model (another tool's) are left out and counted.
import type { IPFamily } from '../core/types.js';
import { Fake } from '../dataplane/ipvs/fake.js';
import { allIpsetNames } from '../dataplane/ipvs/ipsets.js';
import type { IpvsOp } from '../dataplane/ipvs/objects.js';
import { IpvsKernel } from '../platform/ipvs/client.js';
import { IpsetTool } from '../platform/ipvs/ipset.js';
import { DUMMY_DEVICE } from '../platform/ipvs/kernel.js';
import { Rtnl } from '../platform/ipvs/rtnl.js';
import type { CommandRunner } from '../platform/exec.js';

export interface LiveIpvs {
  readonly fake: Fake;
  /** Virtual servers the Fake could not hold (unknown schedulers). */
  readonly skipped: number;
}

export async function readLiveIpvs(run: CommandRunner, netns: string | null, family: IPFamily): Promise<LiveIpvs> {
  const ns = netns ?? undefined;
  const [ipvs, rtnl] = [await IpvsKernel.open(ns), await Rtnl.open(ns)];
  try {
    const addrs = rtnl.addresses();
    const dummy = rtnl.link(DUMMY_DEVICE)?.index ?? null;
    const fake = new Fake({ nodeAddresses: addrs.filter((a) => a.index !== dummy).map((a) => a.address) });
    if (dummy !== null) {
      fake.ensureDummy();
      fake.changeAddresses(
        true,
        addrs.filter((a) => a.index === dummy).map((a) => a.address),
      );
    }
    const ops: IpvsOp[] = [];
    for (const vs of ipvs.listServices()) {
      if (vs.family !== family) continue;
      ops.push({ op: 'add-service', vs });
      for (const d of ipvs.listDests(vs))
        ops.push({ op: 'add-dest', vs, rs: { address: d.address, port: d.port, weight: d.weight } });
    }
    const refused = fake.applyIpvs(ops).filter((f) => f.op.op === 'add-service').length;
    // Only our sets: another tool's set may be of a type the Fake does not model.
    const ours = new Set(allIpsetNames());
    const save = (await new IpsetTool(run).save([...ours])).values();
    const lines: string[] = [];
    for (const s of save) {
      lines.push(`create ${s.name} ${s.header}`);
      for (const e of s.entries) lines.push(`add ${s.name} ${e}`);
    }
    if (lines.length) fake.ipsetRestore(`${lines.join('\n')}\n`);
    const saveCmd = family === 'IPv4' ? 'iptables-save' : 'ip6tables-save';
    fake.iptables.load((await run(saveCmd, [])).stdout);
    return { fake, skipped: refused };
  } finally {
    ipvs.close();
    rtnl.close();
  }
}
