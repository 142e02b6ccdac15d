// IPVS side of `explain` and `diff`: read what IPVS mode holds in the kernel
// (virtual and real servers over generic netlink, kube-ipvs0's addresses over
// rtnetlink, our ipsets with `ipset save`, the rules with iptables-save), or
// the same from a saved bundle of the tools' output (`explain --from`), into
// the IPVS Fake. Reads only. Virtual servers with a scheduler the Fake does
// not model (another tool's) are left out and counted.
import { ProxyError } from '../../../core/errors.js';
import { ipFamilyOf, normalizeIP } from '../../../core/ip.js';
import type { IPFamily, Protocol } from '../../../core/types.js';
import { Fake } from '../../../dataplane/ipvs/fake.js';
import { allIpsetNames } from '../../../dataplane/ipvs/ipsets.js';
import {
  realServerKey,
  SVC_FLAG,
  virtualServerKey,
  type IpvsOp,
  type VirtualServer,
} from '../../../dataplane/ipvs/objects.js';
import { IpvsKernel } from '../../../platform/ipvs/client.js';
import { IpsetTool } from '../../../platform/ipvs/ipset.js';
import { DUMMY_DEVICE } from '../../../platform/ipvs/kernel.js';
import { Rtnl } from '../../../platform/ipvs/rtnl.js';
import type { CommandRunner } from '../../../platform/exec.js';
import { withoutCounters } from '../../explainrules.js';

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
    const refused = fake.applyIpvs(inKeyOrder(ops)).filter((f) => f.op.op === 'add-service').length;
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

/**
 * A saved bundle of IPVS mode's state, what a support engineer collects on a
 * node with the standard tools:
 *   { ipvsadm -Sn; ipset save; iptables-save; ip -o addr; } > ipvs-state.txt
 * (ip6tables-save for IPv6). Lines are told apart by their shape, so the
 * order does not matter: `*table` ... `COMMIT` blocks are iptables-save;
 * `-A`/`-a` with -t, -u or --sctp-service outside them are ipvsadm -Sn;
 * `create`/`add` are ipset save; `N: dev inet ADDR/LEN ...` are ip -o addr
 * (kube-ipvs0's addresses go on the dummy link, the others are the node's).
 * Fake.dump()'s sections are read too (bare addresses under its
 * "# ip addr show kube-ipvs0" heading). Firewall-mark virtual servers are
 * not kube-proxy's and are left out.
 */
export function ipvsFromBundle(
  text: string,
  family: IPFamily,
  file: string,
): LiveIpvs & { readonly localIPs: readonly string[] } {
  const bad = (line: number, why: string): never => {
    throw new ProxyError('KPT_INPUT_INVALID', `${file}: line ${line}: ${why}`);
  };
  const iptables: string[] = [];
  const ipsets: string[] = [];
  const ops: IpvsOp[] = [];
  const node: string[] = [];
  const dummy: string[] = [];
  const ours = new Set(allIpsetNames());
  let inTable = false;
  let section = '';
  let skipped = 0;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (inTable || /^\*[a-z]+$/.test(line)) {
      iptables.push(line);
      inTable = line !== 'COMMIT';
      continue;
    }
    if (line.startsWith('#')) {
      section = line;
      continue;
    }
    if (line === '') continue;
    const ipvs = /^-([Aa]) (-t|-u|--sctp-service|-f) (\S+)(.*)$/.exec(line);
    if (ipvs) {
      if (ipvs[2] === '-f') {
        skipped += ipvs[1] === 'A' ? 1 : 0;
        continue;
      }
      const vs = virtualServerOf(ipvs[2]!, ipvs[3]!, ipvs[4]!, () => bad(i + 1, `not an ipvsadm -Sn line: ${line}`));
      if (vs.family !== family) continue;
      if (ipvs[1] === 'A') ops.push({ op: 'add-service', vs });
      else ops.push({ op: 'add-dest', vs, rs: realServerOf(ipvs[4]!, () => bad(i + 1, `bad real server: ${line}`)) });
      continue;
    }
    const set = /^(create|add) (\S+) /.exec(line);
    if (set) {
      if (ours.has(set[2]!)) ipsets.push(line);
      continue;
    }
    const addr = /^\d+:\s+(\S+?)(?:@\S+)?\s+inet6? ([0-9a-fA-F.:]+)\/\d+/.exec(line);
    if (addr) {
      (addr[1] === DUMMY_DEVICE ? dummy : node).push(normalizeIP(addr[2]) ?? bad(i + 1, `bad address: ${line}`));
      continue;
    }
    const bare = normalizeIP(line);
    if (bare !== null && section === `# ip addr show ${DUMMY_DEVICE}`) {
      dummy.push(bare);
      continue;
    }
    if (line === '(no dummy link)') continue;
    bad(i + 1, `not ipvsadm -Sn, ipset save, iptables-save or ip -o addr output: ${line}`);
  }
  if (!ops.some((o) => o.op === 'add-service') && iptables.length === 0)
    throw new ProxyError(
      'KPT_INPUT_INVALID',
      `${file}: no IPVS mode state for ${family}: no ${family} virtual servers (ipvsadm -Sn) and no iptables-save output`,
    );
  const fake = new Fake({ nodeAddresses: node });
  fake.ensureDummy();
  fake.changeAddresses(true, dummy);
  const refused = fake.applyIpvs(inKeyOrder(ops)).filter((f) => f.op.op === 'add-service').length;
  if (ipsets.length) fake.ipsetRestore(`${ipsets.join('\n')}\n`);
  fake.iptables.load(withoutCounters(iptables.join('\n') + '\n'));
  const localIPs = [...node, ...dummy].filter((a) => ipFamilyOf(a) === family);
  return { fake, skipped: skipped + refused, localIPs };
}

/**
 * Virtual servers, then real servers, each in key order: netlink and
 * ipvsadm list real servers in different orders, and the tracer reports
 * them in the Fake's order, so the live state and a bundle of it must load
 * alike to trace alike.
 */
function inKeyOrder(ops: readonly IpvsOp[]): IpvsOp[] {
  const key = (o: IpvsOp) =>
    `${o.op === 'add-service' ? 0 : 1} ${virtualServerKey(o.vs)} ${'rs' in o ? realServerKey(o.rs) : ''}`;
  return [...ops].sort((a, b) => key(a).localeCompare(key(b), 'en', { numeric: true }));
}

/** "10.96.0.1:443" / "[fd00::1]:443" -> address and port, or null. */
function hostPort(s: string): { address: string; port: number } | null {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(s);
  const address = m ? normalizeIP(m[1]) : null;
  return address === null ? null : { address, port: Number(m![2]) };
}

const PROTO_FLAG: Record<string, Protocol> = { '-t': 'TCP', '-u': 'UDP', '--sctp-service': 'SCTP' };

/** A virtual server from `-A -t ADDR:PORT -s SCHED [-p TIMEOUT] [-o] [-b FLAGS]` (options after the address). */
function virtualServerOf(proto: string, where: string, rest: string, fail: () => never): VirtualServer {
  const hp = hostPort(where) ?? fail();
  const words = rest.trim().split(/\s+/);
  const opt = (name: string) => {
    const at = words.indexOf(name);
    return at < 0 ? undefined : words[at + 1];
  };
  let flags = 0;
  const timeout = opt('-p');
  if (timeout !== undefined) flags |= SVC_FLAG.PERSISTENT;
  if (words.includes('-o')) flags |= SVC_FLAG.ONEPACKET;
  for (const f of (opt('-b') ?? '').split(',')) {
    if (/-fallback$/.test(f)) flags |= SVC_FLAG.SCHED1;
    if (/-port$/.test(f)) flags |= SVC_FLAG.SCHED2;
  }
  return {
    family: ipFamilyOf(hp.address)!,
    protocol: PROTO_FLAG[proto]!,
    address: hp.address,
    port: hp.port,
    scheduler: opt('-s') ?? 'wlc',
    flags,
    timeout: timeout === undefined ? 0 : Number(timeout),
  };
}

/** The real server of `-a -t VS -r ADDR:PORT -m -w W`. */
function realServerOf(rest: string, fail: () => never): { address: string; port: number; weight: number } {
  const words = rest.trim().split(/\s+/);
  const at = words.indexOf('-r');
  const hp = (at < 0 ? null : hostPort(words[at + 1] ?? '')) ?? fail();
  const w = words.indexOf('-w');
  return { ...hp, weight: w < 0 ? 1 : Number(words[w + 1]) };
}

/** Whether a dump file is an IPVS bundle (it has ipvsadm -Sn lines or Fake.dump's heading). */
