// ebpf side of `explain`: the maps the proxy pinned are looked up live, in
// the order the programs look them up (src/dataplane/ebpf/trace.ts), with
// the service-port names from kpt_names. Nothing is written.
// `--service` lists the Service's entries of kpt_svc (each names its kind:
// cluster IP, node port, external or load-balancer IP) by the names in
// kpt_names, so it needs nothing but the maps.
import { EBPF_DUMP_KIND } from '../dumps.js';
import { ProxyError } from '../../../core/errors.js';
import { CANARY_PORT, canaryVIP } from '../../../core/canary.js';
import type { IPFamily } from '../../../core/types.js';
import { Fake } from '../../../dataplane/ebpf/fake.js';
import * as L from '../../../dataplane/ebpf/layout.js';
import type { MapReader } from '../../../dataplane/ebpf/store.js';
import { trace } from '../../../dataplane/ebpf/trace.js';
import type { TracePacket } from '../../../dataplane/trace.js';
import { listIfaces, openIfaceSource } from '../../../platform/ebpf/ifaces.js';
import { PinnedMaps } from '../../../platform/ebpf/pinned.js';
import { PinDir } from '../../../platform/ebpf/pins.js';
import type { AddressKind, ServiceAddress } from '../../explainservice.js';
import { summarize, type Explanation } from '../../explainview.js';
import { LB_ALGORITHMS } from '../../../core/lbalgorithm.js';

/** Interface names to ifindexes, for the interface local detectors; null when they cannot be read. */
export type IfindexOf = (name: string) => number | undefined;

/** The live interfaces of this network namespace. */
export async function liveIfindexOf(): Promise<IfindexOf> {
  await openIfaceSource();
  const ifaces = listIfaces();
  return (name) => ifaces.find((i) => i.name === name)?.index;
}

/** Open the pinned maps for the duration of `use`. */
export async function withPinnedMaps<T>(pinRoot: string, use: (maps: MapReader) => Promise<T> | T): Promise<T> {
  const maps = new PinnedMaps(new PinDir(pinRoot));
  try {
    return await use(maps);
  } finally {
    maps.close();
  }
}

/** Walk one packet through the maps (live or a Fake). */
export function explainEbpfMaps(
  maps: MapReader,
  packet: TracePacket,
  localIPs: readonly string[],
  opts: { sport?: number | null; ifindexOf?: IfindexOf },
): Explanation {
  const r = trace(maps, packet, localIPs, {
    strict: false,
    ...(opts.sport != null ? { sport: opts.sport } : {}),
    ...(opts.ifindexOf ? { ifindexOf: opts.ifindexOf } : {}),
  });
  const svcStep = r.steps.find((s) => s.map === L.MAPS.svc.name && s.entry !== 'no entry');
  const svcId = svcStep ? Number(/ => svc (\d+) /.exec(svcStep.entry)?.[1]) : NaN;
  const nameRaw = Number.isNaN(svcId) ? null : maps.lookup('names', L.encodeU32(svcId));
  const service = nameRaw ? L.decodeName(nameRaw) : null;
  const candidates = r.candidates.map((c) => ({ endpoint: c.endpoint, probability: c.probability }));
  // The svc entry's text names its algorithm (describe.ts).
  const algorithm = LB_ALGORITHMS.find((a) => a !== 'random' && svcStep?.entry.includes(` ${a} `));
  return {
    mode: 'ebpf',
    packet: { src: packet.src, dst: packet.dst, port: packet.port, protocol: packet.protocol ?? 'TCP' },
    service,
    verdict: r.verdict,
    candidates,
    masquerade: r.masq && r.verdict === 'DNAT',
    steps: r.steps.map((s) => ({ where: s.map, rule: s.entry, comment: null, depth: 0, probability: 1 })),
    notUnderstood: r.notUnderstood,
    summary: summarize(service, r.verdict, candidates, r.masq, algorithm ?? 'random'),
    ...(algorithm ? { algorithm } : {}),
  };
}

/** Where the maps send the datapath canary's ClusterIP: its listener (ip, port), as a stopped proxy left it. */
export function ebpfCanaryEndpoint(maps: MapReader, family: IPFamily): readonly [string, number] | null {
  const probe = {
    src: CANARY_PROBE_SOURCE[family],
    dst: canaryVIP(family),
    port: CANARY_PORT,
    protocol: 'TCP' as const,
  };
  // ip:port, or [ip]:port for IPv6.
  const m = /^\[?([^[\]]+?)\]?:(\d+)$/.exec(explainEbpfMaps(maps, probe, [], {}).candidates[0]?.endpoint ?? '');
  return m ? [m[1]!, Number(m[2])] : null;
}

/** Any source will do: the canary has one endpoint and no affinity (documentation addresses, never a node's). */
const CANARY_PROBE_SOURCE: Readonly<Record<IPFamily, string>> = { IPv4: '192.0.2.1', IPv6: '2001:db8::1' };

const KINDS: Record<L.SvcKind, AddressKind> = {
  clusterIP: 'cluster IP',
  nodePort: 'node port',
  externalIP: 'external IP',
  loadBalancer: 'load balancer IP',
};

/** The Service's entries of kpt_svc for one family, named through kpt_names. */
export function ebpfServiceAddresses(maps: MapReader, service: string, family: IPFamily): ServiceAddress[] {
  const out: ServiceAddress[] = [];
  for (const [k, v] of maps.dump('svc')) {
    if (L.familyOfEntry('svc', k) !== family) continue;
    const key = L.decodeSvcKey(k);
    const value = L.decodeSvcValue(v);
    const raw = maps.lookup('names', L.encodeU32(value.svcId));
    const spn = raw ? L.decodeName(raw) : null;
    if (spn === null || (spn !== service && !spn.startsWith(`${service}:`))) continue;
    const nodePort = value.kind === 'nodePort';
    out.push({
      servicePort: spn,
      kind: KINDS[value.kind],
      address: nodePort ? null : key.addr,
      port: key.port,
      protocol: key.proto,
    });
  }
  const order = Object.values(KINDS);
  return out.sort(
    (a, b) =>
      a.servicePort.localeCompare(b.servicePort) ||
      order.indexOf(a.kind) - order.indexOf(b.kind) ||
      (a.address ?? '').localeCompare(b.address ?? ''),
  );
}

// ---- a saved copy of the maps (`explain --save FILE`, read by `--from FILE`)
//
// BPF maps have no text form of their own, so `explain --save` writes the
// maps the tracer reads as JSON, hex key and value per entry, with the
// node's interfaces (for --iif) and addresses (for node ports):
//   {"kind":"kube-proxy-ts ebpf maps","version":1,"maps":{"svc":[["<key>","<value>"],...],...},
//    "ifaces":[{"name":"eth0","index":2}],"localIPs":["192.168.0.2",...]}

/** The maps a trace reads: every map the proxy renders, and the ClientIP affinities it remembers. */
const SAVED_MAPS: readonly L.MapName[] = L.MAP_NAMES.filter((m) => L.MAPS[m].rendered || m === 'affinity');

interface EbpfDump {
  readonly kind: string;
  readonly version: number;
  readonly maps: Partial<Record<L.MapName, Array<[string, string]>>>;
  readonly ifaces: ReadonlyArray<{ readonly name: string; readonly index: number }>;
  readonly localIPs: readonly string[];
}

export async function saveEbpfMaps(maps: MapReader, localIPs: readonly string[]): Promise<string> {
  await openIfaceSource();
  const doc: EbpfDump = {
    kind: EBPF_DUMP_KIND,
    version: 1,
    maps: Object.fromEntries(SAVED_MAPS.map((m) => [m, maps.dump(m).map(([k, v]) => [L.hex(k), L.hex(v)])])),
    ifaces: listIfaces().map((i) => ({ name: i.name, index: i.index })),
    localIPs: [...localIPs],
  };
  return `${JSON.stringify(doc)}\n`;
}

/** A saved copy of the maps loaded into the ebpf Fake, with the node's interfaces and addresses. */
export function ebpfFromDump(
  text: string,
  file: string,
): { readonly maps: MapReader; readonly ifindexOf: IfindexOf; readonly localIPs: readonly string[] } {
  let doc: EbpfDump;
  try {
    doc = JSON.parse(text) as EbpfDump;
  } catch {
    throw new ProxyError('KPT_INPUT_INVALID', `${file}: not JSON`);
  }
  if (doc?.kind !== EBPF_DUMP_KIND || doc.version !== 1 || typeof doc.maps !== 'object')
    throw new ProxyError('KPT_INPUT_INVALID', `${file}: not a version 1 "${EBPF_DUMP_KIND}" file (explain --save)`);
  const maglev = doc.maps.maglev?.[0]?.[1];
  const fake = new Fake(maglev === undefined ? {} : { maglevM: maglev.length / 4 });
  try {
    for (const m of SAVED_MAPS)
      fake.apply(
        (doc.maps[m] ?? []).map(([k, v]) => ({ map: m, op: 'update' as const, key: L.unhex(k), value: L.unhex(v) })),
      );
  } catch (err) {
    throw new ProxyError('KPT_INPUT_INVALID', `${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const ifaces = doc.ifaces ?? [];
  return { maps: fake, ifindexOf: (name) => ifaces.find((i) => i.name === name)?.index, localIPs: doc.localIPs ?? [] };
}
