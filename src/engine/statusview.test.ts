// The status document from real API objects: rows per service port and
// family, addresses, endpoints used and skipped with reasons, and each
// family's sync history (success, failure, recovery) from the recorder.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../core/snapshot.js';
import { ProxyError } from '../core/errors.js';
import { buildStatusView } from './statusview.js';
import { canaryTarget, withCanaryState } from '../core/canary.js';
import { CanaryJudge } from './canary.js';
import { SyncStatusRecorder } from './syncstatus.js';
import { FakeClock } from '../../test/support/fakeclock.js';
import {
  endpoint,
  makeNode,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  TEST_NODE,
  withClusterIP,
  withLoadBalancerIngress,
} from '../../test/support/fixtures.js';

function state() {
  const web = withLoadBalancerIngress(
    withClusterIP(
      makeService('shop', 'web', (s) => {
        s.spec.type = 'LoadBalancer';
        s.spec.externalTrafficPolicy = 'Local';
        s.spec.ports = [svcPort('http', 80, 'TCP', { nodePort: 30080 })];
        s.spec.externalIPs = ['192.168.99.11'];
      }),
      '172.30.0.10',
    ),
    '1.2.3.4',
  );
  const empty = withClusterIP(
    makeService('shop', 'empty', (s) => {
      s.spec.ports = [svcPort('', 53, 'UDP')];
    }),
    '172.30.0.11',
  );
  const slice = makeSlice('shop', 'web', 1, (s) => {
    s.endpoints = [
      endpoint('10.0.1.1', { nodeName: TEST_NODE }),
      endpoint('10.0.2.1', { nodeName: 'node2' }),
      endpoint('10.0.2.2', { nodeName: 'node2', ready: false }),
    ];
    s.ports = [slicePort('http', 8080)];
  });
  return syncStateFromObjects({
    services: [web, empty],
    slices: [slice],
    family: 'IPv4',
    node: makeNode(TEST_NODE, { zone: 'zone-a' }),
  });
}

test('one row per service port with addresses, used endpoints and reasons for the others', () => {
  const clock = new FakeClock(Date.UTC(2026, 0, 2, 3, 4, 5));
  const rec = new SyncStatusRecorder(clock, ['IPv4']);
  rec.observer.syncSucceeded({
    family: 'IPv4',
    durationSeconds: 0.25,
    partial: false,
    finishedAt: clock.now() / 1000,
    noLocalEndpoints: { internal: 0, external: 0 },
  });
  const st = state();
  const doc = buildStatusView({
    mode: 'nftables',
    version: '0.1.0',
    startTime: clock.now() - 65_000,
    now: clock.now(),
    node: st.node,
    initialized: true,
    syncs: rec.status(),
    states: new Map([['IPv4', st]]),
  });
  assert.equal(doc.uptimeSeconds, 65);
  assert.equal(doc.node.zone, 'zone-a');
  assert.deepEqual(doc.families, [
    {
      family: 'IPv4',
      lastSync: { time: '2026-01-02T03:04:05.000Z', durationSeconds: 0.25, full: true },
      lastError: null,
      failuresSinceSuccess: 0,
      servicePorts: 2,
      repairs: 0,
      lastRepair: null,
      canary: null,
    },
  ]);
  assert.deepEqual(
    doc.servicePorts.map((r) => r.servicePort),
    ['shop/empty', 'shop/web:http'],
  );
  const [empty, web] = doc.servicePorts;
  assert.deepEqual(empty!.traffic, [
    {
      traffic: 'internal',
      policy: 'Cluster',
      verdict: 'reject',
      endpoints: [],
      detail: 'no serving endpoints: connections are rejected',
    },
  ]);
  assert.deepEqual(
    web!.addresses.map((a) => `${a.kind} ${a.address}`),
    ['ClusterIP 172.30.0.10:80', 'NodePort *:30080', 'ExternalIP 192.168.99.11:80', 'LoadBalancer 1.2.3.4:80'],
  );
  assert.deepEqual(
    web!.traffic.map((t) => [t.traffic, t.policy, t.verdict, t.endpoints.join(',')]),
    [
      ['internal', 'Cluster', 'forward', '10.0.1.1:8080,10.0.2.1:8080'],
      ['external', 'Local', 'forward', '10.0.1.1:8080'],
    ],
  );
  assert.deepEqual(
    web!.endpoints.map((e) => [
      e.endpoint,
      e.usedFor.join(','),
      e.skipped.map((s) => `${s.traffic}:${s.text}`).join(','),
    ]),
    [
      ['10.0.1.1:8080', 'internal,external', ''],
      ['10.0.2.1:8080', 'internal', 'external:Local policy'],
      ['10.0.2.2:8080', '', 'internal:not ready,external:not ready'],
    ],
  );
  // The document is plain JSON (it is the wire format of `kube-proxy-ts status`).
  assert.deepEqual(JSON.parse(JSON.stringify(doc)), doc);
});

test('the recorder keeps the last error (with its cause) and counts failures until the next success', () => {
  const clock = new FakeClock(Date.UTC(2026, 0, 2, 3, 4, 5));
  const rec = new SyncStatusRecorder(clock, ['IPv4', 'IPv6']);
  const cause = new Error('iptables-restore: line 7 failed');
  rec.observer.syncFailed('IPv6', new ProxyError('KPT_SYNC_FAILED', 'sync failed for IPv6', { cause }), 0.1);
  clock.advance(1000);
  rec.observer.syncFailed('IPv6', new ProxyError('KPT_SYNC_FAILED', 'sync failed for IPv6', { cause }), 0.1);
  let v6 = rec.status()[1]!;
  assert.equal(v6.failuresSinceSuccess, 2);
  assert.deepEqual(v6.lastError, {
    at: Date.UTC(2026, 0, 2, 3, 4, 6),
    message: 'sync failed for IPv6: iptables-restore: line 7 failed',
  });
  assert.equal(v6.lastSync, null);
  rec.observer.syncSucceeded({
    family: 'IPv6',
    durationSeconds: 0.5,
    partial: true,
    finishedAt: clock.now() / 1000 + 1,
    noLocalEndpoints: { internal: 0, external: 0 },
  });
  v6 = rec.status()[1]!;
  assert.equal(v6.failuresSinceSuccess, 0);
  assert.equal(v6.lastError?.message, 'sync failed for IPv6: iptables-restore: line 7 failed');
  assert.deepEqual(v6.lastSync, { at: Date.UTC(2026, 0, 2, 3, 4, 7), durationSeconds: 0.5, partial: true });
  assert.equal(rec.status()[0]!.lastSync, null);
});

test('the recorder counts repairs per family and keeps the last one for /statusz', () => {
  const clock = new FakeClock(Date.UTC(2026, 0, 2, 3, 4, 5));
  const rec = new SyncStatusRecorder(clock, ['IPv4', 'IPv6']);
  const repair = (detail: string, seconds: number) =>
    rec.observer.datapathRepaired({
      family: 'IPv4',
      mode: 'iptables',
      reason: 'rules_changed',
      detail,
      seconds,
      at: clock.now(),
    });
  repair('delete rule KUBE-SERVICES', 0.4);
  clock.advance(60_000);
  repair('delete chain KUBE-SVC-X', 0.3);
  const [v4, v6] = rec.status();
  assert.equal(v4!.repairs, 2);
  assert.deepEqual(v4!.lastRepair, {
    at: Date.UTC(2026, 0, 2, 3, 5, 5),
    reason: 'rules_changed',
    detail: 'delete chain KUBE-SVC-X',
    seconds: 0.3,
  });
  assert.equal(v6!.repairs, 0);
  assert.equal(v6!.lastRepair, null);
});

test('the datapath canary is shown per family, and left out of the service ports and their count', () => {
  const clock = new FakeClock(Date.UTC(2026, 0, 2, 3, 4, 5));
  const rec = new SyncStatusRecorder(clock, ['IPv4']);
  const st = state();
  const c = canaryTarget('IPv4', TEST_NODE, '192.168.77.12', 40000);
  const withCanary = {
    ...st,
    services: new Map(st.services).set(c.servicePort.key, c.servicePort),
    endpoints: new Map(st.endpoints).set(c.servicePort.key, [c.endpoint]),
    categorized: new Map(st.categorized).set(c.servicePort.key, {
      clusterEndpoints: [c.endpoint],
      localEndpoints: null,
      allReachableEndpoints: [c.endpoint],
      hasAnyEndpoints: true,
    }),
  };
  const judge = new CanaryJudge(clock);
  const probe = { scheduledAt: 0, startedAt: 0, endedAt: 1000, epochBefore: 2, epochAfter: 2, programmed: true };
  for (let i = 0; i < 3; i++) judge.record({ ...probe, ok: false, error: 'ETIMEDOUT' });
  const doc = buildStatusView({
    mode: 'iptables',
    version: '0.1.0',
    startTime: clock.now(),
    now: clock.now(),
    node: st.node,
    initialized: true,
    syncs: rec.status(),
    states: new Map([['IPv4', withCanary]]),
    canaries: new Map([['IPv4', judge.status()]]),
  });
  assert.equal(doc.families[0]!.servicePorts, 2);
  assert.deepEqual(
    doc.servicePorts.map((r) => r.servicePort),
    ['shop/empty', 'shop/web:http'],
  );
  const canary = doc.families[0]!.canary!;
  assert.equal(canary.healthy, false);
  assert.equal(canary.failures, 3);
  assert.equal(canary.since, '2026-01-02T03:04:05.000Z');
  assert.match(canary.reason, /3 probes in a row failed, the last: ETIMEDOUT/);
});

test("an IPv6 family's canary: bracketed ClusterIP and listener, blind while no route covers the ClusterIP", () => {
  const clock = new FakeClock(Date.UTC(2026, 0, 2, 3, 4, 5));
  const empty6 = syncStateFromObjects({
    services: [],
    slices: [],
    family: 'IPv6',
    node: makeNode(TEST_NODE),
    serviceCIDRs: ['fd00:172:30::/108'],
    fullSync: true,
  });
  const st = withCanaryState(empty6, canaryTarget('IPv6', TEST_NODE, 'fd00:77::12', 40000));
  const judge = new CanaryJudge(clock);
  const probe = { scheduledAt: 0, startedAt: 0, endedAt: 1, epochBefore: 2, epochAfter: 2, programmed: true };
  judge.record({ ...probe, ok: false, error: 'ENETUNREACH', noRoute: true });
  const doc = buildStatusView({
    mode: 'nftables',
    version: '0.1.0',
    startTime: clock.now(),
    now: clock.now(),
    node: st.node,
    initialized: true,
    syncs: new SyncStatusRecorder(clock, ['IPv6']).status(),
    states: new Map([['IPv6', st]]),
    canaries: new Map([['IPv6', judge.status()]]),
  });
  const fam = doc.families[0]!;
  assert.equal(fam.family, 'IPv6');
  assert.equal(fam.servicePorts, 0, 'the canary is not a user service port');
  assert.deepEqual(fam.canary, {
    service: '[100::a9fe:fffd]:10257',
    endpoint: '[fd00:77::12]:40000',
    healthy: true,
    reason: '',
    since: null,
    consecutiveFailures: 0,
    probes: 0,
    failures: 0,
    discarded: 1,
    noRoute: true,
    lastFailure: null,
  });
});
