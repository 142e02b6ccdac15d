import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  healthCheckListenAddresses,
  planServices,
  selectNodeIPs,
  ServiceEndpointCounts,
  serviceHealthResponse,
} from './servicehealth.js';

test('planServices: close removed and re-ported services, open new ones, skip invalid ports', () => {
  const open = new Map([
    ['ns/a', 30001],
    ['ns/b', 30002],
    ['ns/c', 30003],
  ]);
  const wanted = new Map([
    ['ns/a', 30001],
    ['ns/b', 30012],
    ['ns/d', 30004],
    ['ns/bad', 0],
    ['ns/huge', 70000],
  ]);
  assert.deepEqual(planServices(open, wanted), {
    close: ['ns/b', 'ns/c'],
    open: [
      ['ns/b', 30012],
      ['ns/d', 30004],
    ],
  });
  assert.deepEqual(planServices(new Map(), new Map()), { close: [], open: [] });
});

test('selectNodeIPs follows nodePortAddresses; no match falls back to all', () => {
  const local = ['10.0.0.5', '127.0.0.1', '192.168.1.2', 'fd00::5'];
  assert.equal(selectNodeIPs(null, local), null);
  assert.deepEqual(selectNodeIPs(['10.0.0.0/8', 'fd00::/64'], local), ['10.0.0.5', 'fd00::5']);
  assert.equal(selectNodeIPs(['172.16.0.0/12'], local), null);
});

test('serviceHealthResponse: upstream body, headers and code', () => {
  const ok = serviceHealthResponse('web/frontend', 2, true);
  assert.equal(ok.status, 200);
  assert.equal(
    ok.body,
    '{\n\t"service": {\n\t\t"namespace": "web",\n\t\t"name": "frontend"\n\t},\n\t"localEndpoints": 2,\n\t"serviceProxyHealthy": true\n}',
  );
  assert.deepEqual(JSON.parse(ok.body), {
    service: { namespace: 'web', name: 'frontend' },
    localEndpoints: 2,
    serviceProxyHealthy: true,
  });
  assert.deepEqual(ok.headers, {
    'Content-Type': 'application/json',
    'X-Content-Type-Options': 'nosniff',
    'X-Load-Balancing-Endpoint-Weight': '2',
  });
  assert.equal(serviceHealthResponse('web/frontend', 0, true).status, 503);
  assert.equal(serviceHealthResponse('web/frontend', 3, false).status, 503);
  assert.equal(serviceHealthResponse('web/frontend', 0, true).headers['X-Load-Balancing-Endpoint-Weight'], '0');
});

test('ServiceEndpointCounts: unknown ignored, missing zeroed, late opens take the last count', () => {
  const c = new ServiceEndpointCounts();
  c.opened('ns/a');
  c.sync(
    new Map([
      ['ns/a', 3],
      ['ns/b', 2],
      ['ns/x', 9],
    ]),
  );
  assert.equal(c.get('ns/a'), 3);
  assert.equal(c.get('ns/x'), undefined);
  c.opened('ns/b');
  assert.equal(c.get('ns/b'), 2, 'opened after the endpoints sync');
  c.sync(new Map([['ns/b', -1]]));
  assert.equal(c.get('ns/a'), 0);
  assert.equal(c.get('ns/b'), 0, 'invalid counts are 0');
  c.closed('ns/a');
  assert.equal(c.get('ns/a'), undefined);
});

test('healthCheckListenAddresses: one set per family, the family wildcard when it selects all', () => {
  const v4 = { family: 'IPv4' as const, localIPs: ['127.0.0.1', '10.0.0.5'] };
  const v6 = { family: 'IPv6' as const, localIPs: ['::1', 'fd00::5'] };
  assert.deepEqual(
    healthCheckListenAddresses([
      { ...v4, nodePortAddresses: null },
      { ...v6, nodePortAddresses: null },
    ]),
    ['0.0.0.0', '::'],
  );
  assert.deepEqual(
    healthCheckListenAddresses([
      { ...v4, nodePortAddresses: ['10.0.0.0/8'] },
      { ...v6, nodePortAddresses: ['fd00::/64'] },
    ]),
    ['10.0.0.5', 'fd00::5'],
  );
  assert.deepEqual(healthCheckListenAddresses([{ ...v6, nodePortAddresses: ['fd00::/64'] }]), ['fd00::5']);
});
