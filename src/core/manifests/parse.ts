// One manifest file's text -> the objects the proxy reads, as `kubectl apply
// -f` takes files: YAML or JSON, several documents separated by `---`, and
// `List` kinds (kind: List or any *List with items) flattened. Every object
// is validated (validate.ts) and defaulted as the API server would; objects
// of other kinds (Deployments, ConfigMaps...) are reported as ignored.
//
// Contract: never throws. A syntax error anywhere makes the whole file a
// parse error (the caller keeps the file's previous contents); an invalid
// object is reported with its place in the file and its field errors.

import { parseAllDocuments } from 'yaml';
import { formatFieldError, type FieldError } from '../config/field.js';
import { validateEndpointSlice, validateNode, validateService, validateServiceCIDR } from './validate.js';

export type ManifestKind = 'Service' | 'EndpointSlice' | 'Node' | 'ServiceCIDR';

const KINDS: Readonly<Record<ManifestKind, { apiVersions: readonly string[]; namespaced: boolean }>> = {
  Service: { apiVersions: ['v1'], namespaced: true },
  EndpointSlice: { apiVersions: ['discovery.k8s.io/v1'], namespaced: true },
  Node: { apiVersions: ['v1'], namespaced: false },
  ServiceCIDR: { apiVersions: ['networking.k8s.io/v1', 'networking.k8s.io/v1beta1'], namespaced: false },
};

const VALIDATORS: Readonly<Record<ManifestKind, (o: unknown) => FieldError[]>> = {
  Service: validateService,
  EndpointSlice: validateEndpointSlice,
  Node: validateNode,
  ServiceCIDR: validateServiceCIDR,
};

export interface ManifestObject {
  readonly kind: ManifestKind;
  /** "Kind/namespace/name" (cluster-scoped: "Kind//name"): unique per object. */
  readonly key: string;
  /** "namespace/name" or "name", for messages. */
  readonly name: string;
  /** Where in the file: "document 2" or "document 1, items[3]". */
  readonly where: string;
  /** The defaulted object, as the API server would have stored it. */
  readonly obj: Record<string, unknown>;
}

export interface InvalidObject {
  readonly where: string;
  /** null when the object is too broken to be named. */
  readonly key: string | null;
  readonly label: string;
  readonly errors: readonly string[];
}

export interface ParsedManifest {
  /** Set when the file is not valid YAML/JSON: nothing in it is used. */
  readonly parseError: string | null;
  readonly objects: readonly ManifestObject[];
  readonly invalid: readonly InvalidObject[];
  /** Objects of kinds the proxy does not read: "document 3: apps/v1 Deployment web". */
  readonly ignored: readonly string[];
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function metaOf(o: Obj): { namespace: string | null; name: string | null } {
  const m = isObj(o['metadata']) ? o['metadata'] : {};
  return {
    namespace: typeof m['namespace'] === 'string' ? m['namespace'] : null,
    name: typeof m['name'] === 'string' && m['name'] !== '' ? m['name'] : null,
  };
}

/** The API server's defaults for the fields the proxy reads (a deep copy; the input is left alone). */
function withDefaults(kind: ManifestKind, o: Obj): Obj {
  const out = structuredClone(o);
  const meta = (out['metadata'] ??= {}) as Obj;
  if (KINDS[kind].namespaced && meta['namespace'] === undefined) meta['namespace'] = 'default';
  if (kind === 'Service') {
    const spec = out['spec'] as Obj;
    spec['type'] ??= 'ClusterIP';
    if (spec['clusterIPs'] === undefined && typeof spec['clusterIP'] === 'string')
      spec['clusterIPs'] = [spec['clusterIP']];
    for (const p of (spec['ports'] as Obj[] | undefined) ?? []) p['protocol'] ??= 'TCP';
  }
  if (kind === 'EndpointSlice') for (const p of (out['ports'] as Obj[] | undefined) ?? []) p['protocol'] ??= 'TCP';
  return out;
}

function classify(
  value: unknown,
  where: string,
  out: { objects: ManifestObject[]; invalid: InvalidObject[]; ignored: string[] },
): void {
  if (!isObj(value)) {
    out.invalid.push({
      where,
      key: null,
      label: 'not an object',
      errors: ['a document must be a mapping with apiVersion and kind'],
    });
    return;
  }
  const kind = value['kind'];
  const apiVersion = value['apiVersion'];
  if (typeof kind === 'string' && /List$/.test(kind) && Array.isArray(value['items'])) {
    value['items'].forEach((item, i) => classify(item, `${where}, items[${i}]`, out));
    return;
  }
  const { namespace, name } = metaOf(value);
  if (typeof kind !== 'string' || kind === '') {
    out.invalid.push({
      where,
      key: null,
      label: 'object without a kind',
      errors: ['kind: Required value: every object needs a kind'],
    });
    return;
  }
  if (!(kind in KINDS)) {
    out.ignored.push(`${where}: ${String(apiVersion ?? '')} ${kind} ${name ?? ''}`.replace(/\s+/g, ' ').trim());
    return;
  }
  const k = kind as ManifestKind;
  const spec = KINDS[k];
  const ns = spec.namespaced ? (namespace ?? 'default') : '';
  const shown = spec.namespaced ? `${ns}/${name ?? '?'}` : (name ?? '?');
  const key = name === null ? null : `${k}/${ns}/${name}`;
  const errors: string[] = [];
  if (!spec.apiVersions.includes(String(apiVersion)))
    errors.push(
      `apiVersion: Unsupported value: ${JSON.stringify(apiVersion ?? null)}: supported values: ${spec.apiVersions.map((v) => JSON.stringify(v)).join(', ')}`,
    );
  errors.push(...VALIDATORS[k](value).map(formatFieldError));
  if (errors.length > 0 || key === null) {
    out.invalid.push({ where, key, label: `${k} ${shown}`, errors });
    return;
  }
  out.objects.push({ kind: k, key, name: shown, where, obj: withDefaults(k, value) });
}

export function parseManifest(text: string): ParsedManifest {
  const docs = parseAllDocuments(text, { uniqueKeys: true });
  const out = { objects: [] as ManifestObject[], invalid: [] as InvalidObject[], ignored: [] as string[] };
  const list = Array.isArray(docs) ? docs : [docs];
  for (const [i, doc] of list.entries()) {
    const err = doc.errors[0];
    if (err) {
      const pos = err.linePos?.[0];
      const at = pos ? `line ${pos.line}, column ${pos.col}: ` : '';
      return {
        parseError: `${at}${err.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')}`,
        objects: [],
        invalid: [],
        ignored: [],
      };
    }
    if (doc.contents === null) continue; // an empty document (e.g. a trailing ---)
    classify(doc.toJS({ maxAliasCount: 100 }), `document ${i + 1}`, out);
  }
  return { parseError: null, ...out };
}
