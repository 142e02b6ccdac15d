// What /flagz shows: every flag of the command line with the value it has in
// this process, as pflag's Value.String() prints it (upstream's flagz reader
// visits every flag, given or not). Given flags show the parsed value,
// the others their default.

import { formatDuration } from '../core/config/duration.js';
import type { VModuleItem } from '../core/config/types.js';
import { FLAGS, type FlagDef, type FlagValue } from './flags.js';

/** pflag's String() of a typed flag value. */
function flagValueString(f: FlagDef, v: FlagValue): string {
  switch (f.kind) {
    case 'bool':
    case 'version':
      return String(v as boolean);
    case 'duration':
      return formatDuration(v as number);
    case 'strings':
      return `[${(v as string[]).join(',')}]`;
    case 'mapStringBool':
      return Object.entries(v as Record<string, boolean>)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, on]) => `${k}=${on}`)
        .join(',');
    case 'moduleSpec':
      return (v as VModuleItem[]).map((m) => `${m.filePattern}=${m.verbosity}`).join(',');
    default:
      return String(v);
  }
}

/** The default as pflag prints it: help texts leave zero defaults out, flagz does not. */
function defaultString(f: FlagDef): string {
  if (f.defValue !== '') return f.defValue;
  switch (f.kind) {
    case 'bool':
    case 'version':
      return 'false';
    case 'int32':
    case 'float32':
    case 'level':
      return '0';
    case 'duration':
      return '0s';
    case 'strings':
      return '[]';
    default:
      return '';
  }
}

/** Flag name -> value for every known flag. */
export function flagzValues(given: ReadonlyMap<string, FlagValue>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of FLAGS) {
    if (f.name === 'help') continue; // cobra's own flag, not one of kube-proxy's flag sets
    const v = given.get(f.name);
    out[f.name] = v === undefined ? defaultString(f) : flagValueString(f, v);
  }
  return out;
}
