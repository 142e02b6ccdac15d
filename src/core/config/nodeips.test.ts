import { test } from 'node:test';
import assert from 'node:assert/strict';
import { detectNodeIPs } from './nodeips.js';

test('detectNodeIPs: node addresses, then a specified bindAddress overrides the primary', () => {
  assert.deepEqual(detectNodeIPs(['10.0.0.5', 'fd00::5'], '0.0.0.0'), {
    primaryFamily: 'IPv4',
    nodeIPs: { IPv4: '10.0.0.5', IPv6: 'fd00::5' },
    primaryIsLoopback: false,
  });
  assert.deepEqual(detectNodeIPs(['fd00::5'], '::'), {
    primaryFamily: 'IPv6',
    nodeIPs: { IPv4: '127.0.0.1', IPv6: 'fd00::5' },
    primaryIsLoopback: false,
  });
  assert.deepEqual(detectNodeIPs(['10.0.0.5'], 'fd00::9'), {
    primaryFamily: 'IPv6',
    nodeIPs: { IPv4: '10.0.0.5', IPv6: 'fd00::9' },
    primaryIsLoopback: false,
  });
  assert.deepEqual(detectNodeIPs([], '0.0.0.0'), {
    primaryFamily: 'IPv4',
    nodeIPs: { IPv4: '127.0.0.1', IPv6: '::1' },
    primaryIsLoopback: true,
  });
});
