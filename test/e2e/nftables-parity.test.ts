// The nf_tables netlink path writes exactly what `nft -f` writes, on the real
// kernel, in two throw-away namespaces side by side (kpt-<pid>-<rand>-nft,
// -nl): for every endpoint layout, both families, the rich fixture set
// (test/support/nftables-rich.ts: every Service feature under every config
// knob) and every packet-flow scenario.
//
// "Exactly": `nft list table` prints the same text, and the kernel's own dump
// of the table (every chain, rule expression, set with its flags, types and
// user data, and every element; test/support/nftdump.ts) is byte-identical.
//
// Cold syncs compare the renderer's script loaded by `nft -f` with the
// dataplane's netlink batch. The life-of-changes sequence compares two
// dataplanes fed the same states, one on the `nft` transport and one on
// netlink: partial syncs, stale chains aged out, a full resync and a restart
// that reads the table back.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ENDPOINT_LAYOUTS } from '../../src/dataplane/nftables/static.js';
import { nftFamily, TABLE_NAME } from '../../src/dataplane/nftables/names.js';
import { NftablesPlanner } from '../../src/platform/nftables/planner.js';
import { NftablesDataplane, type NftTransport } from '../../src/platform/nftables/dataplane.js';
import { kitchenSinkSteps, packetFlowCases, richCases, type RichCase } from '../support/nftables-rich.js';
import { nftNamespacePair } from '../netns/nftpair.js';
import { FakeClock } from '../support/fakeclock.js';

describe('nftables: the netlink path writes what nft -f writes', { concurrency: false }, () => {
  const { nftNs: NFT_NS, nlNs: NL_NS, nftIn, assertSame: same } = nftNamespacePair();

  /** Both namespaces' tables: the same `nft list table` text and the same kernel dump. */
  function assertSame(fam: 'ip' | 'ip6', what: string): void {
    same(fam, TABLE_NAME, what);
  }

  const clear = () => {
    for (const ns of [NFT_NS, NL_NS]) nftIn(ns, ['flush', 'ruleset']);
  };

  async function coldCase(layout: (typeof ENDPOINT_LAYOUTS)[number], c: RichCase): Promise<void> {
    clear();
    const script = new NftablesPlanner(c.config, layout).plan(c.state, 0).tx.toString();
    nftIn(NFT_NS, ['-f', '-'], script);
    const vias: NftTransport[] = [];
    const dp = new NftablesDataplane({
      config: c.config,
      netns: NL_NS,
      layout,
      onTransaction: (_f, _s, _p, via) => vias.push(via),
    });
    try {
      await dp.sync(c.state);
    } finally {
      dp.close();
    }
    assert.deepEqual(vias, ['netlink']);
    assertSame(nftFamily(c.family), `${layout} ${c.name}`);
  }

  for (const layout of ENDPOINT_LAYOUTS) {
    it(`${layout}: cold syncs of the rich fixtures, both families`, async () => {
      const cases = richCases();
      assert.ok(cases.some((c) => c.family === 'IPv6') && cases.some((c) => c.family === 'IPv4'));
      for (const c of cases) await coldCase(layout, c);
    });
    it(`${layout}: cold syncs of every packet-flow scenario`, async () => {
      for (const c of packetFlowCases()) await coldCase(layout, c);
    });
  }

  for (const layout of ENDPOINT_LAYOUTS) {
    for (const family of ['IPv4', 'IPv6'] as const) {
      it(`${layout} ${family}: a life of changes through both transports stays identical`, async () => {
        clear();
        const steps = kitchenSinkSteps(family);
        const config = richCases().find((c) => c.family === family)!.config;
        const clock = new FakeClock();
        const vias: Record<string, NftTransport[]> = { nft: [], netlink: [] };
        const open = (transport: NftTransport) =>
          new NftablesDataplane({
            config,
            clock,
            layout,
            transport,
            netns: transport === 'nft' ? NFT_NS : NL_NS,
            onTransaction: (_f, _s, _p, via) => vias[transport]!.push(via),
          });
        let dps = [open('nft'), open('netlink')];
        try {
          for (const step of steps) {
            if (step.restart) {
              for (const d of dps) d.close();
              dps = [open('nft'), open('netlink')];
            }
            if (step.advanceMs) clock.advance(step.advanceMs);
            const outs = [];
            for (const d of dps) outs.push(await d.sync(step.state));
            assert.equal(outs[1]!.partial, outs[0]!.partial, step.label);
            assertSame(nftFamily(family), `${layout} ${family}: ${step.label}`);
          }
        } finally {
          for (const d of dps) d.close();
        }
        assert.ok(vias['netlink']!.length >= steps.length - 1, 'every change went to the kernel');
        assert.ok(vias['netlink']!.every((v) => v === 'netlink'));
        assert.ok(vias['nft']!.every((v) => v === 'nft'));
      });
    }
  }
});
