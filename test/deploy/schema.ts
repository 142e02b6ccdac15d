// Validation of Kubernetes manifests against the API's OpenAPI schemas, from
// two npm packages generated from the same Kubernetes OpenAPI document:
//
// * kubernetes-models: JSON-schema validation (ajv): types, required fields,
//   enums, formats - what `kubectl apply --validate` checks client-side.
// * @kubernetes/client-node's models: each generated class lists its fields
//   (attributeTypeMap). The OpenAPI schemas allow unknown fields, so this is
//   how we reject a misspelt or misplaced field, as the API server's strict
//   field validation (`kubectl apply --validate=strict`) does.
//
// Both throw nothing; they return a list of problems ("path: message").

import * as k8s from '@kubernetes/client-node';

export interface Manifest {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata?: { readonly name?: string; readonly namespace?: string };
  readonly [k: string]: unknown;
}

type AttributeType = { readonly baseName: string; readonly type: string };
type ModelClass = { readonly attributeTypeMap?: readonly AttributeType[] };

/** The kubernetes-models module of an apiVersion/kind, e.g. kubernetes-models/apps/v1/DaemonSet. */
function modelPath(m: Manifest): string {
  return `kubernetes-models/${m.apiVersion}/${m.kind}`;
}

/** JSON-schema problems of one manifest (empty when valid). */
export async function schemaErrors(m: Manifest): Promise<string[]> {
  let mod: Record<string, new (data: unknown) => { validate(): void }>;
  try {
    mod = (await import(modelPath(m))) as typeof mod;
  } catch {
    return [`no schema for ${m.apiVersion} ${m.kind}`];
  }
  const Model = mod[m.kind];
  if (!Model) return [`no model ${m.kind} in ${modelPath(m)}`];
  try {
    new Model(m).validate();
    return [];
  } catch (err) {
    return [(err as Error).message];
  }
}

/** The client-node class name for apiVersion/kind: apps/v1 DaemonSet -> V1DaemonSet. */
function className(m: Manifest): string {
  const version = m.apiVersion.split('/').pop()!;
  return version.charAt(0).toUpperCase() + version.slice(1) + m.kind;
}

function modelClass(name: string): ModelClass | undefined {
  const c = (k8s as unknown as Record<string, unknown>)[name];
  return typeof c === 'function' && Array.isArray((c as ModelClass).attributeTypeMap) ? (c as ModelClass) : undefined;
}

const ARRAY = /^Array<(.+)>$/;
const MAP = /^\{ \[key: string\]: (.+); \}$/;

/** Fields the schema does not know, as JSON paths (empty when none). */
export function unknownFields(m: Manifest): string[] {
  const root = modelClass(className(m));
  if (!root) return [`no model class ${className(m)}`];
  const out: string[] = [];
  walk(m, className(m), '', out);
  return out;
}

function walk(value: unknown, type: string, path: string, out: string[]): void {
  if (value === null || value === undefined) return;
  const arr = ARRAY.exec(type);
  if (arr) {
    if (Array.isArray(value)) value.forEach((v, i) => walk(v, arr[1]!, `${path}[${i}]`, out));
    return;
  }
  const map = MAP.exec(type);
  if (map) {
    if (typeof value === 'object') for (const [k, v] of Object.entries(value)) walk(v, map[1]!, `${path}.${k}`, out);
    return;
  }
  const cls = modelClass(type);
  if (!cls || typeof value !== 'object' || Array.isArray(value)) return; // primitives, IntOrString, any
  const fields = new Map(cls.attributeTypeMap!.map((a) => [a.baseName, a.type]));
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const t = fields.get(k);
    if (t === undefined) out.push(`${path}.${k}: unknown field in ${type}`);
    else walk(v, t, `${path}.${k}`, out);
  }
}
