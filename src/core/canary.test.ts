// The canary's ClusterIP per family: one the intake refuses for every user's
// Service, and (for IPv6) one that needs no zone, so the probe can reach it
// from the node's own namespace with nothing but a route.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CANARY_VIP4, CANARY_VIP6, canaryTarget, canaryVIP } from './canary.js';
import { parseCIDR, cidrContains, parseIP, specialIPReason } from './ip.js';

test('each family has its own canary ClusterIP, and the intake refuses both for users', () => {
  assert.equal(canaryVIP('IPv4'), CANARY_VIP4);
  assert.equal(canaryVIP('IPv6'), CANARY_VIP6);
  assert.equal(specialIPReason(parseIP(CANARY_VIP4)!), 'link-local');
  assert.match(specialIPReason(parseIP(CANARY_VIP6)!) ?? '', /discard-only/);
});

test('the IPv6 canary sits in the discard-only 100::/64, not in link-local (a zone) nor a routable block', () => {
  const ip = parseIP(CANARY_VIP6)!;
  assert.equal(ip.family, 'IPv6');
  assert.equal(ip.text, CANARY_VIP6, 'written in its normal form, as the rules and /statusz print it');
  assert.ok(cidrContains(parseCIDR('100::/64')!, ip));
  assert.ok(!cidrContains(parseCIDR('fe80::/10')!, ip), 'a link-local address would need a zone id');
  // Its low 32 bits are the IPv4 canary's address, so the two are recognised as a pair.
  assert.deepEqual([...ip.bytes.subarray(12)], CANARY_VIP4.split('.').map(Number));
});

test('the IPv6 canary Service port and its endpoint, the listener written as [ip]:port', () => {
  const c = canaryTarget('IPv6', 'node2', 'fd00:77::12', 40000);
  assert.equal(c.servicePort.family, 'IPv6');
  assert.equal(c.servicePort.clusterIP, CANARY_VIP6);
  assert.equal(c.servicePort.port, 10257);
  assert.equal(c.endpoint.key, '[fd00:77::12]:40000');
  assert.equal(c.endpoint.ip, 'fd00:77::12');
  assert.equal(canaryTarget('IPv4', 'node2', '192.168.77.12', 40000).endpoint.key, '192.168.77.12:40000');
});
