// trace: IPVS mode's packet tracer, over a Fake (or the live state read into
// one). It follows a new connection's first packet along the kernel's path:
//
//   remote source:      nat PREROUTING -> filter INPUT -> IPVS (LOCAL_IN, after
//                       filter) -> nat POSTROUTING
//   node-local source:  nat OUTPUT -> IPVS (LOCAL_OUT, right after nat) ->
//                       filter OUTPUT (sees the IPVS-forwarded packet: -m ipvs
//                       matches there) -> nat POSTROUTING
//
// IPVS only takes packets to this node's addresses (kube-ipvs0 holds every
// Service address); other destinations are forwarded untouched. A virtual
// server whose real servers all have weight 0 (or none) answers ICMP port
// unreachable (ip_vs_leave), which a client sees as a refused connection:
// the trace reports REJECT. A packet to a kube-ipvs0 address that matches no
// virtual server is handled by KUBE-IPVS-FILTER (REJECT for new connections
// to ports that are not Services).
//
// Every real server of weight > 0 is a candidate (with its share of the
// weights); masquerade is decided per candidate in POSTROUTING (the mark set
// by KUBE-MARK-MASQ, or the KUBE-LOOP-BACK hairpin set), and the result is
// true when any candidate is masqueraded. The iptables chains are walked by
// the iptables mode's walker (../iptables/walk.ts: `-m physdev` sees no
// bridge, conntrack state is NEW) with marks tracked, and with this mode's
// own matches: `-m set` against the Fake's sets, `-m ipvs` against the
// virtual server that forwarded the packet. Strict/lenient as TraceOptions
// in ../trace.ts.
import { cidrContains, parseCIDR, parseIP } from '../../core/ip.js';
import { traceResult, type TraceFunction, type TraceResultOf, type WalkedPacket } from '../trace.js';
import { IptablesWalk, type ChainSource, type HookedMatch, type RuleStep } from '../iptables/walk.js';
import type { IpsetType } from './ipsets.js';
import { realServerKey, virtualServerKey, type RealServerStatus, type VirtualServer } from './objects.js';

/** What the tracer reads: the Fake, or the live state loaded into one. */
export interface RuleSource extends ChainSource {
  members(set: string): ReadonlySet<string> | undefined;
  setType(set: string): IpsetType | undefined;
  listServices(): VirtualServer[];
  listDests(vs: Pick<VirtualServer, 'protocol' | 'address' | 'port'>): RealServerStatus[];
  dummyAddresses(): string[];
}

/** One rule the packet matched, or the IPVS lookup. */
export interface TraceStep {
  /** "nat/KUBE-SERVICES", "filter/INPUT", or "ipvs". */
  readonly where: string;
  /** The rule text after `-A CHAIN `, or the virtual server for "ipvs". */
  readonly rule: string;
  readonly comment: string | null;
  readonly target: string | null;
  readonly depth: number;
}

export interface TraceCandidate {
  readonly endpoint: string;
  /** weight / sum of weights: the share of new connections a weighted scheduler gives it. */
  readonly probability: number;
  readonly weight: number;
  /** virtualServerKey of the virtual server that chose it. */
  readonly virtualServer: string;
  readonly masq: boolean;
}

export type { TraceOptions, TracePacket, TraceVerdict } from '../trace.js';
export type TraceResult = TraceResultOf<TraceStep, TraceCandidate>;

interface Pkt extends WalkedPacket {
  /** Set once IPVS forwarded the packet: the virtual server it came through. */
  ipvs?: VirtualServer;
}

const stepOf = (s: RuleStep): TraceStep => ({
  where: `${s.table}/${s.chain}`,
  rule: s.rule,
  comment: s.comment,
  target: s.target,
  depth: s.depth,
});

/** The matches of this mode's rules that plain iptables rules do not use: `-m set` and `-m ipvs`. */
function ipvsMatch(source: RuleSource) {
  return (option: string, tokens: readonly string[], i: number, pkt: Pkt): HookedMatch | undefined => {
    const val = tokens[i + 1] ?? '';
    switch (option) {
      case '--match-set':
        return { ok: setMatch(source, val, tokens[i + 2] ?? '', pkt), values: 2 };
      case '--vaddr':
        return { ok: pkt.ipvs !== undefined && parseIP(val)?.text === pkt.ipvs.address, values: 1 };
      case '--vproto':
        return { ok: pkt.ipvs !== undefined && val.toLowerCase() === pkt.ipvs.protocol.toLowerCase(), values: 1 };
      case '--vport':
        return { ok: pkt.ipvs !== undefined && Number(val) === pkt.ipvs.port, values: 1 };
    }
    return undefined;
  };
}

/** `-m set --match-set NAME dir,dir[,dir]` against the Fake's members. */
function setMatch(source: RuleSource, name: string, dirs: string, pkt: Pkt): boolean {
  const type = source.setType(name);
  const members = source.members(name);
  if (type === undefined || members === undefined) return false;
  const d = dirs.split(',');
  const ip = (i: number) => (d[i] === 'src' ? pkt.src : pkt.dst);
  const pp = `${pkt.protocol.toLowerCase()}:${pkt.port}`;
  const norm = (s: string) => parseIP(s)?.text ?? s;
  switch (type) {
    case 'hash:ip':
      return members.has(norm(ip(0)));
    case 'bitmap:port':
      return d[0] === 'dst' && members.has(String(pkt.port));
    case 'hash:ip,port':
      return d[1] === 'dst' && members.has(`${norm(ip(0))},${pp}`);
    case 'hash:ip,port,ip':
      return d[1] === 'dst' && members.has(`${norm(ip(0))},${pp},${norm(ip(2))}`);
    case 'hash:ip,port,net': {
      if (d[1] !== 'dst') return false;
      const prefix = `${norm(ip(0))},${pp},`;
      const who = ip(2);
      for (const m of members) {
        if (!m.startsWith(prefix)) continue;
        const net = m.slice(prefix.length);
        const c = parseCIDR(net.includes('/') ? net : `${net}/${net.includes(':') ? 128 : 32}`);
        if (c && cidrContains(c, who)) return true;
      }
      return false;
    }
  }
}

/** The IPVS lookup: the virtual server for the packet, if any. */
function virtualServer(source: RuleSource, pkt: Pkt): VirtualServer | undefined {
  const key = virtualServerKey({ protocol: pkt.protocol, address: parseIP(pkt.dst)?.text ?? pkt.dst, port: pkt.port });
  return source.listServices().find((v) => virtualServerKey(v) === key);
}

/**
 * Trace one new connection's first packet. `localIPs` are the node's own
 * addresses; kube-ipvs0's addresses and loopback are local too.
 */
export const trace: TraceFunction<RuleSource, TraceResult> = (source, packet, localIPs, opts = {}) => {
  const tr = new IptablesWalk<TraceStep, Pkt>(source, [...localIPs, ...source.dummyAddresses()], opts, {
    marks: 'tracked',
    step: stepOf,
    match: ipvsMatch(source),
  });
  const { pkt, srcLocal }: { pkt: Pkt; srcLocal: boolean } = tr.start(packet);
  const candidates: TraceCandidate[] = [];
  // The walk's own masq and DNAT candidates are iptables mode's reading; here
  // masquerade is decided per real server, and the output lists those.
  const done = (): TraceResult =>
    traceResult({
      outputs: tr.outputs,
      matched: tr.matched,
      steps: tr.steps,
      notUnderstood: tr.notUnderstood,
      candidates,
      masq: candidates.some((c) => c.masq),
      output: outputOf(tr.outputs, candidates),
    });

  tr.run('nat', srcLocal ? 'OUTPUT' : 'PREROUTING', pkt);
  const dstLocal = tr.isLocal(pkt.dst);
  if (!srcLocal) {
    if (!dstLocal) {
      tr.run('filter', 'FORWARD', pkt); // not for IPVS: forwarded as it is
      return done();
    }
    tr.run('filter', 'INPUT', pkt);
    if (tr.outputs.length) return done();
  }
  const vs = virtualServer(source, pkt);
  if (!vs) {
    // Delivered to the node itself; a node-local packet still passes OUTPUT then INPUT.
    if (srcLocal) {
      tr.run('filter', 'OUTPUT', pkt);
      if (dstLocal && !tr.outputs.length) tr.run('filter', 'INPUT', pkt);
    }
    return done();
  }
  const dests = source.listDests(vs).filter((d) => d.weight > 0);
  const total = dests.reduce((n, d) => n + d.weight, 0);
  const lookup = `${virtualServerKey(vs)} ${vs.scheduler}`;
  tr.record('ipvs', `${lookup}: ${dests.map((d) => realServerKey(d)).join(', ') || 'no real server'}`, {
    where: 'ipvs',
    rule: `${lookup}${vs.flags & 1 ? ` persistent ${vs.timeout}` : ''}`,
    comment: null,
    target: dests.length ? 'masq' : null,
    depth: 0,
  });
  if (dests.length === 0) {
    tr.outputs.push('REJECT'); // ip_vs_leave: ICMP port unreachable
    return done();
  }
  const markBefore = tr.mark;
  for (const d of dests) {
    const fwd: Pkt = { ...pkt, dst: d.address, port: d.port, ipvs: vs };
    tr.mark = markBefore;
    const before = tr.outputs.length;
    if (srcLocal) tr.run('filter', 'OUTPUT', fwd);
    const out = tr.outputs.slice(before);
    if (out.includes('DROP') || out.includes('REJECT')) continue; // refused on the way out (KUBE-IPVS-OUT-FILTER)
    const masqBefore = tr.steps.length;
    tr.run('nat', 'POSTROUTING', fwd);
    candidates.push({
      endpoint: realServerKey(d),
      weight: d.weight,
      probability: d.weight / total,
      virtualServer: virtualServerKey(vs),
      masq: tr.steps.slice(masqBefore).some((s) => s.target === 'MASQUERADE'),
    });
  }
  return done();
};

/** Real servers when there are any; else the first DROP/REJECT; else ACCEPT (or ""). */
function outputOf(outputs: readonly string[], candidates: readonly TraceCandidate[]): string {
  if (candidates.length > 0) return candidates.map((c) => c.endpoint).join(', ');
  return outputs.find((o) => o === 'DROP' || o === 'REJECT') ?? (outputs.includes('ACCEPT') ? 'ACCEPT' : '');
}
