import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { base32, sha256 } from '../../core/hash.js';
import {
  endpointChainName,
  externalChainName,
  firewallChainName,
  isServiceChainName,
  ChainNamer,
  localChainName,
  serviceChainName,
  servicePortChainHash,
} from './names.js';

test('chain names hash as upstream (servicePortChainName, servicePortEndpointChainName in pkg/proxy/iptables/proxier.go)', () => {
  assert.equal(servicePortChainHash('ns1/svc1:p80', 'TCP'), 'XPGD46QRK7WJZT7O');
  assert.equal(serviceChainName('ns1/svc1:p80', 'TCP'), 'KUBE-SVC-XPGD46QRK7WJZT7O');
  assert.equal(endpointChainName('ns1/svc1:p80', 'TCP', '10.180.0.1:80'), 'KUBE-SEP-SXIVWICOYRO3J4NJ');
  assert.equal(serviceChainName('default/web:http', 'TCP'), 'KUBE-SVC-CDGGSHYLG3RE2FKL');
  assert.equal(endpointChainName('default/web:http', 'TCP', '10.244.1.5:8080'), 'KUBE-SEP-AFGSLHOD2HFNCBX4');
  assert.equal(endpointChainName('default/web:http', 'TCP', '10.244.2.7:8080'), 'KUBE-SEP-2RIJ5GIYXEFH6G4D');
});

test('SVC/SVL/EXT/FW share one hash; the protocol is part of it', () => {
  const h = servicePortChainHash('ns5/svc5:p80', 'TCP');
  assert.equal(h, 'NUKIZ6OKUXPJNT4C'); // from upstream TestOverallIPTablesRules
  assert.equal(localChainName('ns5/svc5:p80', 'TCP'), `KUBE-SVL-${h}`);
  assert.equal(externalChainName('ns5/svc5:p80', 'TCP'), `KUBE-EXT-${h}`);
  assert.equal(firewallChainName('ns5/svc5:p80', 'TCP'), `KUBE-FW-${h}`);
  assert.notEqual(servicePortChainHash('ns5/svc5:p80', 'UDP'), h);
  assert.ok(endpointChainName('ns/s:p', 'TCP', '[fd00::1]:80').length <= 28);
});

test('isServiceChainName matches only per-service chains', () => {
  for (const c of ['KUBE-SVC-X', 'KUBE-SVL-X', 'KUBE-EXT-X', 'KUBE-FW-X', 'KUBE-SEP-X'])
    assert.ok(isServiceChainName(c), c);
  for (const c of [
    'KUBE-SERVICES',
    'KUBE-NODEPORTS',
    'KUBE-MARK-MASQ',
    'KUBE-EXTERNAL-SERVICES',
    'KUBE-FIREWALL',
    'KUBE-FORWARD',
  ])
    assert.ok(!isServiceChainName(c), c);
});

test('pure sha256/base32 agree with node:crypto and RFC 4648', () => {
  for (const s of ['', 'abc', 'a'.repeat(55), 'b'.repeat(56), 'c'.repeat(64), 'ü€😀'.repeat(30)]) {
    assert.equal(Buffer.from(sha256(s)).toString('hex'), createHash('sha256').update(s, 'utf8').digest('hex'), s);
  }
  const enc = (s: string) => base32(new TextEncoder().encode(s));
  assert.deepEqual(['', 'f', 'fo', 'foo', 'foob', 'fooba', 'foobar'].map(enc), [
    '',
    'MY======',
    'MZXQ====',
    'MZXW6===',
    'MZXW6YQ=',
    'MZXW6YTB',
    'MZXW6YTBOI======',
  ]);
});

test('ChainNamer: the same names as the string functions, per ServicePort object and per renderer', () => {
  const namer = new ChainNamer();
  const hashOf = (s: string) => base32(new Uint8Array(createHash('sha256').update(s, 'utf8').digest())).slice(0, 16);
  // ASCII (scratch-buffer path), long (buffer growth) and non-ASCII (TextEncoder path) names.
  for (const key of ['ns1/svc1:p80', `ns/${'x'.repeat(300)}:p`, 'ns/ü€:p']) {
    const sp = { key, protocol: 'UDP' as const };
    const n = namer.of(sp);
    assert.equal(n.cluster, `KUBE-SVC-${hashOf(`${key}udp`)}`);
    assert.equal(n.cluster, serviceChainName(key, 'UDP'));
    assert.equal(n.local, localChainName(key, 'UDP'));
    assert.equal(n.external, externalChainName(key, 'UDP'));
    assert.equal(n.firewall, firewallChainName(key, 'UDP'));
    for (const ep of ['10.0.0.1:53', '[fd00::1]:53']) {
      assert.equal(n.endpoint(ep), endpointChainName(key, 'UDP', ep));
      assert.equal(n.endpoint(ep), `KUBE-SEP-${hashOf(`${key}udp${ep}`)}`);
    }
    assert.equal(namer.of(sp), n, 'remembered for the object');
    assert.notEqual(namer.of({ ...sp }), n, 'another object gets its own entry');
    assert.notEqual(new ChainNamer().of(sp), n, 'another renderer keeps its own memory');
  }
  assert.equal(namer.of({ key: 'ns1/svc1:p80', protocol: 'TCP' }).cluster, 'KUBE-SVC-XPGD46QRK7WJZT7O');
});
