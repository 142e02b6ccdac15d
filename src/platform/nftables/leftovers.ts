// The nftables mode's table seen from outside the mode: does `ip kube-proxy`
// exist, delete it. Kept apart from the dataplane so the other modes' start-up
// cleanup (which runs on every start) loads only this, not the renderer and
// the netlink encoder.
import { TABLE_NAME } from '../../dataplane/nftables/names.js';
import { commandRunner, type ExecResult } from '../exec.js';

/** Runs `nft <args>` with optional stdin; rejects with ExecError on failure. Tests may script one. */
export type NftRunner = (args: readonly string[], input?: string) => Promise<ExecResult>;

/** nft through the process runner (src/platform/exec.ts): the host's, or inside a named network namespace. */
export function nftRunner(netns?: string): NftRunner {
  const run = commandRunner(netns);
  return (args, input) => run('nft', args, input === undefined ? {} : { input });
}

export async function tableExists(runner: NftRunner, fam: string): Promise<boolean> {
  const out = await runner(['list', 'tables', fam]);
  return out.stdout.split('\n').some((l) => l.trim() === `table ${fam} ${TABLE_NAME}`);
}

export async function deleteTableIfPresent(runner: NftRunner, fam: 'ip' | 'ip6'): Promise<void> {
  if (await tableExists(runner, fam)) await runner(['delete', 'table', fam, TABLE_NAME]);
}

/**
 * Upstream nftables.CleanupLeftovers: delete `ip kube-proxy` and `ip6
 * kube-proxy` (used by --cleanup and when running another mode).
 */
export async function cleanupNftablesLeftovers(runner: NftRunner = nftRunner()): Promise<void> {
  await deleteTableIfPresent(runner, 'ip');
  await deleteTableIfPresent(runner, 'ip6');
}
