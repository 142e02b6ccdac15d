// Decoding a KubeProxyConfiguration file (YAML or JSON text) the way upstream's
// loadConfig does: strict first (unknown or duplicate fields are errors); when
// only strictness failed, decode leniently and return a warning, which main
// logs as upstream does ("Using lenient decoding as strict decoding failed").
// Any other problem (bad YAML, wrong apiVersion/kind, a value of the wrong type,
// an unparsable duration) is a ProxyError KPT_CONFIG_FILE naming the field.
//
// YAML is read as YAML 1.1, like the go-yaml v2 behind sigs.k8s.io/yaml.

import { parseDocument, type Tags } from 'yaml';
import { ProxyError } from '../errors.js';
import { setDefaultsV1Alpha1, zeroV1Alpha1 } from './defaults.js';
import { formatDuration, parseDuration } from './duration.js';
import { V1ALPHA1_SCHEMA, type FieldKind, type ListOf, type Schema } from './schema.js';
import { GROUP_VERSION, KIND, type KubeProxyConfigurationV1Alpha1 } from './types.js';

export interface DecodedConfig {
  /** Defaulted v1alpha1 configuration. */
  readonly config: KubeProxyConfigurationV1Alpha1;
  /** Non-fatal problems, e.g. the lenient-decoding fallback. */
  readonly warnings: string[];
}

type Obj = Record<string, unknown>;

function fileError(message: string): ProxyError {
  return new ProxyError('KPT_CONFIG_FILE', message);
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (v instanceof Date) return 'timestamp';
  return typeof v === 'object' ? 'object' : typeof v;
}

/**
 * go-yaml v2 resolves YAML 1.1 booleans and 0x/0/underscore integers, but keeps
 * timestamps as strings (when decoding into interface{}) and has no base-60
 * numbers ("1:20" stays a string). Drop those tags from the 1.1 schema.
 */
const GO_YAML_V2_TAGS = (tags: Tags): Tags =>
  tags.filter((t) => typeof t === 'string' || (t.tag !== 'tag:yaml.org,2002:timestamp' && t.format !== 'TIME'));

const YAML_OPTIONS = { version: '1.1', prettyErrors: false, customTags: GO_YAML_V2_TAGS } as const;

/** Parse YAML/JSON text into plain data; duplicate keys are reported, not fatal. */
function parseText(text: string): { data: unknown; duplicates: string[] } {
  const strict = parseDocument(text, { ...YAML_OPTIONS, uniqueKeys: true });
  const duplicates = strict.errors.filter((e) => e.code === 'DUPLICATE_KEY').map((e) => e.message.split('\n')[0]!);
  const fatal = strict.errors.find((e) => e.code !== 'DUPLICATE_KEY');
  if (fatal) throw fileError(`failed to decode: yaml: ${fatal.message.split('\n')[0]}`);
  const doc = duplicates.length > 0 ? parseDocument(text, { ...YAML_OPTIONS, uniqueKeys: false }) : strict;
  return { data: doc.toJS({ maxAliasCount: 100 }) as unknown, duplicates };
}

/** Walks raw data against a schema, writing converted values into target. */
class Walker {
  readonly unknown: string[] = [];

  object(raw: Obj, schema: Schema, target: Obj, path: string): void {
    for (const [key, value] of Object.entries(raw)) {
      const fieldPath = path === '' ? key : `${path}.${key}`;
      const kind = schema[key];
      if (kind === undefined) {
        this.unknown.push(fieldPath);
        continue;
      }
      if (value === null || value === undefined) continue; // null keeps the zero value
      if (typeof kind === 'string') target[key] = this.scalar(value, kind, fieldPath);
      else if (isListOf(kind)) target[key] = this.list(value, kind, fieldPath);
      else {
        if (!isObj(value)) throw typeError(fieldPath, value, 'object');
        const sub = isObj(target[key]) ? (target[key] as Obj) : {};
        target[key] = sub;
        this.object(value, kind, sub, fieldPath);
      }
    }
  }

  private list(value: unknown, kind: ListOf, path: string): Obj[] {
    if (!Array.isArray(value)) throw typeError(path, value, 'list');
    return value.map((item, i) => {
      const out = zeroOf(kind.listOf);
      if (item === null) return out;
      if (!isObj(item)) throw typeError(`${path}[${i}]`, item, 'object');
      this.object(item, kind.listOf, out, `${path}[${i}]`);
      return out;
    });
  }

  private scalar(v: unknown, kind: FieldKind, path: string): unknown {
    switch (kind) {
      case 'string':
        if (typeof v !== 'string') throw typeError(path, v, 'string');
        return v;
      case 'bool':
        if (typeof v !== 'boolean') throw typeError(path, v, 'bool');
        return v;
      case 'int32':
        if (typeof v !== 'number' || !Number.isInteger(v) || v < -(2 ** 31) || v > 2 ** 31 - 1) {
          throw typeError(path, v, 'int32');
        }
        return v;
      case 'float':
        if (typeof v !== 'number' || !Number.isFinite(v)) throw typeError(path, v, 'float32');
        return v;
      case 'duration':
        if (typeof v !== 'string') throw typeError(path, v, 'duration string');
        return durationText(v, path);
      case 'durationOrInt':
        if (typeof v === 'number' && Number.isSafeInteger(v)) return formatDuration(v);
        if (typeof v !== 'string') throw typeError(path, v, 'duration');
        return durationText(v, path);
      case 'quantity':
        if (typeof v !== 'string' && typeof v !== 'number') throw typeError(path, v, 'quantity');
        return String(v);
      case 'stringList':
        if (!Array.isArray(v)) throw typeError(path, v, 'list of strings');
        return v.map((s, i) => {
          if (s === null) return '';
          if (typeof s !== 'string') throw typeError(`${path}[${i}]`, s, 'string');
          return s;
        });
      case 'boolMap': {
        if (!isObj(v)) throw typeError(path, v, 'map of string to bool');
        const out: Record<string, boolean> = {};
        for (const [k, b] of Object.entries(v)) {
          if (typeof b !== 'boolean') throw typeError(`${path}.${k}`, b, 'bool');
          out[k] = b;
        }
        return out;
      }
    }
  }
}

function isListOf(k: Schema | ListOf): k is ListOf {
  return Object.prototype.hasOwnProperty.call(k, 'listOf') && typeof (k as ListOf).listOf === 'object';
}

function zeroOf(schema: Schema): Obj {
  const out: Obj = {};
  for (const [k, kind] of Object.entries(schema)) {
    if (kind === 'string' || kind === 'quantity') out[k] = '';
    else if (kind === 'int32' || kind === 'float') out[k] = 0;
    else if (kind === 'bool') out[k] = false;
  }
  return out;
}

function typeError(path: string, v: unknown, want: string): ProxyError {
  const shown = typeof v === 'string' ? ` ${JSON.stringify(v)}` : typeof v === 'number' ? ` ${v}` : '';
  return fileError(`failed to decode: field "${path}": cannot use ${jsonType(v)}${shown} as ${want}`);
}

function durationText(v: string, path: string): string {
  try {
    return formatDuration(parseDuration(v));
  } catch (err) {
    throw fileError(`failed to decode: field "${path}": ${(err as Error).message}`);
  }
}

/**
 * Decode and default a KubeProxyConfiguration file. `source` (e.g. the path)
 * only labels messages. Throws ProxyError KPT_CONFIG_FILE.
 */
export function decodeConfigFile(text: string, source = 'config file'): DecodedConfig {
  let parsed: { data: unknown; duplicates: string[] };
  try {
    parsed = parseText(text);
  } catch (err) {
    if (err instanceof ProxyError) throw new ProxyError(err.code, `${source}: ${err.message}`);
    throw fileError(`${source}: failed to decode: ${(err as Error).message}`);
  }
  const { data, duplicates } = parsed;
  if (!isObj(data))
    throw fileError(`${source}: failed to decode: expected a KubeProxyConfiguration object, got ${jsonType(data)}`);
  checkTypeMeta(data, source);

  const config = zeroV1Alpha1();
  const walker = new Walker();
  try {
    walker.object(data, V1ALPHA1_SCHEMA, config as unknown as Obj, '');
  } catch (err) {
    if (err instanceof ProxyError) throw new ProxyError(err.code, `${source}: ${err.message}`);
    throw err;
  }
  const strictErrors = [
    ...walker.unknown.map((f) => `unknown field ${JSON.stringify(f)}`),
    ...duplicates.map((d) => `duplicate field: ${d}`),
  ];
  const warnings: string[] = [];
  if (strictErrors.length > 0) {
    warnings.push(
      `Using lenient decoding as strict decoding failed: ${source}: strict decoding error: ${strictErrors.join(', ')}`,
    );
  }
  return { config: setDefaultsV1Alpha1(config), warnings };
}

function checkTypeMeta(data: Obj, source: string): void {
  const { apiVersion, kind } = data;
  if (apiVersion === undefined || apiVersion === null || apiVersion === '') {
    throw fileError(
      `${source}: failed to decode: 'apiVersion' is missing; expected apiVersion ${JSON.stringify(GROUP_VERSION)}`,
    );
  }
  if (kind === undefined || kind === null || kind === '') {
    throw fileError(`${source}: failed to decode: 'Kind' is missing; expected kind ${JSON.stringify(KIND)}`);
  }
  if (apiVersion !== GROUP_VERSION) {
    throw fileError(
      `${source}: failed to decode: apiVersion ${JSON.stringify(apiVersion)} is not supported; expected ${JSON.stringify(GROUP_VERSION)}`,
    );
  }
  if (kind !== KIND) {
    throw fileError(
      `${source}: failed to decode: no kind ${JSON.stringify(kind)} is registered for version ${JSON.stringify(GROUP_VERSION)}; expected kind ${JSON.stringify(KIND)}`,
    );
  }
}
