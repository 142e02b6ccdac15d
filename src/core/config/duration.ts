// Go time.Duration text, parsed and printed exactly like Go's time.ParseDuration
// and Duration.String, because config files and flags written for upstream
// kube-proxy ("30s", "1m30s", "24h0m0s", "500ms") must mean the same here and
// --write-config-to must print what upstream prints.
//
// A Duration is an integer number of nanoseconds held in a JS number. Go allows
// up to 2^63-1 ns (~292 years); we stop at Number.MAX_SAFE_INTEGER ns (~104 days)
// so that arithmetic stays exact. Larger values are rejected, not rounded.

import { BugError } from '../errors.js';
import { ProxyError } from '../errors.js';

/** Nanoseconds (Go time.Duration). */
export type Duration = number;

export const NANOSECOND = 1;
export const MICROSECOND = 1_000;
export const MILLISECOND = 1_000_000;
export const SECOND = 1_000_000_000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;

const UNITS: Readonly<Record<string, number>> = {
  ns: NANOSECOND,
  us: MICROSECOND,
  µs: MICROSECOND, // U+00B5 micro sign
  μs: MICROSECOND, // U+03BC Greek mu
  ms: MILLISECOND,
  s: SECOND,
  m: MINUTE,
  h: HOUR,
};

export class DurationParseError extends ProxyError {
  constructor(message: string) {
    super('KPT_INPUT_INVALID', message);
    this.name = 'DurationParseError';
  }
}

/** Go time.ParseDuration. Throws DurationParseError with Go's message text. */
export function parseDuration(text: string): Duration {
  const quoted = JSON.stringify(text);
  let s = text;
  let neg = false;
  if (s !== '' && (s[0] === '-' || s[0] === '+')) {
    neg = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return 0;
  if (s === '') throw new DurationParseError(`time: invalid duration ${quoted}`);
  let total = 0;
  while (s !== '') {
    const num = /^([0-9]*)(?:\.([0-9]*))?/.exec(s)!;
    const intPart = num[1] ?? '';
    const fracPart = num[2];
    if (intPart === '' && (fracPart === undefined || fracPart === '')) {
      throw new DurationParseError(`time: invalid duration ${quoted}`);
    }
    s = s.slice(num[0].length);
    const unitMatch = /^[^0-9.]*/.exec(s)!;
    const unitText = unitMatch[0];
    if (unitText === '') throw new DurationParseError(`time: missing unit in duration ${quoted}`);
    const unit = UNITS[unitText];
    if (unit === undefined) {
      throw new DurationParseError(`time: unknown unit ${JSON.stringify(unitText)} in duration ${quoted}`);
    }
    s = s.slice(unitText.length);
    // Integer part exactly; fraction truncated to whole nanoseconds like Go.
    let v = intPart === '' ? 0 : Number(intPart) * unit;
    if (fracPart) {
      let scale = unit;
      let frac = 0;
      for (const ch of fracPart) {
        if (scale < 10) break;
        scale /= 10;
        frac += Number(ch) * scale;
      }
      v += Math.floor(frac);
    }
    total += v;
    if (!Number.isSafeInteger(total)) throw new DurationParseError(`time: invalid duration ${quoted}`);
  }
  return neg ? -total : total;
}

/** Go Duration.String(): "0s", "1.5s", "500ms", "1m30s", "24h0m0s", "2µs". */
export function formatDuration(d: Duration): string {
  if (!Number.isSafeInteger(d)) throw new BugError(`not an integer duration: ${d}`);
  if (d === 0) return '0s';
  const neg = d < 0;
  let u = Math.abs(d);
  let out: string;
  if (u < SECOND) {
    // Sub-second: a single unit with a decimal fraction.
    if (u < MICROSECOND) out = `${u}ns`;
    else if (u < MILLISECOND) out = `${fmtFrac(u, MICROSECOND)}µs`;
    else out = `${fmtFrac(u, MILLISECOND)}ms`;
  } else {
    const secs = fmtFrac(u % MINUTE, SECOND) + 's';
    u = Math.floor(u / MINUTE);
    if (u === 0) out = secs;
    else {
      const mins = `${u % 60}m`;
      const hours = Math.floor(u / 60);
      out = hours > 0 ? `${hours}h${mins}${secs}` : `${mins}${secs}`;
    }
  }
  return neg ? `-${out}` : out;
}

/** v / unit printed with the fractional digits Go prints (trailing zeros dropped). */
function fmtFrac(v: number, unit: number): string {
  const whole = Math.floor(v / unit);
  const rem = v % unit;
  if (rem === 0) return String(whole);
  const digits = String(unit).length - 1;
  const frac = String(rem).padStart(digits, '0').replace(/0+$/, '');
  return `${whole}.${frac}`;
}

/** Nanoseconds to milliseconds, for the injected Clock which counts in ms. */
export function durationToMillis(d: Duration): number {
  return d / MILLISECOND;
}
