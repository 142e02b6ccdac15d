// The userspace table through the nf_tables netlink path writes exactly what
// `nft -f` writes, on the real kernel, in two throw-away namespaces side by
// side (kpt-<pid>-<rand>-nft, -nl), never the root one: for every packet-flow
// scenario, both families, and the knobs that change the table's shape
// (nodePortAddresses CIDRs, adjacent and open to the top; localhost
// NodePorts). "Exactly": `nft list table` prints the same text and the
// kernel's own dump of the table (test/support/nftdump.ts) is byte-identical.
// The syncs follow each other without clearing, as a running proxy's do
// (every one replaces the whole table). Then partial syncs (the changed
// portals' elements only, deleted and added across the maps) go the same
// way after a full one. Runs as root.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { IPFamily } from '../../src/core/types.js';
import { nftFamily } from '../../src/dataplane/nftables/names.js';
import { TABLE_NAME } from '../../src/dataplane/userspace/index.js';
import { UserspacePlanner } from '../../src/platform/userspace/planner.js';
import { nftRunner } from '../../src/platform/nftables/leftovers.js';
import { NftWriter, type NftTransport } from '../../src/platform/nftables/writer.js';
import { service, slice } from '../cases/fixtures.js';
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

  for (const family of ['IPv4', 'IPv6'] as const) {
    it(`${family}: partial syncs after a full one`, async () => {
      const fam = nftFamily(family);
      const a = (v4: string) => (family === 'IPv4' ? v4 : `fd00:172:30::${v4.split('.').pop()}`);
      const ep = family === 'IPv4' ? '10.180.0.1' : 'fd00:10::1';
      // a: ClusterIP, externalIP and NodePort, TCP; b: UDP ClusterIP. Each step: endpoints of a and b, b present.
      const steps: Array<[string, string[], string[], boolean]> = [
        ['full: a and b without endpoints', [], [], true],
        ['a gets endpoints: refusals become redirects', [ep], [], true],
        ['b gets endpoints', [ep], [ep], true],
        ['a loses them: redirects become refusals', [], [ep], true],
        ['full again, b removed: elements only', [], [ep], false],
        ['a gets them back', [ep], [ep], false],
      ];
      const planner = new UserspacePlanner({
        family,
        masqueradeMark: 0x4000,
        masqueradeAll: false,
        localDetector: { kind: 'none' },
        nodePortAddresses: null,
        localhostNodePorts: true,
        localIPs: [],
      });
      const ports = new Map<string, number>();
      const writer = new NftWriter({ family, runner: nftRunner(NL_NS), transport: 'netlink', netns: NL_NS });
      try {
        for (const [what, aEps, bEps, withB] of steps) {
          const full = what.startsWith('full');
          const state = syncStateFromObjects({
            services: [
              service('a', { clusterIP: a('172.30.0.41'), type: 'NodePort', externalIPs: [a('192.168.99.11')] }, [
                { name: 'p', port: 80, nodePort: 30080 },
              ]),
              ...(withB
                ? [service('b', { clusterIP: a('172.30.0.42') }, [{ name: 'p', port: 53, protocol: 'UDP' }])]
                : []),
            ],
            slices: [
              ...(aEps.length
                ? [
                    slice(
                      'a',
                      [{ name: 'p', port: 8080 }],
                      aEps.map((ip) => ({ ip })),
                    ),
                  ]
                : []),
              ...(bEps.length
                ? [
                    slice(
                      'b',
                      [{ name: 'p', port: 53, protocol: 'UDP' }],
                      bEps.map((ip) => ({ ip })),
                    ),
                  ]
                : []),
            ],
            family: family as IPFamily,
            ...(full ? {} : { fullSync: false, changedServices: ['ns1/a', 'ns1/b'] }),
          });
          const plan = planner.plan(state, () => [], true);
          assert.equal(plan.write, what.startsWith('full:') ? 'replace' : 'elements', what);
          for (const l of plan.work.open) ports.set(l.key, 40000 + ports.size);
          const { tx } = planner.transaction(plan, (k) => ports.get(k));
          assert.ok(tx.numOperations > 0, what);
          if (plan.write === 'elements')
            assert.match(tx.toString(), /^((add|delete) element .*\n)+$/, `${what}: elements only`);
          nftIn(NFT_NS, ['-f', '-'], tx.toString());
          await writer.apply(tx, !full, null);
          assertSame(fam, TABLE_NAME, what);
        }
      } finally {
        writer.reset();
      }
    });
  }
});
