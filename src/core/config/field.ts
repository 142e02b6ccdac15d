// Validation errors in the format of k8s.io/apimachinery field.Error, so that
// messages read like upstream's:
//   iptables.masqueradeBit: Invalid value: 32: must be within the range [0, 31]
//   detectLocalMode: Unsupported value: "x": supported values: "ClusterCIDR", ...

import { ProxyError } from '../errors.js';
import { formatDuration, type Duration } from './duration.js';

/** A bad value as Go's ErrorBody prints it: strings quoted, numbers bare. */
export type BadValue = string | number | boolean | null | { readonly duration: Duration } | readonly string[];

export interface FieldError {
  readonly type: 'Invalid' | 'NotSupported' | 'Required' | 'Forbidden';
  /** JSON path of the v1alpha1 field, e.g. "conntrack.min" or "nodePortAddresses[1]". */
  readonly field: string;
  readonly value: BadValue;
  readonly detail: string;
}

export function invalid(field: string, value: BadValue, detail: string): FieldError {
  return { type: 'Invalid', field, value, detail };
}

export function forbidden(field: string, detail: string): FieldError {
  return { type: 'Forbidden', field, value: null, detail };
}

export function notSupported(field: string, value: string, supported: readonly string[]): FieldError {
  return {
    type: 'NotSupported',
    field,
    value,
    detail: `supported values: ${supported.map((s) => JSON.stringify(s)).join(', ')}`,
  };
}

function showValue(v: BadValue): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[]string{${v.map((s) => JSON.stringify(s)).join(', ')}}`;
  return formatDuration((v as { duration: Duration }).duration);
}

export function formatFieldError(e: FieldError): string {
  switch (e.type) {
    case 'Invalid':
      return `${e.field}: Invalid value: ${showValue(e.value)}: ${e.detail}`;
    case 'NotSupported':
      return `${e.field}: Unsupported value: ${showValue(e.value)}: ${e.detail}`;
    case 'Required':
      return `${e.field}: Required value: ${e.detail}`;
    case 'Forbidden':
      return `${e.field}: Forbidden: ${e.detail}`;
  }
}

/** ProxyError KPT_CONFIG_INVALID carrying every field error (upstream ToAggregate text). */
export class ConfigValidationError extends ProxyError {
  constructor(readonly fieldErrors: readonly FieldError[]) {
    const msgs = fieldErrors.map(formatFieldError);
    super('KPT_CONFIG_INVALID', msgs.length === 1 ? msgs[0]! : `[${msgs.join(', ')}]`);
    this.name = 'ConfigValidationError';
  }
}
