// `kube-proxy-ts status`: flags, the filter, and the tables it prints from a
// status document fetched over real HTTP from a metrics server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { syncStateFromObjects } from '../core/snapshot.js';
import { buildStatusView, type StatusDoc } from '../engine/statusview.js';
import {
  endpoint,
  makeNode,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  TEST_NODE,
  withClusterIP,
} from '../../test/support/fixtures.js';
import { fetchStatus, parseStatusArgs, rowMatches } from './status.js';
import { statusTable, table } from './statustable.js';

function doc(): StatusDoc {
  const web = withClusterIP(
    makeService('shop', 'web', (s) => {
      s.spec.type = 'NodePort';
      s.spec.externalTrafficPolicy = 'Local';
      s.spec.ports = [svcPort('http', 80, 'TCP', { nodePort: 30080 })];
    }),
    '172.30.0.10',
  );
  const slice = makeSlice('shop', 'web', 1, (s) => {
    s.endpoints = [
      endpoint('10.0.1.1', { nodeName: TEST_NODE }),
      endpoint('10.0.2.1', { nodeName: 'node2' }),
      endpoint('10.0.2.2', { nodeName: 'node2', ready: false, serving: false, terminating: true }),
    ];
    s.ports = [slicePort('http', 8080)];
  });
  const st = syncStateFromObjects({ services: [web], slices: [slice], family: 'IPv4', node: makeNode(TEST_NODE) });
  return buildStatusView({
    mode: 'iptables',
    version: '0.1.0',
    startTime: Date.UTC(2026, 0, 1),
    now: Date.UTC(2026, 0, 1, 0, 1, 5),
    node: st.node,
    initialized: true,
    syncs: [
      {
        family: 'IPv4',
        lastSync: { at: Date.UTC(2026, 0, 1, 0, 1), durationSeconds: 0.0123, partial: true },
        lastError: null,
        failuresSinceSuccess: 0,
        repairs: 0,
        lastRepair: null,
      },
    ],
    states: new Map([['IPv4', st]]),
  });
}

test('table aligns multi-line cells and leaves the last column unpadded', () => {
  assert.equal(table(['A', 'BB', 'C'], [['x\nyy', 'z', 'last']]), 'A   BB  C\nx   z   last\nyy\n');
});

test('the status table: header, families, one block per port with used and skipped endpoints', () => {
  const out = statusTable(doc());
  assert.equal(
    out,
    [
      'kube-proxy-ts 0.1.0 on node test-node (192.168.0.2), mode iptables, started 2026-01-01T00:00:00.000Z, up 1m5s',
      '',
      'FAMILY  LAST SYNC                 DURATION  KIND     PORTS  LAST ERROR  REPAIRS',
      'IPv4    2026-01-01T00:01:00.000Z  12.3 ms   partial  1      none        0',
      '',
      'SERVICE PORT   ADDRESSES                 TRAFFIC                        ENDPOINTS USED           NOT USED, WHY',
      "shop/web:http  ClusterIP 172.30.0.10:80  internal Cluster: forward (2)  10.0.1.1:8080 (int,ext)  10.0.2.1:8080 Local policy (ext): runs on node node2; the Local traffic policy uses only this node's endpoints",
      'TCP IPv4       NodePort *:30080          external Local: forward (1)    10.0.2.1:8080 (int)      10.0.2.2:8080 terminating (int,ext): terminating and no longer serving',
      '',
    ].join('\n'),
  );
  assert.match(statusTable({ ...doc(), servicePorts: [] }, ['nope']), /No service port matches "nope"\.\n$/);
});

test('flags and the row filter', () => {
  assert.deepEqual(parseStatusArgs(['default/web', '-o', 'json', '--netns', 'n1']), {
    address: '127.0.0.1:10249',
    netns: 'n1',
    output: 'json',
    words: ['default/web'],
  });
  assert.throws(() => parseStatusArgs(['-o', 'yaml']), /--output: want table or json/);
  assert.throws(() => parseStatusArgs(['--address', 'localhost']), { code: 'KPT_CONFIG_INVALID' });
  assert.throws(() => parseStatusArgs(['--bogus']), /Unknown option/);
  const row = doc().servicePorts[0]!;
  assert.equal(rowMatches(row, ['shop/web', 'local-policy']), true);
  assert.equal(rowMatches(row, ['other-zone-hint']), false);
});

test('fetchStatus reads ?format=json and names the address when the proxy is away or /statusz is off', async (t) => {
  const d = doc();
  const srv = createServer((req, res) => {
    if (req.url === '/statusz?format=json') res.end(JSON.stringify({ kind: 'Statusz', proxy: d }));
    else {
      res.statusCode = 404;
      res.end('404 page not found\n');
    }
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.after(() => srv.close());
  const port = (srv.address() as AddressInfo).port;
  assert.deepEqual(await fetchStatus(`127.0.0.1:${port}`), d);
  srv.removeAllListeners('request');
  srv.on('request', (_req, res) => {
    res.statusCode = 404;
    res.end();
  });
  await assert.rejects(
    fetchStatus(`127.0.0.1:${port}`),
    /does not serve \/statusz \(feature gate ComponentStatusz=false\?\)/,
  );
  // A port nothing listens on.
  const gone = createServer();
  await new Promise<void>((r) => gone.listen(0, '127.0.0.1', r));
  const freePort = (gone.address() as AddressInfo).port;
  await new Promise<void>((r) => gone.close(() => r()));
  await assert.rejects(
    fetchStatus(`127.0.0.1:${freePort}`),
    new RegExp(`cannot reach kube-proxy-ts at 127.0.0.1:${freePort} \\(.*ECONNREFUSED`),
  );
});
