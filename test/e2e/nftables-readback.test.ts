// The netlink read side on the real kernel: a table written by the
// nftables dataplane in a namespace of our own reads back over netlink into
// exactly the snapshot `nft -j list chains|sets|maps` gives, in both families,
// with map verdicts, concatenated keys and comments.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig, IPFamily } from '../../src/core/types.js';
import { TABLE_NAME } from '../../src/dataplane/nftables/names.js';
import type { KernelSnapshot } from '../../src/dataplane/nftables/driver.js';
import { NETLINK_PROTOCOL, openNetlink, type NetlinkSocket } from '../../src/platform/netlink/index.js';
import { NftablesDataplane } from '../../src/platform/nftables/dataplane.js';
import { readSnapshotNetlink } from '../../src/platform/nftables/nlreadback.js';
import { parseTableJSON } from '../../src/platform/nftables/readback.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../netns/cleanup.js';
import { newPrefix } from '../netns/names.js';
import {
  endpoint,
  makeNode,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
  withLoadBalancerIngress,
} from '../support/fixtures.js';

const NS = `${newPrefix()}nlread`;

const ADDR = {
  IPv4: {
    cluster: ['10.96.0.10', '10.96.0.11', '10.96.0.12'],
    lb: '192.0.2.10',
    ep: '10.244.1.',
    node: '192.168.0.10',
  },
  IPv6: {
    cluster: ['fd00:96::10', 'fd00:96::11', 'fd00:96::12'],
    lb: '2001:db8::10',
    ep: 'fd00:244::',
    node: 'fd00:192::10',
  },
};

function state(family: IPFamily) {
  const a = ADDR[family];
  const web = withLoadBalancerIngress(
    withClusterIP(
      makeService('ns', 'web', (s) => {
        s.spec.type = 'LoadBalancer';
        s.spec.ipFamilies = [family];
        s.spec.loadBalancerSourceRanges = [family === 'IPv4' ? '203.0.113.0/24' : '2001:db8:1::/48'];
        s.spec.ports = [
          svcPort('http', 80, 'TCP', { nodePort: 30080 }),
          svcPort('dns', 53, 'UDP', { nodePort: 30053 }),
        ];
      }),
      a.cluster[0]!,
    ),
    a.lb,
  );
  const empty = withClusterIP(
    makeService('ns', 'empty', (s) => {
      s.spec.type = 'NodePort';
      s.spec.ipFamilies = [family];
      s.spec.ports = [svcPort('sctp', 9, 'SCTP', { nodePort: 30009 })];
    }),
    a.cluster[1]!,
  );
  const plain = withClusterIP(makeService('ns', 'plain'), a.cluster[2]!);
  const slices = ['web', 'plain'].map((name) =>
    makeSlice('ns', name, 1, (s) => {
      s.addressType = family;
      s.endpoints = [endpoint(`${a.ep}5`, { nodeName: 'node-a' }), endpoint(`${a.ep}7`, { nodeName: 'node-b' })];
      s.ports = name === 'web' ? [slicePort('http', 8080), slicePort('dns', 5353, 'UDP')] : [slicePort('p80', 80)];
    }),
  );
  return syncStateFromObjects({
    services: [web, empty, plain],
    slices,
    family,
    nodeName: 'node-a',
    node: makeNode('node-a', { internalIPs: [a.node] }),
    serviceCIDRs: [family === 'IPv4' ? '10.96.0.0/16' : 'fd00:96::/112'],
  });
}

function config(family: IPFamily): DataplaneConfig {
  const a = ADDR[family];
  return {
    family,
    masqueradeMark: 1 << 14,
    masqueradeAll: false,
    localDetector: { kind: 'cidr', cidrs: [family === 'IPv4' ? '10.244.0.0/16' : 'fd00:244::/64'] },
    nodePortAddresses: [family === 'IPv4' ? `${a.node}/32` : `${a.node}/128`],
    localhostNodePorts: false,
    localIPs: [family === 'IPv4' ? '127.0.0.1' : '::1', a.node],
  };
}

/** Order-insensitive form for comparison. */
function canon(s: KernelSnapshot) {
  return {
    chains: [...s.chains].sort(),
    sets: [...s.sets].sort(),
    elements: [...s.elements]
      .map(([k, els]) => [k, els.map((e) => JSON.stringify(e)).sort()] as const)
      .sort((x, y) => x[0].localeCompare(y[0])),
  };
}

describe('nftables readback over netlink (NFTablesNetlink)', { concurrency: false }, () => {
  let sock: NetlinkSocket;
  before(async () => {
    trackNamespace(NS);
    execFileSync('ip', ['netns', 'add', NS]);
    const s = await openNetlink(NETLINK_PROTOCOL.NETFILTER, { netns: NS });
    assert.ok(s, 'netlink available (koffi)');
    sock = s;
  });
  after(() => {
    sock?.close();
    deleteNamespaceSync(NS);
    untrackNamespace(NS);
  });

  it('no table: the empty snapshot', () => {
    const snap = readSnapshotNetlink(sock, 'ip', TABLE_NAME);
    assert.deepEqual(snap, { chains: [], sets: [], elements: new Map() });
  });

  for (const family of ['IPv4', 'IPv6'] as const) {
    it(`${family}: the same snapshot as nft -j, elements and verdicts included`, async () => {
      const dp = new NftablesDataplane({ config: config(family), netns: NS });
      await dp.sync(state(family));
      dp.close();
      const fam = family === 'IPv4' ? 'ip' : 'ip6';
      const viaNft = ['chains', 'sets', 'maps'].map((what) =>
        parseTableJSON(
          execFileSync('ip', ['netns', 'exec', NS, 'nft', '-j', 'list', what, fam], { encoding: 'utf8' }),
          TABLE_NAME,
        ),
      );
      const fromNft: KernelSnapshot = {
        chains: viaNft.flatMap((p) => p.chains),
        sets: viaNft.flatMap((p) => p.sets),
        elements: new Map(viaNft.flatMap((p) => [...p.elements])),
      };
      const fromNetlink = readSnapshotNetlink(sock, fam, TABLE_NAME);
      assert.deepEqual(canon(fromNetlink), canon(fromNft));
      // The comparison is not vacuous: maps with verdicts and concatenated keys are in it.
      const svcIPs = fromNetlink.elements.get('service-ips') ?? [];
      assert.ok(svcIPs.length >= 3, JSON.stringify(svcIPs));
      assert.ok(svcIPs.every((e) => e.key.length === 3 && /^goto (service|external)-/.test(e.value?.[0] ?? '')));
      assert.ok((fromNetlink.elements.get('firewall-ips') ?? []).length > 0);
      assert.ok((fromNetlink.elements.get('no-endpoint-services') ?? []).some((e) => e.key[1] === 'sctp'));
    });
  }

  it('a restarted dataplane reading over netlink writes what one reading through nft writes', async () => {
    const scripts: Record<string, string> = {};
    for (const transport of ['nft', 'netlink'] as const) {
      const dp = new NftablesDataplane({
        config: config('IPv4'),
        netns: NS,
        transport,
        onTransaction: (_f, script) => (scripts[transport] = script),
      });
      await dp.sync(state('IPv4'));
      dp.close();
    }
    assert.ok(scripts['netlink'] !== undefined && scripts['netlink'].length > 0);
    assert.equal(scripts['netlink'], scripts['nft']);
  });
});
