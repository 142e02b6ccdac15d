// The userspace mode's tables seen from outside the mode (--cleanup and the
// other modes' start-up), apart from the relay code so that path loads little.
import { nftFamily } from '../../dataplane/nftables/names.js';
import { renderCleanup, TABLE_NAME } from '../../dataplane/userspace/rules.js';
import { hasTable, nftRunner, type NftRunner } from '../nftables/leftovers.js';

/**
 * Remove the userspace mode's tables of both families (for --cleanup and mode
 * switches). Tries both families; returns the errors (e.g. no IPv6 in the kernel).
 */
export async function cleanupUserspaceLeftovers(runner: NftRunner = nftRunner()): Promise<unknown[]> {
  const errors: unknown[] = [];
  for (const fam of ['IPv4', 'IPv6'] as const) {
    try {
      // Asked first: a write where nothing is ours would be a commit the running mode's drift watch sees.
      if (await hasTable(runner, nftFamily(fam), TABLE_NAME)) await runner(['-f', '-'], renderCleanup(fam).toString());
    } catch (err) {
      errors.push(err);
    }
  }
  return errors;
}
