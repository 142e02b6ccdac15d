import { test } from 'node:test';
import assert from 'node:assert/strict';
import { base32, sha256 } from '../../core/hash.js';
import { hashAndTruncate, servicePortChainNameBase, servicePortEndpointChainNameBase } from './names.js';
import type { ServicePortName } from '../../core/types.js';

const spn = (namespace: string, name: string, port: string): ServicePortName => ({
  namespace,
  name,
  port,
  protocol: 'TCP',
});
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

test('sha256 matches known digests, including multi-block input', () => {
  assert.equal(hex(sha256('')), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  assert.equal(hex(sha256('abc')), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(hex(sha256('a'.repeat(1000))), '41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3');
});

test('base32 is RFC 4648 with padding', () => {
  assert.equal(base32(new TextEncoder().encode('foobar')), 'MZXW6YTBOI======');
  assert.equal(base32(sha256('ns1/svc1/tcp/p80')), 'ULMVA6XWM6QI26IIRKVDDKRF2UNLNX267YZTUCJHT7XTKL5BJ4WA====');
});

test('chain name bases match upstream (Test_servicePortChainNameBase in pkg/proxy/nftables/proxier_test.go)', () => {
  assert.equal(hashAndTruncate('ns1/svc1/tcp/p80'), 'ULMVA6XW-ns1/svc1/tcp/p80');
  assert.ok(hashAndTruncate('ns1/svc1/tcp/p80__10.180.0.1/80').startsWith('5OJB2KTY-'));
  assert.equal(servicePortChainNameBase(spn('default', 'web', 'http')), 'SUSTUHLJ-default/web/tcp/http');
  assert.ok(
    servicePortEndpointChainNameBase(spn('default', 'web', 'http'), '10.244.1.5', 8080).startsWith('HGNPOIJ5-'),
  );
  assert.ok(
    servicePortEndpointChainNameBase(spn('default', 'web', 'http'), '10.244.2.7', 8080).startsWith('BZGFZVVG-'),
  );
  assert.ok(servicePortChainNameBase(spn('testing', 'service', 'http')).startsWith('P4ZYZVCF-'));
  assert.ok(servicePortChainNameBase(spn('testing', 'service', 'https')).startsWith('LZBRENCP-'));
  assert.equal(
    servicePortEndpointChainNameBase(spn('testing', 'service', 'http'), '10.180.0.1', 80),
    'JO2XBXZR-testing/service/tcp/http__10.180.0.1/80',
  );
  assert.equal(
    servicePortEndpointChainNameBase(spn('testing', 'service', 'http'), 'fd80:abcd:12::a1b2:c3d4:e5f6:9999', 80),
    'U7E2ET36-testing/service/tcp/http__fd80.abcd.12..a1b2.c3d4.e5f6.9999/80',
  );
});

test('long names are truncated to 240 characters ending in "..."', () => {
  const long = servicePortChainNameBase(
    spn('very-long-namespace-'.repeat(6), 'very-long-service-'.repeat(6), 'port'.repeat(4)),
  );
  assert.equal(long.length, 240);
  assert.ok(long.endsWith('...'));
  const exact = hashAndTruncate('x'.repeat(231));
  assert.equal(exact.length, 240);
  assert.ok(!exact.endsWith('...'));
});
