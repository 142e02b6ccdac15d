import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nodeInfoFromNode, stringLabels } from './nodeinfo.js';
import type { Node } from './api.js';
import { makeNode } from '../../test/support/fixtures.js';

test('primary IPs: InternalIP before ExternalIP, first of each family, normalised', () => {
  const node: Node = {
    metadata: { name: 'n1', labels: { 'topology.kubernetes.io/zone': 'z1' } },
    status: {
      addresses: [
        { type: 'Hostname', address: 'n1' },
        { type: 'ExternalIP', address: '203.0.113.5' },
        { type: 'InternalIP', address: '192.168.000.002' },
        { type: 'InternalIP', address: '192.168.0.3' },
        { type: 'ExternalIP', address: 'FD00::0002' },
      ],
    },
  };
  const info = nodeInfoFromNode('n1', node);
  assert.deepEqual(info.nodeIPs, { IPv4: '192.168.0.2', IPv6: 'fd00::2' });
  assert.deepEqual(info.labels, { 'topology.kubernetes.io/zone': 'z1' });
  assert.equal(info.name, 'n1');
});

test('podCIDRs preferred over podCIDR; the override wins per family', () => {
  const info = nodeInfoFromNode('n1', makeNode('n1', { podCIDRs: ['10.0.0.0/24', 'fd00:10::/64'] }), {
    IPv4: '10.9.9.9',
  });
  assert.deepEqual(info.podCIDRs, ['10.0.0.0/24', 'fd00:10::/64']);
  assert.equal(info.nodeIPs.IPv4, '10.9.9.9');
  const single = nodeInfoFromNode('n1', { metadata: { name: 'n1' }, spec: { podCIDR: '10.1.0.0/24' } });
  assert.deepEqual(single.podCIDRs, ['10.1.0.0/24']);
});

test('garbage is reported, never thrown', () => {
  const skips: string[] = [];
  const info = nodeInfoFromNode(
    'n1',
    {
      metadata: { name: 'n1', labels: { a: 'b', c: 5 as unknown as string } },
      spec: { podCIDRs: ['nope', '10.0.0.0/24'] },
      status: { addresses: [null as never, { type: 'InternalIP', address: 'bad' }] },
    },
    {},
    (_k, r) => skips.push(r),
  );
  assert.deepEqual(info.labels, { a: 'b' });
  assert.deepEqual(info.podCIDRs, ['10.0.0.0/24']);
  assert.deepEqual(info.nodeIPs, {});
  assert.equal(skips.length, 2);
  assert.deepEqual(nodeInfoFromNode('n1', null), { name: 'n1', labels: {}, nodeIPs: {}, podCIDRs: [] });
  assert.deepEqual(stringLabels('x'), {});
});
