// Two throw-away network namespaces side by side (<prefix>nft, <prefix>nl)
// for the tests that prove the nf_tables netlink path writes what `nft -f`
// writes: one gets the table through nft, the other through netlink, and
// assertSame() compares them. Made before the calling suite, removed after it;
// never the root namespace.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import type { NftFamily } from '../../src/dataplane/nftables/names.js';
import { NETLINK_PROTOCOL, openNetlink, type NetlinkSocket } from '../../src/platform/netlink/index.js';
import { dumpTable } from '../support/nftdump.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from './cleanup.js';
import { newPrefix } from './names.js';

export interface NftPair {
  /** The namespace the table reaches through `nft -f`. */
  readonly nftNs: string;
  /** The namespace the table reaches through netlink. */
  readonly nlNs: string;
  /** `nft <args>` in a namespace, with stdin; throws when nft fails. */
  nftIn(ns: string, args: string[], input?: string): string;
  /** Both namespaces hold the same table: the same `nft list table` text and the same kernel dump. */
  assertSame(fam: NftFamily, table: string, what: string): void;
}

/** Call inside a describe(): its before() makes the pair, its after() removes it. */
export function nftNamespacePair(): NftPair {
  const prefix = newPrefix();
  const nftNs = `${prefix}nft`;
  const nlNs = `${prefix}nl`;
  const socks: Record<string, NetlinkSocket> = {};
  const nftIn = (ns: string, args: string[], input?: string) =>
    execFileSync('ip', ['netns', 'exec', ns, 'nft', ...args], { encoding: 'utf8', input: input ?? '' });
  before(async () => {
    for (const ns of [nftNs, nlNs]) {
      trackNamespace(ns);
      execFileSync('ip', ['netns', 'add', ns]);
      const s = await openNetlink(NETLINK_PROTOCOL.NETFILTER, { netns: ns });
      assert.ok(s, 'netlink available (koffi)');
      socks[ns] = s;
    }
  });
  after(() => {
    for (const ns of [nftNs, nlNs]) {
      socks[ns]?.close();
      deleteNamespaceSync(ns);
      untrackNamespace(ns);
    }
  });
  return {
    nftNs,
    nlNs,
    nftIn,
    assertSame(fam, table, what) {
      const listed = [nftNs, nlNs].map((ns) => nftIn(ns, ['list', 'table', fam, table]));
      assert.equal(listed[1], listed[0], `${what}: nft list table`);
      const dumps = [nftNs, nlNs].map((ns) => dumpTable(socks[ns]!, fam, table));
      assert.ok(dumps[0] && dumps[0].length > 0, `${what}: table exists`);
      assert.equal(dumps[1], dumps[0], `${what}: kernel dump`);
    },
  };
}
