// Fake: the kernel interface of IPVS mode in memory, as strict as the real
// one (each refusal below was checked against Debian's 6.1 kernel, ipset
// 7.17 and iptables-nft 1.8.9 in the QEMU guest):
//   - the IPVS table: virtual servers with their real servers and connection
//     counters. Requests apply one by one and a refused one does not stop the
//     rest, as a netlink batch does; refusals carry the kernel's errno
//     (EEXIST 17 for a duplicate, ESRCH 3 for a missing virtual server, ENOENT 2
//     for a missing real server or an unknown scheduler, EINVAL 22 for a
//     real server of the other family);
//   - ipsets: `ipset restore` input is checked for syntax first (a bad line
//     applies nothing), then lines apply in order and the first refused one
//     stops the rest; create of an existing set needs -exist and the same
//     type; add/del need -exist to ignore present/absent members; a set an
//     iptables rule matches cannot be destroyed;
//   - the kube-ipvs0 dummy link and its addresses, next to the node's other
//     addresses;
//   - iptables: the iptables mode's Fake, plus the kernel's refusal of a
//     `-m set --match-set` naming a set that does not exist;
//   - sysctls and the IPVS timeouts.
// dump() prints it all in the tools' own formats (ipvsadm -Sn, ipset save,
// ip addr, iptables-save) for tests and `explain`.
import { ProxyError } from '../../core/errors.js';
import { normalizeIP, parseIP } from '../../core/ip.js';
import type { IPFamily } from '../../core/types.js';
import { Fake as IptablesFake, type IptablesTable } from '../iptables/fake.js';
import { tokenize } from '../iptables/tokens.js';
import { jumpRuleArgs } from '../iptables/jumps.js';
import { IPVS_JUMP_CHAINS } from './rules.js';
import {
  realServerKey,
  virtualServerKey,
  IPVS_SCHEDULERS,
  type IpvsOp,
  type RealServerStatus,
  type VirtualServer,
} from './objects.js';
import { canonicalEntry, ipsetCreateArgs, type IpsetType } from './ipsets.js';
import type { CurrentVirtualServer, IpvsCurrent } from './live.js';
import type { IpvsPlan } from './plan.js';

export const ERRNO = { ENOENT: 2, ESRCH: 3, EEXIST: 17, EINVAL: 22, EADDRNOTAVAIL: 99 } as const;

export interface FakeOpFailure {
  readonly op: IpvsOp;
  readonly errno: number;
  readonly message: string;
}

interface FakeService {
  vs: VirtualServer;
  readonly dests: Map<string, RealServerStatus>;
}

interface FakeSet {
  readonly type: IpsetType;
  readonly family: IPFamily;
  readonly entries: Set<string>;
}

const SET_TYPES: readonly IpsetType[] = [
  'hash:ip',
  'hash:ip,port',
  'hash:ip,port,ip',
  'hash:ip,port,net',
  'bitmap:port',
];

export class Fake {
  readonly iptables = new IptablesFake();
  readonly sysctls = new Map<string, string>();
  timeouts = { tcp: 900, tcpFin: 120, udp: 300 };
  private readonly services = new Map<string, FakeService>();
  private readonly sets = new Map<string, FakeSet>();
  /** The dummy link's addresses, or null while it does not exist. */
  private dummy: Set<string> | null = null;
  readonly dummyName: string;
  /** Addresses of the node's other links (both families). */
  readonly nodeAddresses: string[];

  constructor(opts: { nodeAddresses?: readonly string[]; dummyName?: string } = {}) {
    this.nodeAddresses = [...(opts.nodeAddresses ?? [])];
    this.dummyName = opts.dummyName ?? 'kube-ipvs0';
  }

  // ------------------------------------------------------------------ IPVS

  applyIpvs(ops: readonly IpvsOp[]): FakeOpFailure[] {
    const failures: FakeOpFailure[] = [];
    for (const op of ops) {
      const errno = this.applyOne(op);
      if (errno !== 0) failures.push({ op, errno, message: `errno ${errno}` });
    }
    return failures;
  }

  private applyOne(o: IpvsOp): number {
    const key = virtualServerKey(o.vs);
    const cur = this.services.get(key);
    if (parseIP(o.vs.address)?.family !== o.vs.family) return ERRNO.EINVAL;
    switch (o.op) {
      case 'add-service':
      case 'edit-service':
        if (!(IPVS_SCHEDULERS as readonly string[]).includes(o.vs.scheduler)) return ERRNO.ENOENT;
        if (o.op === 'add-service') {
          if (cur) return ERRNO.EEXIST;
          this.services.set(key, { vs: { ...o.vs }, dests: new Map() });
        } else {
          if (!cur) return ERRNO.ESRCH;
          cur.vs = { ...o.vs };
        }
        return 0;
      case 'del-service':
        if (!cur) return ERRNO.ESRCH;
        this.services.delete(key);
        return 0;
    }
    if (!cur) return ERRNO.ESRCH;
    if (parseIP(o.rs.address)?.family !== o.vs.family) return ERRNO.EINVAL;
    const rk = realServerKey(o.rs);
    const d = cur.dests.get(rk);
    switch (o.op) {
      case 'add-dest':
        if (d) return ERRNO.EEXIST;
        cur.dests.set(rk, { ...o.rs, activeConns: 0, inactiveConns: 0, persistConns: 0 });
        return 0;
      case 'edit-dest':
        if (!d) return ERRNO.ENOENT;
        cur.dests.set(rk, { ...d, weight: o.rs.weight });
        return 0;
      case 'del-dest':
        if (!d) return ERRNO.ENOENT;
        cur.dests.delete(rk);
        return 0;
    }
  }

  listServices(): VirtualServer[] {
    return [...this.services.values()].map((s) => ({ ...s.vs }));
  }

  listDests(vs: Pick<VirtualServer, 'protocol' | 'address' | 'port'>): RealServerStatus[] {
    return [...(this.services.get(virtualServerKey(vs))?.dests.values() ?? [])].map((d) => ({ ...d }));
  }

  /** Tests: pretend connections exist (or drained) on a real server. */
  setConnections(vsKey: string, rsKey: string, active: number, inactive = 0): void {
    const s = this.services.get(vsKey);
    const d = s?.dests.get(rsKey);
    if (!s || !d) throw new ProxyError('KPT_NOT_FOUND', `no real server ${rsKey} in ${vsKey}`);
    s.dests.set(rsKey, { ...d, activeConns: active, inactiveConns: inactive });
  }

  setTimeouts(t: { tcp: number; tcpFin: number; udp: number }): void {
    this.timeouts = {
      tcp: t.tcp || this.timeouts.tcp,
      tcpFin: t.tcpFin || this.timeouts.tcpFin,
      udp: t.udp || this.timeouts.udp,
    };
  }

  // ------------------------------------------------------------------ link

  ensureDummy(): void {
    this.dummy ??= new Set();
  }

  deleteDummy(): boolean {
    const had = this.dummy !== null;
    this.dummy = null;
    return had;
  }

  hasDummy(): boolean {
    return this.dummy !== null;
  }

  dummyAddresses(): string[] {
    return [...(this.dummy ?? [])].sort();
  }

  /** Add or delete host addresses on the dummy; present-on-add and absent-on-delete are fine, as rtnl.ts treats them. */
  changeAddresses(add: boolean, addrs: readonly string[]): Array<{ address: string; error: string }> {
    if (this.dummy === null) return addrs.map((a) => ({ address: a, error: `ENODEV: no ${this.dummyName}` }));
    const failed: Array<{ address: string; error: string }> = [];
    for (const a of addrs) {
      const n = normalizeIP(a);
      if (n === null) failed.push({ address: a, error: 'EINVAL' });
      else if (add) this.dummy.add(n);
      else this.dummy.delete(n);
    }
    return failed;
  }

  // ------------------------------------------------------------------ ipsets

  /** `ipset restore`: syntax first (nothing applied on a bad line), then in order until a refusal. */
  ipsetRestore(script: string): void {
    const lines = script.split('\n').filter((l) => l.trim() !== '');
    const parsed = lines.map((l, i) => parseIpsetLine(l, i + 1));
    for (const p of parsed) this.ipsetApply(p);
  }

  private ipsetApply(p: IpsetLine): void {
    const fail = (msg: string) => {
      throw new ProxyError('KPT_EXEC_FAILED', `ipset restore: line ${p.line}: ${msg}`);
    };
    const set = this.sets.get(p.name);
    switch (p.cmd) {
      case 'create':
        if (set) {
          if (!p.exist || set.type !== p.type || set.family !== p.family)
            fail('Set cannot be created: set with the same name already exists');
          return;
        }
        this.sets.set(p.name, { type: p.type!, family: p.family!, entries: new Set() });
        return;
      case 'destroy':
        if (!set) fail('The set with the given name does not exist');
        if (this.referencedSets().has(p.name)) fail('Set cannot be destroyed: it is in use by a kernel component');
        this.sets.delete(p.name);
        return;
      case 'flush':
        if (!set) fail('The set with the given name does not exist');
        set!.entries.clear();
        return;
      case 'add':
      case 'del': {
        if (!set) fail('The set with the given name does not exist');
        const e = canonicalEntry(set!.type, p.entry!, set!.family);
        if (e === null) fail(`Syntax error: '${p.entry}' is not a ${set!.type} member`);
        const has = set!.entries.has(e!);
        if (p.cmd === 'add') {
          if (has && !p.exist) fail("Element cannot be added to the set: it's already added");
          set!.entries.add(e!);
        } else {
          if (!has && !p.exist) fail("Element cannot be deleted from the set: it's not added");
          set!.entries.delete(e!);
        }
        return;
      }
    }
  }

  /** `ipset save` text. */
  ipsetSave(): string {
    const out: string[] = [];
    for (const [name, s] of this.sets) {
      out.push(`create ${name} ${ipsetCreateArgs(s.type, s.family)}`);
      for (const e of s.entries) out.push(`add ${name} ${e}`);
    }
    return out.length ? `${out.join('\n')}\n` : '';
  }

  setNames(): string[] {
    return [...this.sets.keys()];
  }

  members(name: string): ReadonlySet<string> | undefined {
    return this.sets.get(name)?.entries;
  }

  /** Is `member` (ipset's text form) in the set? For the tracer. */
  test(name: string, member: string): boolean {
    return this.sets.get(name)?.entries.has(member) ?? false;
  }

  setType(name: string): IpsetType | undefined {
    return this.sets.get(name)?.type;
  }

  // ------------------------------------------------------------------ iptables

  /** iptables-restore: refused when a rule matches a set that does not exist (xt_set checks at insert). */
  iptablesRestore(text: string, opts: { noflush: boolean } = { noflush: true }): void {
    for (const name of matchSetNames(text))
      if (!this.sets.has(name)) throw new ProxyError('KPT_EXEC_FAILED', `iptables-restore: Set ${name} doesn't exist.`);
    this.iptables.restore(text, opts);
  }

  rules(table: IptablesTable, chain: string): readonly string[] {
    return this.iptables.rules(table, chain);
  }

  private referencedSets(): Set<string> {
    return new Set(matchSetNames(this.iptables.save()));
  }

  // ------------------------------------------------------------------ all

  /** Everything, as the tools print it. */
  dump(): string {
    const ipvs: string[] = [];
    const svcs = [...this.services.values()].sort((a, b) =>
      virtualServerKey(a.vs).localeCompare(virtualServerKey(b.vs)),
    );
    for (const s of svcs) {
      const p = { TCP: '-t', UDP: '-u', SCTP: '--sctp-service' }[s.vs.protocol];
      const a = s.vs.family === 'IPv6' ? `[${s.vs.address}]:${s.vs.port}` : `${s.vs.address}:${s.vs.port}`;
      const pers = s.vs.flags & 1 ? ` -p ${s.vs.timeout}` : '';
      ipvs.push(`-A ${p} ${a} -s ${s.vs.scheduler}${pers}`);
      for (const d of [...s.dests.values()].sort((x, y) => realServerKey(x).localeCompare(realServerKey(y))))
        ipvs.push(`-a ${p} ${a} -r ${realServerKey(d)} -m -w ${d.weight}`);
    }
    const addrs = this.dummy === null ? ['(no dummy link)'] : this.dummyAddresses();
    return [
      `# ipvsadm -Sn`,
      ...ipvs,
      `# ip addr show ${this.dummyName}`,
      ...addrs,
      `# ipset save`,
      this.ipsetSave().trimEnd(),
      `# iptables-save`,
      this.iptables.save().trimEnd(),
      '',
    ].join('\n');
  }
}

interface IpsetLine {
  readonly line: number;
  readonly cmd: 'create' | 'add' | 'del' | 'flush' | 'destroy';
  readonly name: string;
  readonly exist: boolean;
  readonly type?: IpsetType;
  readonly family?: IPFamily;
  readonly entry?: string;
}

function parseIpsetLine(text: string, line: number): IpsetLine {
  const w = text.trim().split(/\s+/);
  const exist = w.includes('-exist');
  const args = w.filter((x) => x !== '-exist');
  const bad = (msg: string): never => {
    throw new ProxyError('KPT_EXEC_FAILED', `ipset restore: line ${line}: Syntax error: ${msg}`);
  };
  const [cmd, name, a2] = args;
  if (!name || !/^[A-Za-z0-9_.:-]{1,31}$/.test(name)) bad(`bad set name in: ${text}`);
  switch (cmd) {
    case 'create': {
      const type = SET_TYPES.find((t) => t === a2) ?? bad(`unknown set type ${a2}`);
      const fi = args.indexOf('family');
      const family: IPFamily = fi >= 0 && args[fi + 1] === 'inet6' ? 'IPv6' : 'IPv4';
      return { line, cmd, name: name!, exist, type, family };
    }
    case 'add':
    case 'del':
      if (!a2) bad(`missing member in: ${text}`);
      return { line, cmd, name: name!, exist, entry: a2! };
    case 'flush':
    case 'destroy':
      return { line, cmd, name: name!, exist };
    default:
      return bad(`unknown command ${cmd}`);
  }
}

function matchSetNames(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    if (!line.includes('--match-set')) continue;
    const t = tokenize(line) ?? [];
    const i = t.indexOf('--match-set');
    if (i >= 0 && t[i + 1]) out.push(t[i + 1]!);
  }
  return out;
}

/** What a Fake holds, in the shape the reconciler adopts (live.ts). */
export function currentOf(fake: Fake, family: IPFamily): IpvsCurrent {
  const virtualServers = new Map<string, CurrentVirtualServer>();
  for (const vs of fake.listServices()) {
    if (vs.family !== family) continue;
    virtualServers.set(virtualServerKey(vs), {
      vs,
      dests: fake.listDests(vs).map((d) => ({ address: d.address, port: d.port, weight: d.weight })),
    });
  }
  const ipsets = new Map<string, ReadonlySet<string>>();
  for (const n of fake.setNames()) ipsets.set(n, new Set(fake.members(n)));
  return {
    virtualServers,
    ipsets,
    addresses: new Set(fake.dummyAddresses().filter((a) => parseIP(a)?.family === family)),
  };
}

/**
 * Apply a plan to a Fake the simple way: every unwanted real server is
 * deleted at once (no draining). `rules`: the restore text to write (with
 * the jump rules), or null to leave the rules alone. For the packet-flow
 * table and tests; the platform's dataplane drains real servers instead.
 */
export function applyPlan(fake: Fake, plan: IpvsPlan, rules: string | null): void {
  fake.ensureDummy();
  fake.ipsetRestore(plan.ipsetScript);
  fake.changeAddresses(true, plan.addAddresses);
  const ops: IpvsOp[] = [
    ...plan.ops,
    ...plan.revived.map((r) => ({ op: 'edit-dest' as const, vs: r.vs, rs: r.rs })),
    ...plan.retired.filter((r) => r.vsKept).map((r) => ({ op: 'del-dest' as const, vs: r.vs, rs: r.rs })),
  ];
  const failures = fake.applyIpvs(ops);
  if (failures.length) throw new ProxyError('KPT_SYNC_FAILED', `IPVS refused ${failures.length} request(s)`);
  if (rules !== null) {
    fake.iptablesRestore(rules, { noflush: true });
    for (const jc of IPVS_JUMP_CHAINS) fake.iptables.ensureRule('prepend', jc.table, jc.from, jumpRuleArgs(jc));
  }
  fake.changeAddresses(false, plan.delAddresses);
}
