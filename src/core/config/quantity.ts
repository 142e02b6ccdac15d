// Kubernetes resource quantities ("512", "64Ki", "1M", "1.5Gi", "2e3"), as
// k8s.io/apimachinery resource.ParseQuantity reads them, for the logging
// options' infoBufferSize (flags --log-{text,json}-info-buffer-size and the
// config file's logging.options.*.infoBufferSize). Only what a byte count
// needs: the integer value, rounded up as Quantity.Value() does.

import { ProxyError } from '../errors.js';

// Upstream's own wording of the accepted shape, so errors read the same.
const SHAPE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

const BINARY: Readonly<Record<string, number>> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const DECIMAL: Readonly<Record<string, number>> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/**
 * The integer value of a quantity, rounded up (so "0.5" is 1 and "1m" is 1).
 * Throws ProxyError KPT_INPUT_INVALID for text upstream would not parse.
 * Values beyond 2^53 lose precision; the callers cap far below that.
 */
export function quantityValue(text: string): number {
  const m = /^([+-]?)([0-9]*\.?[0-9]*)(.*)$/.exec(text.trim());
  const digits = m?.[2] ?? '';
  if (!m || digits === '' || digits === '.') throw new ProxyError('KPT_INPUT_INVALID', SHAPE);
  const sign = m[1] === '-' ? -1 : 1;
  const suffix = m[3]!;
  let value: number;
  if (suffix in BINARY) value = Number(digits) * 2 ** BINARY[suffix]!;
  else if (suffix in DECIMAL) value = Number(digits) * 10 ** DECIMAL[suffix]!;
  else if (/^[eE][+-]?[0-9]+$/.test(suffix)) value = Number(digits) * 10 ** Number(suffix.slice(1));
  else throw new ProxyError('KPT_INPUT_INVALID', "unable to parse quantity's suffix");
  // Round away from zero, as Quantity.Value() does; the epsilon keeps 10^-3 * 10^3 from becoming 2.
  const rounded = Math.ceil(Math.abs(value) - 1e-9);
  return rounded === 0 ? 0 : sign * rounded;
}
