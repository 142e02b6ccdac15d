// The userspace table through the nf_tables netlink path writes exactly what
// `nft -f` writes, on the real kernel, in two throw-away namespaces side by
// side (kpt-<pid>-<rand>-nft, -nl), never the root one: for every packet-flow
// scenario, both families, and the knobs that change the table's shape
// (nodePortAddresses CIDRs, adjacent and open to the top; localhost
// NodePorts). "Exactly": `nft list table` prints the same text and the
// kernel's own dump of the table (test/support/nftdump.ts) is byte-identical.
// The syncs follow each other without clearing, as a running proxy's do
// (every one replaces the whole table). Runs as root.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { nftFamily } from '../../src/dataplane/nftables/names.js';
import { TABLE_NAME } from '../../src/dataplane/userspace/index.js';
import { nftRunner } from '../../src/platform/nftables/leftovers.js';
import { NftWriter, type NftTransport } from '../../src/platform/nftables/writer.js';
import { PACKET_FLOW_SCENARIOS } from '../cases/packetflow.js';
import { loadScenario, TABLE_KNOBS as KNOBS } from '../dataplane/userspace-fixtures.js';
import { nftNamespacePair } from '../netns/nftpair.js';

describe('userspace: the netlink path writes what nft -f writes', { concurrency: false }, () => {
  const { nftNs: NFT_NS, nlNs: NL_NS, nftIn, assertSame } = nftNamespacePair();

  for (const family of ['IPv4', 'IPv6'] as const) {
    it(`${family}: every packet-flow scenario under every knob`, async () => {
      const fam = nftFamily(family);
      const vias: NftTransport[] = [];
      const writer = new NftWriter({
        family,
        runner: nftRunner(NL_NS),
        transport: 'netlink',
        netns: NL_NS,
        onTransaction: (_f, _s, _p, via) => vias.push(via),
      });
      let n = 0;
      try {
        for (const s of PACKET_FLOW_SCENARIOS.filter((x) => x.family === family))
          for (const knob of KNOBS) {
            const what = `${s.name} (${knob.name})`;
            const { tx, script } = loadScenario(s, knob.config);
            nftIn(NFT_NS, ['-f', '-'], script);
            await writer.apply(tx, false, null);
            n++;
            assertSame(fam, TABLE_NAME, what);
          }
      } finally {
        writer.reset();
      }
      assert.ok(n > KNOBS.length, 'scenarios of this family');
      assert.deepEqual(new Set(vias), new Set(['netlink']), 'no transaction fell back to nft');
    });
  }
});
