// nftables side of `diff`: the live kube-proxy table is read as the
// dataplane reads it before a full sync (`nft -j list table` -> the
// driver's KernelSnapshot) and into the Fake (listing.ts, for the rules);
// the real NftablesPlanner plans a full sync against that snapshot, the
// transaction runs on a copy of the Fake, and the two are compared
// (tablediff.ts). Only `nft list` commands reach the kernel.
import type { DataplaneConfig, IPFamily, SyncState } from '../../../core/types.js';
import { Fake } from '../../../dataplane/nftables/fake.js';
import { loadNftTable, parseElementsJSON, parseNftListing } from '../../../dataplane/nftables/listing.js';
import { nftFamily, TABLE_NAME } from '../../../dataplane/nftables/names.js';
import { EMPTY_SNAPSHOT } from '../../../dataplane/nftables/driver.js';
import { diffNftTables, nftDiffText } from '../../../dataplane/nftables/tablediff.js';
import { realClock } from '../../../platform/clock.js';
import type { CommandRunner } from '../../../platform/exec.js';
import { NftablesPlanner } from '../../../platform/nftables/planner.js';
import { parseTableJSON } from '../../../platform/nftables/readback.js';
import type { FamilyDiff } from '../driver.js';
import { nftablesLayout } from './driver.js';

export interface NftablesFamilyInput {
  readonly run: CommandRunner;
  readonly family: IPFamily;
  readonly config: DataplaneConfig;
  readonly state: SyncState;
}

export async function diffNftablesFamily(i: NftablesFamilyInput): Promise<FamilyDiff> {
  const fam = nftFamily(i.family);
  const tables = (await i.run('nft', ['list', 'tables', fam])).stdout;
  const exists = tables.split('\n').some((l) => l.trim() === `table ${fam} ${TABLE_NAME}`);
  let before = new Fake(fam, TABLE_NAME);
  let after = new Fake(fam, TABLE_NAME);
  let snapshot = EMPTY_SNAPSHOT;
  if (exists) {
    const text = (await i.run('nft', ['list', 'table', fam, TABLE_NAME])).stdout;
    const json = (await i.run('nft', ['-j', 'list', 'table', fam, TABLE_NAME])).stdout;
    snapshot = parseTableJSON(json, TABLE_NAME);
    const listing = parseNftListing(text);
    const elements = parseElementsJSON(json, TABLE_NAME);
    before = loadNftTable(fam, listing, elements);
    after = loadNftTable(fam, listing, elements);
  }
  // The planner and layout the proxy would use (KPT_NFTABLES_LAYOUT included).
  const { tx } = new NftablesPlanner(i.config, nftablesLayout()).plan(i.state, realClock.now(), snapshot);
  after.run(tx);
  const diffs = diffNftTables(before, after);
  const added = diffs.reduce((n, d) => n + d.lines.filter((l) => l.op === '+').length, 0);
  const removed = diffs.reduce((n, d) => n + d.lines.filter((l) => l.op === '-').length, 0);
  const objects = diffs.filter((d) => d.status !== 'changed').length;
  const changes = added + removed + objects;
  const summary =
    changes === 0
      ? 'no changes'
      : `${diffs.length} chains/sets differ (${diffs.filter((d) => d.status === 'added').length} added, ${diffs.filter((d) => d.status === 'removed').length} removed); ${added} rules/elements added, ${removed} removed`;
  return { family: i.family, changes, summary, text: nftDiffText(diffs), nft: diffs };
}
