// What the proxy keeps of each object it receives (upstream's informer
// transform drops managedFields for the same reason): only the fields the
// core reads (src/core/serviceport.ts, endpointslicecache.ts, nodeinfo.ts,
// engine/health.ts and nodetracker.ts). A real Service carries managedFields,
// a last-applied annotation and a selector; a real EndpointSlice carries
// targetRefs, ownerReferences and managedFields; a real Node carries images,
// conditions and capacity. None of it is read, and at 10k Services it is most
// of the memory.
//
// Contract: the transform never validates and never throws. A field the core
// reads is copied as received (wrong types included: the core reports them);
// everything else is dropped. Repeated short strings (node names, zones,
// label keys, namespaces) are interned so 50k endpoints share a few copies.
// When the core starts reading a new field, it must be added here; the test
// beside this file compares the proxy's state built from raw and transformed
// objects, so a missing field fails it.

import {
  ANNOTATION_LAST_CHANGE_TRIGGER_TIME,
  LABEL_HEADLESS,
  LABEL_SERVICE_NAME,
  LABEL_SERVICE_PROXY_NAME,
} from '../../core/api.js';
import { LB_ALGORITHM_ANNOTATION } from '../../core/serviceport.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Annotations the core reads, per kind; every other annotation (kubectl's last-applied, ...) is dropped. */
const SLICE_ANNOTATIONS: readonly string[] = [ANNOTATION_LAST_CHANGE_TRIGGER_TIME];
const SERVICE_ANNOTATIONS: readonly string[] = [LB_ALGORITHM_ANNOTATION];
/** Labels the core reads of Services and EndpointSlices (a Node keeps all: topology and hostname labels). */
const SERVICE_LABELS: readonly string[] = [LABEL_SERVICE_PROXY_NAME];
const SLICE_LABELS: readonly string[] = [LABEL_SERVICE_NAME, LABEL_HEADLESS];

const MAX_INTERNED = 200_000;
let pool = new Map<string, string>();

/** One shared copy per distinct short string (JSON.parse makes a new one per occurrence). */
function intern(v: unknown): unknown {
  if (typeof v !== 'string' || v.length > 64) return v;
  const hit = pool.get(v);
  if (hit !== undefined) return hit;
  if (pool.size >= MAX_INTERNED) pool = new Map();
  pool.set(v, v);
  return v;
}

/** Copy the listed keys that are present (as received). */
function pick(o: unknown, keys: readonly string[], internValues = false): Obj | unknown {
  if (!isObj(o)) return o;
  const out: Obj = {};
  for (const k of keys) {
    const v = o[k];
    if (v !== undefined) out[k] = internValues ? intern(v) : v;
  }
  return out;
}

function mapArray(v: unknown, fn: (e: unknown) => unknown): unknown {
  return Array.isArray(v) ? v.map(fn) : v;
}

function stringMap(v: unknown, only?: readonly string[]): unknown {
  if (!isObj(v)) return v;
  const out: Obj = {};
  for (const [k, x] of Object.entries(v)) {
    if (only && !only.includes(k)) continue;
    out[intern(k) as string] = intern(x);
  }
  return out;
}

/** metadata: name, namespace, resourceVersion, the labels listed (all when undefined), annotations kept, deletionTimestamp. */
function meta(m: unknown, annotations: readonly string[], labels?: readonly string[]): unknown {
  if (!isObj(m)) return m;
  const out: Obj = {};
  if (m['name'] !== undefined) out['name'] = m['name'];
  if (m['namespace'] !== undefined) out['namespace'] = intern(m['namespace']);
  if (m['resourceVersion'] !== undefined) out['resourceVersion'] = m['resourceVersion'];
  if (m['labels'] !== undefined) {
    const l = stringMap(m['labels'], labels);
    if (!isObj(l) || Object.keys(l).length > 0) out['labels'] = l;
  }
  if (annotations.length > 0 && m['annotations'] !== undefined) {
    const a = stringMap(m['annotations'], annotations);
    if (!isObj(a) || Object.keys(a).length > 0) out['annotations'] = a;
  }
  if (m['deletionTimestamp'] !== undefined) out['deletionTimestamp'] = m['deletionTimestamp'];
  return out;
}

const SERVICE_SPEC = [
  'type',
  'clusterIP',
  'clusterIPs',
  'ports',
  'externalIPs',
  'loadBalancerSourceRanges',
  'sessionAffinity',
  'sessionAffinityConfig',
  'externalTrafficPolicy',
  'internalTrafficPolicy',
  'healthCheckNodePort',
  'trafficDistribution',
] as const;
const SERVICE_PORT = ['name', 'protocol', 'port', 'targetPort', 'nodePort'] as const;

export function transformService(o: Obj): Obj {
  const out: Obj = { metadata: meta(o['metadata'], SERVICE_ANNOTATIONS, SERVICE_LABELS) };
  const spec = o['spec'];
  if (spec !== undefined) {
    const s = pick(spec, SERVICE_SPEC, true);
    if (isObj(s) && s['ports'] !== undefined) s['ports'] = mapArray(s['ports'], (p) => pick(p, SERVICE_PORT, true));
    out['spec'] = s;
  }
  const status = o['status'];
  if (isObj(status) && isObj(status['loadBalancer']) && status['loadBalancer']['ingress'] !== undefined) {
    out['status'] = {
      loadBalancer: { ingress: mapArray(status['loadBalancer']['ingress'], (i) => pick(i, ['ip', 'ipMode'])) },
    };
  }
  return out;
}

const ENDPOINT = ['addresses', 'nodeName', 'zone', 'hints'] as const;
const ENDPOINT_PORT = ['name', 'port', 'protocol'] as const;
const CONDITIONS = new Map<string, Readonly<Obj>>();

/**
 * Endpoint conditions are one of a few combinations: share one frozen object
 * per combination (50k endpoints, a handful of objects). Anything unusual is
 * copied as received.
 */
function conditions(c: unknown): unknown {
  if (!isObj(c)) return c;
  const vals = ['ready', 'serving', 'terminating'].map((k) => c[k]);
  if (Object.keys(c).some((k) => k !== 'ready' && k !== 'serving' && k !== 'terminating')) return c;
  if (!vals.every((v) => v === undefined || v === null || typeof v === 'boolean')) return c;
  const key = vals.map(String).join('|');
  let shared = CONDITIONS.get(key);
  if (!shared) {
    shared = Object.freeze({ ...c });
    CONDITIONS.set(key, shared);
  }
  return shared;
}

function endpoint(e: unknown): unknown {
  const out = pick(e, ENDPOINT, true);
  if (isObj(e) && isObj(out) && e['conditions'] !== undefined) out['conditions'] = conditions(e['conditions']);
  return out;
}

export function transformEndpointSlice(o: Obj): Obj {
  const out: Obj = { metadata: meta(o['metadata'], SLICE_ANNOTATIONS, SLICE_LABELS) };
  if (o['addressType'] !== undefined) out['addressType'] = intern(o['addressType']);
  if (o['endpoints'] !== undefined) out['endpoints'] = mapArray(o['endpoints'], endpoint);
  if (o['ports'] !== undefined) out['ports'] = mapArray(o['ports'], (p) => pick(p, ENDPOINT_PORT, true));
  return out;
}

export function transformNode(o: Obj): Obj {
  const out: Obj = { metadata: meta(o['metadata'], []) };
  if (o['spec'] !== undefined) out['spec'] = pick(o['spec'], ['podCIDR', 'podCIDRs', 'taints', 'unschedulable']);
  const status = o['status'];
  if (isObj(status) && status['addresses'] !== undefined) out['status'] = { addresses: status['addresses'] };
  return out;
}

export function transformServiceCIDR(o: Obj): Obj {
  const out: Obj = { metadata: meta(o['metadata'], []) };
  if (o['spec'] !== undefined) out['spec'] = pick(o['spec'], ['cidrs']);
  return out;
}

/**
 * What the EndpointSlice reflector's local copy keeps of a slice once the
 * handlers have it (ReflectorOptions.keep): the EndpointSliceCache holds the
 * endpoints and ports in its own encoding, and all a later update or delete
 * needs of the old slice is which Service and family it was filed under
 * (name, namespace, the service-name label, addressType) and its version.
 * The endpoints were most of a kept slice's memory.
 */
export function endpointSliceStub<T extends { metadata: object }>(slice: T): T {
  const o = slice as unknown as Obj;
  const m = o['metadata'];
  if (!isObj(m)) return slice;
  const out: Obj = { metadata: pick(m, ['name', 'namespace', 'resourceVersion', 'labels', 'deletionTimestamp']) };
  if (o['addressType'] !== undefined) out['addressType'] = o['addressType'];
  return out as unknown as T;
}
