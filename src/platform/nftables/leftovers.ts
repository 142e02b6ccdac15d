// The nftables mode's table seen from outside the mode: does `ip kube-proxy`
// exist, delete it. Kept apart from the dataplane so the other modes' start-up
// cleanup (which runs on every start) loads only this, not the renderer and
// the netlink encoder.
import { LOCALHOST_TABLE } from '../../dataplane/nftables/localhost.js';
import { TABLE_NAME } from '../../dataplane/nftables/names.js';
import { commandRunner, ExecError, type ExecResult } from '../exec.js';

/** Runs `nft <args>` with optional stdin; rejects with ExecError on failure. Tests may script one. */
export type NftRunner = (args: readonly string[], input?: string) => Promise<ExecResult>;

/** nft through the process runner (src/platform/exec.ts): the host's, or inside a named network namespace. */
export function nftRunner(netns?: string): NftRunner {
  const run = commandRunner(netns);
  return (args, input) => run('nft', args, input === undefined ? {} : { input });
}

/** Whether the table exists, from the family's table list (nft reads every rule of the family for it). */
export async function tableExists(runner: NftRunner, fam: string, table = TABLE_NAME): Promise<boolean> {
  const out = await runner(['list', 'tables', fam]);
  return out.stdout.split('\n').some((l) => l.trim() === `table ${fam} ${table}`);
}

/**
 * Whether the table exists, asked by its name: what the other modes' start-up
 * cleanup uses. `nft list tables` fetches every rule of the family into nft's
 * cache first (nft 1.0.6), which beside the iptables mode's ruleset at 30k
 * Services takes minutes of CPU, in the sync runner; `list table <name>`
 * fetches that table only and fails with ENOENT when it is absent.
 */
export async function hasTable(runner: NftRunner, fam: string, table: string): Promise<boolean> {
  try {
    await runner(['list', 'table', fam, table]);
    return true;
  } catch (err) {
    if (err instanceof ExecError && /No such file or directory/.test(err.result.stderr)) return false;
    throw err;
  }
}

export async function deleteTableIfPresent(runner: NftRunner, fam: 'ip' | 'ip6', table = TABLE_NAME): Promise<void> {
  if (await tableExists(runner, fam, table)) await runner(['delete', 'table', fam, table]);
}

/**
 * Upstream nftables.CleanupLeftovers: delete `ip kube-proxy` and `ip6
 * kube-proxy` (used by --cleanup and when running another mode), and our
 * localhost NodePort reject tables beside them.
 */
export async function cleanupNftablesLeftovers(runner: NftRunner = nftRunner()): Promise<void> {
  for (const fam of ['ip', 'ip6'] as const)
    for (const table of [TABLE_NAME, LOCALHOST_TABLE])
      if (await hasTable(runner, fam, table)) await runner(['delete', 'table', fam, table]);
}
