// What /flagz shows: every flag of the command line with the value it has in
// this process, as pflag's Value.String() prints it (upstream's flagz reader
// visits every flag, given or not). Given flags show the parsed value,
// the others their default.

import { FLAGS, flagValueText, type FlagValue } from './flags.js';

/** Flag name -> value for every known flag. */
export function flagzValues(given: ReadonlyMap<string, FlagValue>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of FLAGS) {
    if (f.name === 'help') continue; // cobra's own flag, not one of kube-proxy's flag sets
    const v = given.get(f.name);
    // Help texts leave zero defaults out; flagz shows them.
    out[f.name] = v === undefined ? f.defValue : flagValueText(f.kind, v);
  }
  return out;
}
