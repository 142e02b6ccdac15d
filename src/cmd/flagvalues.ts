// Parsers for flag values with Go's (pflag / strconv / klog) rules, so that a
// command line written for upstream kube-proxy means the same here. Each
// throws an Error whose message is the reason; the caller adds the flag name.

import { parseDuration, type Duration } from '../core/config/duration.js';
import { parseGoBool } from '../core/config/features.js';
import type { VModuleItem } from '../core/config/types.js';
import { ProxyError } from '../core/errors.js';

/** Go strconv.ParseInt(s, 0, bits): 0x / 0o / 0 / 0b prefixes, underscores only with a prefix. */
export function parseGoInt(s: string, bits: 32 | 64 = 32): number {
  const m = /^([+-]?)(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|0[0-7_]*|[1-9][0-9]*)$/.exec(s);
  if (!m) throw new ProxyError('KPT_FLAG_INVALID', `strconv.ParseInt: parsing ${JSON.stringify(s)}: invalid syntax`);
  const body = m[2]!;
  let n: number;
  if (/^0[xX]/.test(body)) n = Number.parseInt(body.slice(2).replaceAll('_', ''), 16);
  else if (/^0[oO]/.test(body)) n = Number.parseInt(body.slice(2).replaceAll('_', ''), 8);
  else if (/^0[bB]/.test(body)) n = Number.parseInt(body.slice(2).replaceAll('_', ''), 2);
  else if (body.length > 1 && body.startsWith('0')) n = Number.parseInt(body.replaceAll('_', ''), 8);
  else n = Number(body);
  if (Number.isNaN(n))
    throw new ProxyError('KPT_FLAG_INVALID', `strconv.ParseInt: parsing ${JSON.stringify(s)}: invalid syntax`);
  if (m[1] === '-') n = -n;
  const max = bits === 32 ? 2 ** 31 - 1 : Number.MAX_SAFE_INTEGER;
  const min = bits === 32 ? -(2 ** 31) : Number.MIN_SAFE_INTEGER;
  if (n > max || n < min)
    throw new ProxyError('KPT_FLAG_INVALID', `strconv.ParseInt: parsing ${JSON.stringify(s)}: value out of range`);
  return n;
}

/** Go strconv.ParseUint(s, 0, 32), for klog's -v Level. */
export function parseGoUint32(s: string): number {
  if (s.startsWith('-') || s.startsWith('+'))
    throw new ProxyError('KPT_FLAG_INVALID', `strconv.ParseUint: parsing ${JSON.stringify(s)}: invalid syntax`);
  const n = parseGoInt(s, 64);
  if (n > 2 ** 32 - 1)
    throw new ProxyError('KPT_FLAG_INVALID', `strconv.ParseUint: parsing ${JSON.stringify(s)}: value out of range`);
  return n;
}

/**
 * Go strconv.ParseFloat(s, 32), decimal forms only. The value is kept as typed
 * (not rounded to float32) so that it prints back as written, as Go's float32
 * formatting does.
 */
export function parseGoFloat(s: string): number {
  if (!/^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$/.test(s)) {
    throw new ProxyError('KPT_FLAG_INVALID', `strconv.ParseFloat: parsing ${JSON.stringify(s)}: invalid syntax`);
  }
  const n = Number(s);
  if (!Number.isFinite(Math.fround(n)))
    throw new ProxyError('KPT_FLAG_INVALID', `strconv.ParseFloat: parsing ${JSON.stringify(s)}: value out of range`);
  return n;
}

export function parseBoolFlag(s: string): boolean {
  const b = parseGoBool(s);
  if (b === null)
    throw new ProxyError('KPT_FLAG_INVALID', `strconv.ParseBool: parsing ${JSON.stringify(s)}: invalid syntax`);
  return b;
}

export function parseDurationFlag(s: string): Duration {
  return parseDuration(s); // DurationParseError carries Go's text
}

/** pflag StringSlice: CSV with optional double quotes; "" is the empty list. */
export function parseStringSlice(s: string): string[] {
  if (s === '') return [];
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  let startOfField = true;
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    if (quoted) {
      if (ch === '"' && s[i + 1] === '"') {
        cur += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cur += ch;
    } else if (ch === ',') {
      out.push(cur);
      cur = '';
      startOfField = true;
      continue;
    } else if (ch === '"' && startOfField) quoted = true;
    else if (ch === '"') throw new ProxyError('KPT_FLAG_INVALID', `parse error: bare " in non-quoted field`);
    else cur += ch;
    startOfField = false;
  }
  if (quoted) throw new ProxyError('KPT_FLAG_INVALID', 'parse error: extraneous or missing " in quoted field');
  out.push(cur);
  return out;
}

/** klog --vmodule "pattern=N,pattern2=M". */
export function parseVModule(s: string): VModuleItem[] {
  if (s === '') return [];
  return s.split(',').map((pat) => {
    const eq = pat.indexOf('=');
    const pattern = eq < 0 ? '' : pat.slice(0, eq).trim();
    const level = eq < 0 ? '' : pat.slice(eq + 1).trim();
    if (pattern === '' || !/^[0-9]+$/.test(level))
      throw new ProxyError('KPT_FLAG_INVALID', `${JSON.stringify(pat)} does not have the pattern=N format`);
    return { filePattern: pattern, verbosity: Number(level) };
  });
}
