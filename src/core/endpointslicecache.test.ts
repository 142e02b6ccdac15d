import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EndpointSliceCache, endpointsKey } from './endpointslicecache.js';
import type { EndpointSlice } from './api.js';
import { READY, SERVING_TERMINATING, TEST_NODE, endpoint, makeSlice, slicePort } from '../../test/support/fixtures.js';

function cacheWith(...slices: EndpointSlice[]) {
  const skips: string[] = [];
  const c = new EndpointSliceCache(TEST_NODE, 'IPv4', (k, r) => skips.push(`${k}: ${r}`));
  for (const s of slices) c.updatePending(s, false);
  c.checkoutChanges();
  return { c, skips };
}
const pk = (port: string, protocol: 'TCP' | 'UDP' | 'SCTP' = 'TCP') =>
  endpointsKey({ namespace: 'ns1', name: 'svc1', port, protocol });
const epKeys = (c: EndpointSliceCache, k: string) =>
  c
    .endpointsOf('ns1/svc1')
    .get(k)
    ?.endpoints.map((e) => e.key);

test('several slices of one Service are merged and sorted by IP:port string', () => {
  const a = makeSlice('ns1', 'svc1', 1, (s) => {
    s.ports = [slicePort('p80', 80)];
    s.endpoints = [endpoint('10.244.0.8'), endpoint('10.244.0.10')];
  });
  const b = makeSlice('ns1', 'svc1', 2, (s) => {
    s.ports = [slicePort('p80', 80)];
    s.endpoints = [endpoint('10.244.0.9')];
  });
  const { c } = cacheWith(a, b);
  assert.deepEqual(epKeys(c, pk('p80')), ['10.244.0.10:80', '10.244.0.8:80', '10.244.0.9:80']);
});

test('ports with a nil name or port 0 are ignored; "" is a valid name', () => {
  const s = makeSlice('ns1', 'svc1', 1, (x) => {
    x.endpoints = [endpoint('10.0.0.1')];
    x.ports = [
      { port: 80, protocol: 'TCP' },
      { name: null, port: 81 },
      { name: 'zero', port: 0 },
      { name: 'nil', port: null },
      { name: '', port: 82, protocol: 'UDP' },
    ];
  });
  const { c, skips } = cacheWith(s);
  assert.deepEqual([...c.endpointsOf('ns1/svc1').keys()], [pk('', 'UDP')]);
  assert.deepEqual(epKeys(c, pk('', 'UDP')), ['10.0.0.1:82']);
  assert.deepEqual(skips, []);
});

test('conditions default: ready nil=true, serving nil=true, terminating nil=false', () => {
  const s = makeSlice('ns1', 'svc1', 1, (x) => {
    x.ports = [slicePort('p', 80)];
    x.endpoints = [
      endpoint('10.0.0.1'),
      endpoint('10.0.0.2', SERVING_TERMINATING),
      { addresses: ['10.0.0.3'], conditions: { ready: null, serving: null, terminating: null } },
    ];
  });
  const eps = cacheWith(s).c.endpointsOf('ns1/svc1').get(pk('p'))!.endpoints;
  assert.deepEqual(
    eps.map((e) => [e.ip, e.ready, e.serving, e.terminating]),
    [
      ['10.0.0.1', true, true, false],
      ['10.0.0.2', false, true, true],
      ['10.0.0.3', true, true, false],
    ],
  );
});

test('only addresses[0]; isLocal by nodeName; hints and zone read', () => {
  const s = makeSlice('ns1', 'svc1', 1, (x) => {
    x.ports = [slicePort('p', 80)];
    x.endpoints = [
      {
        ...endpoint('10.0.0.1', { nodeName: TEST_NODE, zone: 'z1', forZones: ['z1', 'z2'], forNodes: [TEST_NODE] }),
        addresses: ['10.0.0.1', '10.0.0.99'],
      },
      endpoint('10.0.0.2', { nodeName: 'other' }),
      { addresses: [] },
    ];
  });
  const eps = cacheWith(s).c.endpointsOf('ns1/svc1').get(pk('p'))!.endpoints;
  assert.deepEqual(
    eps.map((e) => e.key),
    ['10.0.0.1:80', '10.0.0.2:80'],
  );
  assert.equal(eps[0]!.isLocal, true);
  assert.equal(eps[1]!.isLocal, false);
  assert.deepEqual([...eps[0]!.zoneHints!], ['z1', 'z2']);
  assert.deepEqual([...eps[0]!.nodeHints!], [TEST_NODE]);
  assert.equal(eps[0]!.zone, 'z1');
  assert.equal(eps[1]!.zoneHints, null);
  assert.equal(eps[1]!.nodeHints, null);
});

test('duplicate IP:port across slices: the non-terminating entry wins', () => {
  const a = makeSlice('ns1', 'svc1', 'a', (s) => {
    s.ports = [slicePort('p', 80)];
    s.endpoints = [endpoint('10.0.0.1', SERVING_TERMINATING)];
  });
  const b = makeSlice('ns1', 'svc1', 'b', (s) => {
    s.ports = [slicePort('p', 80)];
    s.endpoints = [endpoint('10.0.0.1', READY)];
  });
  for (const order of [
    [a, b],
    [b, a],
  ]) {
    const eps = cacheWith(...order)
      .c.endpointsOf('ns1/svc1')
      .get(pk('p'))!.endpoints;
    assert.equal(eps.length, 1);
    assert.equal(eps[0]!.terminating, false);
  }
});

test('slices without the service-name label, or of another family, are not changes', () => {
  const c = new EndpointSliceCache(TEST_NODE, 'IPv4');
  const noLabel = makeSlice('ns1', 'svc1', 1, (s) => {
    s.metadata.labels = {};
  });
  const v6 = makeSlice('ns1', 'svc1', 2, (s) => {
    s.addressType = 'IPv6';
  });
  const fqdn = makeSlice('ns1', 'svc1', 3, (s) => {
    s.addressType = 'FQDN';
  });
  assert.equal(c.updatePending(noLabel, false), false);
  assert.equal(c.updatePending(v6, false), false);
  assert.equal(c.updatePending(fqdn, false), false);
  assert.equal(c.pendingCount(), 0);
});

test('updatePending reports real changes only; checkout returns previous/current', () => {
  const c = new EndpointSliceCache(TEST_NODE, 'IPv4');
  const s1 = makeSlice('ns1', 'svc1', 1, (s) => {
    s.ports = [slicePort('p', 80)];
    s.endpoints = [endpoint('10.0.0.1')];
  });
  assert.equal(c.updatePending(s1, false), true);
  assert.equal(c.updatePending(structuredClone(s1), false), false, 'same content again');
  assert.equal(c.pendingCount(), 1);
  let ch = c.checkoutChanges().get('ns1/svc1')!;
  assert.equal(c.pendingCount(), 0);
  assert.equal(c.checkoutChanges().size, 0, 'a second checkout has nothing');
  assert.equal(ch.previous.size, 0);
  assert.deepEqual(
    ch.current.get(pk('p'))!.endpoints.map((e) => e.key),
    ['10.0.0.1:80'],
  );
  const relabelled = structuredClone(s1);
  relabelled.metadata.resourceVersion = '2';
  relabelled.metadata.annotations = { x: 'y' };
  assert.equal(c.updatePending(relabelled, false), false, 'metadata-only change is not a change');
  assert.equal(c.updatePending(s1, true), true);
  ch = c.checkoutChanges().get('ns1/svc1')!;
  assert.equal(ch.previous.size, 1);
  assert.equal(ch.current.size, 0);
  assert.equal(c.updatePending(s1, true), false, 'deleting an unknown slice is not a change');
});

test('malformed slices and endpoints are skipped with a reason, never thrown', () => {
  const skips: string[] = [];
  const c = new EndpointSliceCache(TEST_NODE, 'IPv4', (k, r) => skips.push(`${k}: ${r}`));
  const garbage: unknown[] = [
    null,
    1,
    {},
    { metadata: 'x' },
    { metadata: { namespace: 'ns1', name: 's', labels: { 'kubernetes.io/service-name': 5 } } },
  ];
  for (const g of garbage) assert.equal(c.updatePending(g as EndpointSlice, false), false);
  assert.equal(skips.length, garbage.length);
  skips.length = 0;
  const bad = makeSlice('ns1', 'svc1', 1, (s) => {
    s.ports = [
      slicePort('p', 80),
      { name: 'neg', port: -1 },
      { name: 'str', port: '80' as unknown as number },
      { name: 'pr', port: 81, protocol: 'X' as unknown as 'TCP' },
    ];
    s.endpoints = [
      endpoint('10.0.0.1'),
      endpoint('10.0.0.300'),
      null as unknown as ReturnType<typeof endpoint>,
      endpoint('fd00::1'),
      { addresses: 'x' as unknown as string[] },
    ];
  });
  assert.equal(c.updatePending(bad, false), true);
  const eps = c.checkoutChanges().get('ns1/svc1')!.current;
  assert.deepEqual([...eps.keys()], [pk('p')]);
  assert.deepEqual(
    eps.get(pk('p'))!.endpoints.map((e) => e.key),
    ['10.0.0.1:80'],
  );
  assert.equal(skips.length, 4, skips.join('\n'));
  // endpoints: null / ports: null are legal (empty)
  const empty = makeSlice('ns1', 'svc2', 1, (s) => {
    (s as EndpointSlice).endpoints = null;
    (s as EndpointSlice).ports = null;
  });
  assert.equal(c.updatePending(empty, false), true);
});

test('IPv6 cache keeps IPv6 endpoints with bracketed keys', () => {
  const c = new EndpointSliceCache(TEST_NODE, 'IPv6');
  const s = makeSlice('ns1', 'svc1', 1, (x) => {
    x.addressType = 'IPv6';
    x.ports = [slicePort('p', 80)];
    x.endpoints = [endpoint('FD00::0001')];
  });
  c.updatePending(s, false);
  c.checkoutChanges();
  assert.deepEqual(epKeys(c, pk('p')), ['[fd00::1]:80']);
});

test('checkout in steps: the same changes as at once; slices that arrive between steps wait for the next checkout', () => {
  const slices = (gen: number) =>
    Array.from({ length: 450 }, (_, i) =>
      makeSlice('ns1', `svc${i}`, 1, (s) => {
        s.ports = [slicePort('p80', 80)];
        s.endpoints = [endpoint(`10.244.${gen}.${i % 250}`)];
      }),
    );
  const once = new EndpointSliceCache(TEST_NODE, 'IPv4');
  const stepped = new EndpointSliceCache(TEST_NODE, 'IPv4');
  for (const c of [once, stepped]) {
    for (const s of slices(1)) c.updatePending(s, false);
    c.checkoutChanges();
    for (const s of slices(2)) c.updatePending(s, false);
  }
  const expected = once.checkoutChanges();
  const steps = stepped.checkoutChangesSteps();
  let r = steps.next();
  let n = 0;
  const late = makeSlice('ns1', 'svc0', 1, (s) => {
    s.ports = [slicePort('p80', 80)];
    s.endpoints = [endpoint('10.244.9.9')];
  });
  while (!r.done) {
    // Between two steps the informer delivers a newer copy of a slice already taken.
    if (n++ === 0) assert.equal(stepped.updatePending(late, false), true);
    r = steps.next();
  }
  assert.ok(n >= 2, `several steps (${n})`);
  assert.deepEqual(r.value, expected);
  assert.equal(
    r.value
      .get('ns1/svc0')!
      .current.get(endpointsKey({ namespace: 'ns1', name: 'svc0', port: 'p80', protocol: 'TCP' }))!.endpoints[0]!.ip,
    '10.244.2.0',
  );
  assert.equal(stepped.pendingCount(), 1);
  const next = stepped.checkoutChanges();
  assert.deepEqual([...next.keys()], ['ns1/svc0']);
  assert.deepEqual(
    [...stepped.endpointsOf('ns1/svc0').values()].map((pe) => pe.endpoints.map((e) => e.key)),
    [['10.244.9.9:80']],
  );
});
