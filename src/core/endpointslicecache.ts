// EndpointSlice intake (upstream endpointslicecache.go): slices of one IP
// family -> Endpoint lists per service port. Several slices of a Service are
// merged. Slices are parsed once, on arrival, into a canonical form
// (SliceInfo), and only its compact encoding is kept (one short string per
// slice, decoded again when its Service is checked out), because the parsed
// objects cost several times what the strings do (bench/README.md, memory).
// A slice whose encoding did not change is not a change.
//
// Like upstream, the cache keeps per Service the slices "applied" (what the
// last checkout produced) and "pending" (arrived since). checkoutChanges()
// applies the pending ones and returns previous/current per changed Service.

import type { EndpointSlice } from './api.js';
import { LABEL_SERVICE_NAME } from './api.js';
import { flat } from './flat.js';
import { finish, type Steps } from './steps.js';
import { joinHostPort, parseIP } from './ip.js';
import type { SkipReporter } from './serviceport.js';
import { isObjectName, noSkipReporter } from './serviceport.js';
import type { Endpoint, IPFamily, Protocol, ServicePortName } from './types.js';
import { namespacedName, servicePortNameString } from './types.js';

/** The endpoints of one service port (name carries the protocol). */
export interface PortEndpoints {
  readonly name: ServicePortName;
  /** Sorted by Endpoint.key. */
  readonly endpoints: readonly Endpoint[];
}

/**
 * Endpoints keyed by endpointsKey(ServicePortName). The key includes the
 * protocol (upstream ServicePortName equality does), so an unnamed TCP port
 * and an unnamed UDP port of one Service never merge.
 */
export type EndpointsMap = ReadonlyMap<string, PortEndpoints>;

export function endpointsKey(spn: ServicePortName): string {
  return `${servicePortNameString(spn)}/${spn.protocol}`;
}

interface SlicePort {
  readonly name: string;
  readonly port: number;
  readonly protocol: Protocol;
}
interface SliceEndpointInfo {
  readonly ip: string;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  readonly nodeName: string;
  readonly zone: string;
  readonly zoneHints: readonly string[] | null;
  readonly nodeHints: readonly string[] | null;
}
/** Upstream endpointSliceInfo: what of a slice matters, in canonical order. */
interface SliceInfo {
  readonly ports: readonly SlicePort[];
  readonly endpoints: readonly SliceEndpointInfo[];
}

/** A SliceInfo encoded (encodeSliceInfo): equal slices have equal encodings. */
type EncodedSlice = string;

/** Services whose endpoint maps one checkout step builds. */
const CHECKOUT_STEP = 200;
const NO_SLICES: ReadonlyMap<string, EncodedSlice> = new Map();

interface SliceTracker {
  applied: Map<string, EncodedSlice>;
  /** Slices arrived since the last checkout; null marks a deletion. Null when none (most Services, most of the time). */
  pending: Map<string, EncodedSlice | null> | null;
}

export interface EndpointsChange {
  readonly previous: EndpointsMap;
  readonly current: EndpointsMap;
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** "ns/service" a slice belongs to, and the slice's own name; null when unusable. */
export function endpointSliceKeys(slice: unknown): { serviceKey: string; sliceName: string } | null {
  if (!isRecord(slice) || !isRecord(slice['metadata'])) return null;
  const md = slice['metadata'];
  const labels = isRecord(md['labels']) ? md['labels'] : {};
  const svcName = labels[LABEL_SERVICE_NAME];
  const ns = md['namespace'];
  const name = md['name'];
  // Names as the API server validates them: a label naming no possible Service (1 MiB, "a/b") is bad input.
  if (!isObjectName(svcName) || !isObjectName(ns) || !isObjectName(name)) return null;
  return { serviceKey: namespacedName(ns, svcName), sliceName: name };
}

function hintNames(list: unknown): string[] | null {
  if (!Array.isArray(list)) return null;
  const names = list
    .map((h) => (isRecord(h) && typeof h['name'] === 'string' ? h['name'] : null))
    .filter((n): n is string => n !== null && n !== '');
  return names.length === 0 ? null : [...new Set(names)].sort();
}

function condition(c: unknown, dflt: boolean): boolean {
  return typeof c === 'boolean' ? c : dflt;
}

function parsePorts(raw: unknown, report: (r: string) => void): SlicePort[] {
  const out: SlicePort[] = [];
  for (const p of Array.isArray(raw) ? raw : []) {
    if (!isRecord(p)) continue;
    // A nil name (absent or null) is not the same as "": upstream skips nil.
    if (typeof p['name'] !== 'string') continue;
    if (p['port'] === undefined || p['port'] === null || p['port'] === 0) continue;
    const port = p['port'];
    if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) {
      report(`invalid endpoint port ${JSON.stringify(port)}`);
      continue;
    }
    const proto = p['protocol'] === undefined ? 'TCP' : p['protocol'];
    if (proto !== 'TCP' && proto !== 'UDP' && proto !== 'SCTP') {
      report(`invalid endpoint port protocol ${JSON.stringify(proto)}`);
      continue;
    }
    out.push({ name: p['name'], port, protocol: proto });
  }
  return out;
}

function parseEndpoints(raw: unknown, family: IPFamily, report: (r: string) => void): SliceEndpointInfo[] {
  const out: SliceEndpointInfo[] = [];
  for (const e of Array.isArray(raw) ? raw : []) {
    if (!isRecord(e)) continue;
    const addrs = e['addresses'];
    if (!Array.isArray(addrs) || addrs.length === 0) continue;
    const ip = parseIP(addrs[0]); // only addresses[0] is used (upstream)
    if (!ip) {
      report(`invalid endpoint address ${JSON.stringify(addrs[0])}`);
      continue;
    }
    if (ip.family !== family) continue;
    const cond = isRecord(e['conditions']) ? e['conditions'] : {};
    const hints = isRecord(e['hints']) ? e['hints'] : {};
    out.push({
      ip: ip.text,
      ready: condition(cond['ready'], true),
      serving: condition(cond['serving'], true),
      terminating: condition(cond['terminating'], false),
      nodeName: typeof e['nodeName'] === 'string' ? e['nodeName'] : '',
      zone: typeof e['zone'] === 'string' ? e['zone'] : '',
      zoneHints: hintNames(hints['forZones']),
      nodeHints: hintNames(hints['forNodes']),
    });
  }
  out.sort((a, b) => (a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : 0));
  return out;
}

function sliceInfo(slice: EndpointSlice, family: IPFamily, report: (r: string) => void): SliceInfo {
  return { ports: parsePorts(slice.ports, report), endpoints: parseEndpoints(slice.endpoints, family, report) };
}

const READY = 1;
const SERVING = 2;
const TERMINATING = 4;

/**
 * JSON of arrays, no keys: [[[name, port, protocol]...], [[ip, conditions
 * bits, nodeName, zone, zoneHints, nodeHints]...]]. JSON keeps any string
 * the API sent intact, so decoding gives back exactly the SliceInfo.
 */
function encodeSliceInfo(info: SliceInfo): EncodedSlice {
  return JSON.stringify([
    info.ports.map((p) => [p.name, p.port, p.protocol]),
    info.endpoints.map((e) => [
      e.ip,
      (e.ready ? READY : 0) | (e.serving ? SERVING : 0) | (e.terminating ? TERMINATING : 0),
      e.nodeName,
      e.zone,
      e.zoneHints,
      e.nodeHints,
    ]),
  ]);
}

type EncodedPort = [string, number, Protocol];
type EncodedEndpoint = [string, number, string, string, string[] | null, string[] | null];

function decodeSliceInfo(enc: EncodedSlice): SliceInfo {
  const [ports, endpoints] = JSON.parse(enc) as [EncodedPort[], EncodedEndpoint[]];
  return {
    ports: ports.map(([name, port, protocol]) => ({ name, port, protocol })),
    endpoints: endpoints.map(([ip, bits, nodeName, zone, zoneHints, nodeHints]) => ({
      ip,
      ready: (bits & READY) !== 0,
      serving: (bits & SERVING) !== 0,
      terminating: (bits & TERMINATING) !== 0,
      nodeName,
      zone,
      zoneHints,
      nodeHints,
    })),
  };
}

/** Pick between two endpoints with the same IP:port: non-terminating wins, then local. */
function preferEndpoint(old: Endpoint, cand: Endpoint): Endpoint {
  if (old.terminating !== cand.terminating) return old.terminating ? cand : old;
  if (old.isLocal !== cand.isLocal) return old.isLocal ? old : cand;
  return old;
}

export class EndpointSliceCache {
  private readonly trackers = new Map<string, SliceTracker>();
  /** Service keys with pending slices (so pendingCount is O(1) per handler call). */
  private readonly pendingServices = new Set<string>();

  constructor(
    readonly nodeName: string,
    readonly family: IPFamily,
    private readonly onSkip: SkipReporter = noSkipReporter,
  ) {}

  /**
   * Record a slice add/update (remove=false) or delete (remove=true). Returns
   * whether this is a change against what is pending or applied. Slices
   * without the service-name label or of another address family return false.
   */
  updatePending(slice: EndpointSlice, remove: boolean): boolean {
    const keys = endpointSliceKeys(slice);
    if (!keys) {
      this.onSkip('', 'endpointslice without namespace/name or kubernetes.io/service-name label');
      return false;
    }
    if (slice.addressType !== this.family) return false;
    const report = (r: string) => this.onSkip(`${keys.serviceKey}/${keys.sliceName}`, r);
    const enc = remove ? null : encodeSliceInfo(sliceInfo(slice, this.family, report));
    let t = this.trackers.get(keys.serviceKey);
    if (!t) {
      t = { applied: new Map(), pending: null };
      this.trackers.set(keys.serviceKey, t);
    }
    // undefined: never seen; null: a deletion is pending.
    const prior = t.pending?.has(keys.sliceName) ? t.pending.get(keys.sliceName)! : t.applied.get(keys.sliceName);
    const changed = prior === undefined || prior === null ? !remove : prior !== enc;
    if (changed) {
      (t.pending ??= new Map()).set(keys.sliceName, enc);
      this.pendingServices.add(keys.serviceKey);
    }
    if (t.applied.size === 0 && (t.pending === null || t.pending.size === 0)) this.trackers.delete(keys.serviceKey);
    return changed;
  }

  /** Number of Services with pending slice changes. */
  pendingCount(): number {
    return this.pendingServices.size;
  }

  /** Apply pending slices; previous/current endpoints for every Service that had any. */
  checkoutChanges(): Map<string, EndpointsChange> {
    return finish(this.checkoutChangesSteps());
  }

  /**
   * checkoutChanges as steps. The pending slices are taken and applied at
   * once, in the first step, so slices that arrive between steps wait for
   * the next checkout; the endpoint maps (the costly part, at 10k Services a
   * stall of its own) are built afterwards, CHECKOUT_STEP Services a step,
   * from the slices as they were (each Service's applied set is only
   * changed here, and checkouts never overlap).
   */
  *checkoutChangesSteps(): Steps<Map<string, EndpointsChange>> {
    const taken: Array<{ serviceKey: string; before: ReadonlyMap<string, EncodedSlice>; after: SliceTracker }> = [];
    for (const serviceKey of this.pendingServices) {
      const t = this.trackers.get(serviceKey);
      if (!t || t.pending === null || t.pending.size === 0) continue;
      const before = t.applied.size === 0 ? NO_SLICES : new Map(t.applied);
      for (const [name, enc] of t.pending) {
        if (enc === null) t.applied.delete(name);
        else t.applied.set(name, enc);
      }
      t.pending = null;
      if (t.applied.size === 0) this.trackers.delete(serviceKey);
      taken.push({ serviceKey, before, after: t });
    }
    this.pendingServices.clear();
    const changes = new Map<string, EndpointsChange>();
    for (let i = 0; i < taken.length; i++) {
      if (i > 0 && i % CHECKOUT_STEP === 0) yield;
      const { serviceKey, before, after } = taken[i]!;
      changes.set(serviceKey, {
        previous: this.endpointsMapOf(serviceKey, before),
        current: this.endpointsMapOf(serviceKey, after.applied),
      });
    }
    return changes;
  }

  /** The applied endpoints of one Service. */
  endpointsOf(serviceKey: string): EndpointsMap {
    const t = this.trackers.get(serviceKey);
    return t ? this.endpointsMapOf(serviceKey, t.applied) : new Map();
  }

  private endpointsMapOf(serviceKey: string, slices: ReadonlyMap<string, EncodedSlice>): EndpointsMap {
    const [namespace, name] = serviceKey.split('/') as [string, string];
    const byPort = new Map<string, { name: ServicePortName; eps: Map<string, Endpoint> }>();
    const sliceNames = [...slices.keys()].sort(); // deterministic duplicate resolution
    for (const sliceName of sliceNames) {
      const info = decodeSliceInfo(slices.get(sliceName)!);
      for (const p of info.ports) {
        const spn: ServicePortName = { namespace, name, port: p.name, protocol: p.protocol };
        const k = endpointsKey(spn);
        let entry = byPort.get(k);
        if (!entry) {
          entry = { name: spn, eps: new Map() };
          byPort.set(k, entry);
        }
        for (const e of info.endpoints) this.addEndpoint(entry.eps, e, p.port);
      }
    }
    const out = new Map<string, PortEndpoints>();
    for (const [k, { name: spn, eps }] of byPort) {
      const list = [...eps.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      out.set(k, { name: spn, endpoints: list });
    }
    return out;
  }

  private addEndpoint(eps: Map<string, Endpoint>, e: SliceEndpointInfo, port: number): void {
    const key = flat(joinHostPort(e.ip, port));
    const ep: Endpoint = {
      ip: e.ip,
      port,
      key,
      isLocal: e.nodeName !== '' && e.nodeName === this.nodeName,
      ready: e.ready,
      serving: e.serving,
      terminating: e.terminating,
      zoneHints: e.zoneHints ? new Set(e.zoneHints) : null,
      nodeHints: e.nodeHints ? new Set(e.nodeHints) : null,
      nodeName: e.nodeName,
      zone: e.zone,
    };
    const old = eps.get(key);
    eps.set(key, old ? preferEndpoint(old, ep) : ep);
  }
}
