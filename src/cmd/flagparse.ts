// Turns each flag's raw occurrences into one typed value, with pflag's rules
// for repeats: scalars keep the last value, string lists and --vmodule append,
// --feature-gates merges. Errors name the flag in pflag's words:
//   invalid argument "x" for "--oom-score-adj" flag: strconv.ParseInt: ...

import { parseFeatureGates } from '../core/config/features.js';
import { splitHostPort } from '../core/config/hostport.js';
import { quantityValue } from '../core/config/quantity.js';
import { LOCAL_MODES, VALID_PROXY_MODES } from '../core/config/validate.js';
import { ProxyError } from '../core/errors.js';
import { parseIP } from '../core/ip.js';
import {
  parseBoolFlag,
  parseDurationFlag,
  parseGoFloat,
  parseGoInt,
  parseGoUint32,
  parseStringSlice,
  parseVModule,
} from './flagvalues.js';
import { FLAGS, type FlagDef, type FlagValue } from './flags.js';

export interface ParsedFlags {
  /** Typed value per flag that was given (pflag's Changed). */
  readonly values: ReadonlyMap<string, FlagValue>;
  readonly warnings: string[];
}

function parseOne(f: FlagDef, raw: string): FlagValue {
  switch (f.kind) {
    case 'string':
      return raw;
    case 'bool':
      return parseBoolFlag(raw);
    case 'version':
      if (raw === 'raw') return true;
      return parseBoolFlag(raw);
    case 'int32':
      return parseGoInt(raw, 32);
    case 'float32':
      return parseGoFloat(raw);
    case 'duration':
      return parseDurationFlag(raw);
    case 'level':
      return parseGoUint32(raw);
    case 'strings':
      return parseStringSlice(raw);
    case 'moduleSpec':
      return parseVModule(raw);
    case 'mapStringBool': {
      const m: Record<string, boolean> = {};
      parseFeatureGates(raw, m);
      return m;
    }
    case 'ip':
      if (raw !== '' && !parseIP(raw))
        throw new ProxyError('KPT_FLAG_INVALID', `${JSON.stringify(raw)} is not a valid IP address`);
      return raw;
    case 'ipport':
      return checkIPPort(raw);
    case 'proxyMode':
      if (raw !== '' && !(VALID_PROXY_MODES as readonly string[]).includes(raw)) {
        throw new ProxyError(
          'KPT_FLAG_INVALID',
          `must be one of ${VALID_PROXY_MODES.map((m) => `'${m}'`).join(', ')} or '' (iptables)`,
        );
      }
      return raw;
    case 'quantity':
      // resource.QuantityValue: parsed now so a bad size is a flag error; kept as text, as the config field is.
      quantityValue(raw);
      return raw;
    case 'localMode':
      if (!(LOCAL_MODES as readonly string[]).includes(raw)) {
        throw new ProxyError('KPT_FLAG_INVALID', `must be one of ${LOCAL_MODES.filter((m) => m !== '').join(', ')}`);
      }
      return raw;
  }
}

/** utilflag.IPPortVar: "" (no change), an IP, or IP:port with a numeric port. */
function checkIPPort(raw: string): string {
  if (raw === '' || parseIP(raw)) return raw;
  const hp = splitHostPort(raw);
  if (!hp) throw new ProxyError('KPT_FLAG_INVALID', `${JSON.stringify(raw)} is not in a valid format (ip or ip:port)`);
  if (!parseIP(hp.host))
    throw new ProxyError('KPT_FLAG_INVALID', `${JSON.stringify(hp.host)} is not a valid IP address`);
  if (!/^[0-9]+$/.test(hp.port) || Number(hp.port) > 65535)
    throw new ProxyError('KPT_FLAG_INVALID', `${JSON.stringify(hp.port)} is not a valid number`);
  return raw;
}

function fold(f: FlagDef, values: FlagValue[]): FlagValue {
  switch (f.kind) {
    case 'strings':
      return values.flatMap((v) => v as string[]);
    case 'moduleSpec':
      return values.flatMap((v) => v as never[]);
    case 'mapStringBool':
      return Object.assign({}, ...values) as Record<string, boolean>;
    default:
      return values[values.length - 1]!;
  }
}

export function parseFlagValues(occurrences: ReadonlyMap<string, readonly string[]>): ParsedFlags {
  const values = new Map<string, FlagValue>();
  const warnings: string[] = [];
  for (const f of FLAGS) {
    const raws = occurrences.get(f.name);
    if (!raws || raws.length === 0) continue;
    const parsed = raws.map((raw) => {
      try {
        return parseOne(f, raw);
      } catch (err) {
        throw new ProxyError(
          'KPT_FLAG_INVALID',
          `invalid argument ${JSON.stringify(raw)} for "${f.short ? `-${f.short}, ` : ''}--${f.name}" flag: ${(err as Error).message}`,
        );
      }
    });
    values.set(f.name, fold(f, parsed));
    if (f.deprecated) warnings.push(`Flag --${f.name} has been deprecated, ${f.deprecated}`);
  }
  return { values, warnings };
}
