// trace: the ebpf mode's packet tracer. It follows the first packet of a new
// connection through the same lookups, in the same order, as the programs
// (handle/new_flow in src/bpf/kpt.c, balance/choose in src/bpf/lb.h), over
// map contents: a Fake, or the live pinned maps (explain). Each lookup that
// decides something becomes a step.
//
// The hook: a packet from one of the node's own addresses is sent by the node
// and meets the programs at egress; anything else arrives at ingress. For a
// random choice every endpoint of the chosen set is a candidate with an equal
// share; for Maglev each endpoint's share of the table, or, when the source
// port is given, the one endpoint the flow hash picks. A remembered ClientIP
// affinity is reported as a note: whether it still holds depends on time.
// Checked against the real programs with BPF_PROG_TEST_RUN
// (test/e2e/ebpf-programs.test.ts). Pure.
import { joinHostPort } from '../../core/ip.js';
import type { Protocol } from '../../core/types.js';
import { traceResult, type TraceFunction, type TraceOptions, type TracePacket, type TraceResultOf } from '../trace.js';
import { entryText } from './describe.js';
import { clientHash } from './hash.js';
import * as L from './layout.js';
import type { MapReader } from './store.js';

export type { TraceOptions, TracePacket, TraceVerdict } from '../trace.js';

export interface TraceStep {
  /** The map looked up (its C name), or "hook". */
  readonly map: string;
  /** What was found: the decoded entry, or why nothing was. */
  readonly entry: string;
}

export interface TraceCandidate {
  readonly endpoint: string;
  readonly probability: number;
  readonly setId: number;
  readonly slot: number;
}

export type TraceResult = TraceResultOf<TraceStep, TraceCandidate>;

/** What the tracer reads: the Fake, or the live maps. */
export type RuleSource = MapReader;

export interface EbpfTraceOptions extends TraceOptions {
  /** The client's source port: Maglev then reports the one endpoint this flow gets. */
  readonly sport?: number;
  /** ifindex of an interface name (packet.iif), for the interface local detectors. */
  readonly ifindexOf?: (name: string) => number | undefined;
}

const familyOf = (ip: string) => (ip.includes(':') ? 'IPv6' : 'IPv4');

class Walk {
  readonly steps: TraceStep[] = [];
  readonly matched: string[] = [];

  constructor(private readonly src: RuleSource) {}

  look(map: L.MapName, key: Uint8Array): Uint8Array | null {
    const v = this.src.lookup(map, key);
    const name = L.MAPS[map].name;
    if (v) {
      const text = entryText(map, key, v);
      this.steps.push({ map: name, entry: text });
      this.matched.push(`${name}: ${text}`);
    } else {
      this.steps.push({ map: name, entry: 'no entry' });
    }
    return v;
  }

  note(map: string, entry: string): void {
    this.steps.push({ map, entry });
  }
}

export const trace: TraceFunction<RuleSource, TraceResult, EbpfTraceOptions> = (
  source,
  packet,
  localIPs,
  opts = {},
) => {
  const w = new Walk(source);
  const proto: Protocol = packet.protocol ?? 'TCP';
  // One lookup decides each packet, so there is one output; every map entry is understood.
  const done = (output: string, masq = false, candidates: TraceCandidate[] = []): TraceResult =>
    traceResult({ outputs: [output], masq, matched: w.matched, steps: w.steps, candidates, notUnderstood: [] });
  const family = familyOf(packet.dst);
  const cfgRaw = w.look('cfg', L.encodeU32(L.familyIndex(family)));
  const cfg = cfgRaw ? L.decodeCfgValue(cfgRaw) : null;
  if (!cfg || !(cfg.flags & L.CFG_ENABLED)) return done('');
  if (proto === 'SCTP') {
    w.note('hook', 'SCTP is not translated: the packet passes');
    return done('');
  }
  const ingress = !localIPs.includes(packet.src);
  w.note('hook', ingress ? 'ingress (the packet enters the node)' : 'egress (the node sends it)');
  w.note(L.MAPS.ct.name, 'a new connection has no entry yet');

  // find_service
  const afRaw = w.look('addrs', L.encodeAddrKey(packet.dst));
  if (!afRaw) {
    const inCidr = w.look('svcCidrs', L.encodeLpmKey({ addr: packet.dst, prefix: family === 'IPv4' ? 32 : 128 }));
    return done(inCidr ? 'DROP' : '');
  }
  const af = L.decodeU32(afRaw);
  let svcRaw: Uint8Array | null = null;
  if (af & L.ADDR_SERVICE) svcRaw = w.look('svc', L.encodeSvcKey({ addr: packet.dst, port: packet.port, proto }));
  if (!svcRaw && af & L.ADDR_NODEPORT)
    svcRaw = w.look('svc', L.encodeSvcKey({ addr: L.anyAddr(family), port: packet.port, proto }));
  if (!svcRaw) return done(af & L.ADDR_CLUSTER_IP ? 'REJECT' : '');
  const svc = L.decodeSvcValue(svcRaw);

  // balance
  if (svc.kind === 'loadBalancer' && svc.flags & L.SVC_SOURCE_RANGES) {
    const key = { svcId: svc.svcId, addr: packet.src, prefix: family === 'IPv4' ? 32 : 128 };
    if (!w.look('lbSrc', L.encodeLpmSvcKey(key))) return done('DROP');
  }
  if (svc.flags & L.SVC_NO_ENDPOINTS) return done('REJECT');
  const pod = srcIsPod(w, cfg, packet, ingress, opts);
  const local = () => {
    const v = w.look('addrs', L.encodeAddrKey(packet.src));
    return v !== null && (L.decodeU32(v) & L.ADDR_LOCAL) !== 0;
  };
  let setId: number;
  let masq: boolean;
  const detect = (cfg.flags & (L.CFG_DETECT_CIDR | L.CFG_DETECT_IFACE)) !== 0;
  if (svc.kind === 'clusterIP') {
    setId = svc.flags & L.SVC_LOCAL_POLICY ? svc.localSet : svc.clusterSet;
    masq = (cfg.flags & L.CFG_MASQ_ALL) !== 0 || (detect && !pod);
  } else if (!(svc.flags & L.SVC_LOCAL_POLICY)) {
    setId = svc.clusterSet;
    masq = true;
  } else if (pod) {
    setId = svc.clusterSet;
    masq = false;
  } else if (local()) {
    setId = svc.clusterSet;
    masq = true;
  } else {
    setId = svc.localSet;
    masq = false;
  }
  // dsr.h: with --ebpf-lb-mode=dsr, external traffic from outside the node is DNATed only.
  const dsr =
    masq &&
    ingress &&
    (cfg.flags & L.CFG_DSR) !== 0 &&
    svc.kind !== 'clusterIP' &&
    !(svc.flags & L.SVC_LOCAL_POLICY) &&
    !pod &&
    !local();
  if (dsr) {
    masq = false;
    w.note(
      'hook',
      "direct server return: DNAT only; to another node's endpoint the first packet carries the Service's address and port in an IP option, and that node answers the client",
    );
  }
  const candidates = choose(w, svc, setId, { ...packet, protocol: proto }, opts);
  if (candidates.length === 0) return done('DROP');
  if (svc.affinitySecs) noteAffinity(w, svc.svcId, packet.src);
  if (candidates.some((c) => c.endpoint === joinHostPort(packet.src, portOf(c.endpoint)))) masq = true;
  if (masq)
    w.note(
      'hook',
      ingress
        ? 'masqueraded by the programs: the source becomes the node address towards the endpoint, at egress'
        : "the node's own connection: its source is the node's route source to the endpoint, set with the DNAT",
    );
  return done(candidates.map((c) => c.endpoint).join(', '), masq, candidates);
};

function portOf(hostPort: string): number {
  return Number(hostPort.slice(hostPort.lastIndexOf(':') + 1));
}

function srcIsPod(w: Walk, cfg: L.CfgValue, packet: TracePacket, ingress: boolean, opts: EbpfTraceOptions): boolean {
  if (cfg.flags & L.CFG_DETECT_CIDR) {
    const prefix = familyOf(packet.src) === 'IPv4' ? 32 : 128;
    return w.look('podCidrs', L.encodeLpmKey({ addr: packet.src, prefix })) !== null;
  }
  if (cfg.flags & L.CFG_DETECT_IFACE && ingress) {
    const ifindex = packet.iif !== undefined ? opts.ifindexOf?.(packet.iif) : undefined;
    if (ifindex === undefined) {
      w.note(L.MAPS.ifaces.name, 'no input interface given: not from a local pod');
      return false;
    }
    const v = w.look('ifaces', L.encodeIfaceKey({ ifindex, family: familyOf(packet.dst) }));
    return v !== null && (L.decodeU32(v) & L.IFACE_POD) !== 0;
  }
  return false;
}

/** Every endpoint the programs may pick from set setId, with its chance. */
function choose(
  w: Walk,
  svc: L.SvcValue,
  setId: number,
  packet: TracePacket & { protocol: Protocol },
  opts: EbpfTraceOptions,
): TraceCandidate[] {
  if (setId === 0) {
    w.note(L.MAPS.sets.name, 'no endpoint set for this traffic');
    return [];
  }
  const setRaw = w.look('sets', L.encodeU32(setId));
  const count = setRaw ? L.decodeSetValue(setRaw).count : 0;
  if (count === 0) return [];
  const ep = (slot: number): string | null => {
    const v = w.look('eps', L.encodeEpKey({ setId, slot }));
    if (!v) return null;
    const d = L.decodeEpValue(v);
    return joinHostPort(d.addr, d.port);
  };
  if (svc.algo === 'maglev' || svc.algo === 'source-hash') {
    const lutRaw = w.look('maglev', L.encodeU32(setId));
    if (!lutRaw) return [];
    const lut = L.decodeMaglev(lutRaw);
    const addrOnly = svc.algo === 'source-hash';
    if (opts.sport !== undefined || addrOnly) {
      const h = clientHash({ src: packet.src, sport: opts.sport ?? 0 }, addrOnly);
      const slot = lut[h % lut.length]!;
      const e = ep(slot);
      return e ? [{ endpoint: e, probability: 1, setId, slot }] : [];
    }
    const share = new Map<number, number>();
    for (const s of lut) share.set(s, (share.get(s) ?? 0) + 1);
    const out: TraceCandidate[] = [];
    for (const [slot, n] of [...share].sort((a, b) => a[0] - b[0])) {
      const e = ep(slot);
      if (e) out.push({ endpoint: e, probability: n / lut.length, setId, slot });
    }
    return out;
  }
  if (svc.algo === 'round-robin') {
    // The set's next turn, as the programs read it (and then advance it).
    const slot = L.decodeSetValue(setRaw!).rrNext % count;
    const e = ep(slot);
    return e ? [{ endpoint: e, probability: 1, setId, slot }] : [];
  }
  const out: TraceCandidate[] = [];
  for (let slot = 0; slot < count; slot++) {
    const e = ep(slot);
    if (e) out.push({ endpoint: e, probability: 1 / count, setId, slot });
  }
  return out;
}

function noteAffinity(w: Walk, svcId: number, client: string): void {
  const v = w.look('affinity', L.encodeAffKey({ client, svcId }));
  if (!v) return;
  const d = L.decodeAffValue(v);
  w.note(L.MAPS.affinity.name, `ClientIP affinity remembers ${joinHostPort(d.addr, d.port)} (used while not expired)`);
}
