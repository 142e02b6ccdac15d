import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Proxier } from './proxier.js';
import type { ConntrackHook } from './proxier.js';
import type { DriftReport, ProxierObserver, RepairReport, SyncReport } from './observer.js';
import type { Dataplane, Drift, IPFamily, SyncOutcome, SyncState } from '../core/types.js';
import { hasCode } from '../core/errors.js';
import type { ConntrackFlow } from '../core/conntrack.js';
import { FakeClock } from '../../test/support/fakeclock.js';
import { canaryTarget, CANARY_SERVICE_KEY, CANARY_VIP4, type CanaryTarget } from '../core/canary.js';
import {
  TEST_NODE,
  endpoint,
  makeNode,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
} from '../../test/support/fixtures.js';

/** Records every SyncState; fails the next `failNext` syncs. */
class RecordingDataplane implements Dataplane {
  readonly mode = 'nftables' as const;
  states: SyncState[] = [];
  failNext = 0;
  /** What skipsPeriodicFullSync answers (iptables large-cluster mode). */
  skipPeriodic = false;
  /** watchDrift()'s listener: a test reports drift through it. */
  onDrift: ((d: Drift) => void) | null = null;
  /** Called inside the next sync (a report that arrives while the datapath works). */
  duringSync: (() => void) | null = null;
  constructor(readonly family: IPFamily) {}
  skipsPeriodicFullSync(): boolean {
    return this.skipPeriodic;
  }
  watchDrift(onDrift: (d: Drift) => void): void {
    this.onDrift = onDrift;
  }
  async sync(state: SyncState): Promise<SyncOutcome> {
    const during = this.duringSync;
    this.duringSync = null;
    during?.();
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error('boom');
    }
    this.states.push(state);
    return { partial: !state.fullSync, counters: { services: state.services.size } };
  }
  async cleanup(): Promise<void> {}
  get last(): SyncState {
    return this.states[this.states.length - 1]!;
  }
}

class RecordingObserver implements ProxierObserver {
  queued: Array<[IPFamily, number]> = [];
  succeeded: SyncReport[] = [];
  failed: Array<[IPFamily, unknown]> = [];
  pending: Array<[string, number]> = [];
  recorded: string[] = [];
  latency: Array<[IPFamily, number]> = [];
  skipped: Array<[string, string, string]> = [];
  events: string[] = [];
  drifts: DriftReport[] = [];
  repairs: RepairReport[] = [];
  driftDetected(d: DriftReport) {
    this.drifts.push(d);
  }
  datapathRepaired(r: RepairReport) {
    this.repairs.push(r);
  }
  queuedUpdate(f: IPFamily, at: number) {
    this.queued.push([f, at]);
  }
  syncSucceeded(r: SyncReport) {
    this.succeeded.push(r);
  }
  syncFailed(f: IPFamily, e: unknown) {
    this.failed.push([f, e]);
  }
  pendingChanges(k: string, n: number) {
    this.pending.push([k, n]);
  }
  changeRecorded(k: string) {
    this.recorded.push(k);
  }
  networkProgrammingLatency(f: IPFamily, s: number) {
    this.latency.push([f, s]);
  }
  inputSkipped(kind: string, key: string, reason: string) {
    this.skipped.push([kind, key, reason]);
  }
  event(_l: string, _f: Record<string, unknown>, msg: string) {
    this.events.push(msg);
  }
}

function setup(
  families: IPFamily[] = ['IPv4'],
  extra: {
    conntrack?: ConntrackHook;
    allowServiceExternalIPs?: boolean;
    canary?: (family: IPFamily) => CanaryTarget | null;
  } = {},
) {
  const clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
  const observer = new RecordingObserver();
  const dps = families.map((f) => new RecordingDataplane(f));
  let requests = 0;
  const proxier = new Proxier({
    nodeName: TEST_NODE,
    dataplanes: dps,
    clock,
    observer,
    requestSync: () => {
      requests++;
    },
    ...extra,
  });
  return { clock, observer, dps, dp: dps[0]!, proxier, requests: () => requests };
}

const svc = (name = 'svc1', ip = '172.30.0.41', mut?: Parameters<typeof makeService>[2]) =>
  makeService('ns1', name, (s) => {
    withClusterIP(s, ip);
    s.spec.ports = [svcPort('p80', 80)];
    mut?.(s);
  });
const slice = (name = 'svc1', ips = ['10.180.0.1'], nodeName = TEST_NODE, port = slicePort('p80', 80)) =>
  makeSlice('ns1', name, 1, (s) => {
    s.ports = [port];
    s.endpoints = ips.map((ip) => endpoint(ip, { nodeName }));
  });

async function initialized(families: IPFamily[] = ['IPv4'], extra: { conntrack?: ConntrackHook } = {}) {
  const t = setup(families, extra);
  t.proxier.onServiceAdd(svc());
  t.proxier.onEndpointSliceAdd(slice());
  t.proxier.onServiceSynced();
  t.proxier.onEndpointSliceSynced();
  await t.proxier.syncProxyRules();
  return t;
}

test('nothing is synced or requested until Services and EndpointSlices are both synced', async () => {
  const t = setup();
  t.proxier.onServiceAdd(svc());
  t.proxier.onEndpointSliceAdd(slice());
  t.proxier.onServiceSynced();
  assert.equal(t.requests(), 0);
  assert.equal(t.observer.queued.length, 2, 'queuedUpdate is published for every recorded change');
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.states.length, 0);
  assert.equal(t.proxier.isInitialized(), false);
  t.proxier.onEndpointSliceSynced();
  assert.equal(t.requests(), 1);
  assert.equal(t.observer.queued.length, 3);
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.states.length, 1);
  const st = t.dp.last;
  assert.equal(st.fullSync, true);
  assert.deepEqual([...st.services.keys()], ['ns1/svc1:p80']);
  assert.deepEqual(
    st.endpoints.get('ns1/svc1:p80')!.map((e) => e.key),
    ['10.180.0.1:80'],
  );
  assert.deepEqual(
    st.categorized.get('ns1/svc1:p80')!.clusterEndpoints!.map((e) => e.key),
    ['10.180.0.1:80'],
  );
  assert.equal(t.observer.succeeded.length, 1);
  assert.equal(t.observer.succeeded[0]!.partial, false);
});

test('a later change is a partial sync naming only the changed service', async () => {
  const t = await initialized();
  t.proxier.onServiceAdd(svc('svc2', '172.30.0.42'));
  assert.equal(t.requests(), 2);
  assert.deepEqual(t.observer.queued.at(-1), ['IPv4', t.clock.now()]);
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.last.fullSync, false);
  assert.deepEqual([...t.dp.last.changedServices], ['ns1/svc2']);
  assert.equal(t.dp.last.services.size, 2, 'the snapshot still holds every service');
  assert.equal(t.observer.succeeded.at(-1)!.partial, true);
  t.proxier.onEndpointSliceUpdate(slice(), slice('svc1', ['10.180.0.1', '10.180.0.2']));
  await t.proxier.syncProxyRules();
  assert.deepEqual([...t.dp.last.changedServices], ['ns1/svc1']);
  assert.equal(t.dp.last.endpoints.get('ns1/svc1:p80')!.length, 2);
});

test('an unchanged update records nothing and requests no sync', async () => {
  const t = await initialized();
  const before = t.requests();
  t.proxier.onEndpointSliceUpdate(slice(), slice());
  assert.equal(t.requests(), before);
});

test('a failed sync rejects, keeps the changes, and makes the next sync full', async () => {
  const t = await initialized();
  t.proxier.onServiceAdd(svc('svc2', '172.30.0.42'));
  t.dp.failNext = 1;
  await assert.rejects(t.proxier.syncProxyRules(), (e: unknown) => hasCode(e, 'KPT_SYNC_FAILED'));
  assert.equal(t.observer.failed.length, 1);
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.last.fullSync, true);
  assert.ok(t.dp.last.changedServices.has('ns1/svc2'), 'changes of the failed sync are carried over');
  assert.ok(t.dp.last.services.has('ns1/svc2:p80'));
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.last.fullSync, false, 'back to partial after a success');
});

test('dual-stack: one family failing does not stop the other; only it goes full', async () => {
  const t = await initialized(['IPv4', 'IPv6']);
  const [v4, v6] = t.dps as [RecordingDataplane, RecordingDataplane];
  assert.equal(v6.last.services.size, 0, 'an IPv4-only service is not in the IPv6 state');
  t.proxier.onServiceAdd(
    svc('ds', '172.30.0.43', (s) => {
      s.spec.clusterIPs = ['172.30.0.43', 'fd00::43'];
      s.spec.ipFamilies = ['IPv4', 'IPv6'];
    }),
  );
  v6.failNext = 1;
  await assert.rejects(t.proxier.syncProxyRules());
  assert.equal(v4.last.fullSync, false);
  assert.ok(v4.last.services.has('ns1/ds:p80'));
  await t.proxier.syncProxyRules();
  assert.equal(v6.last.fullSync, true);
  assert.equal(v6.last.services.get('ns1/ds:p80')!.clusterIP, 'fd00::43');
  assert.equal(v4.last.fullSync, false);
});

test('a topology label change forces a full sync; other label changes do not', async () => {
  const t = await initialized();
  t.proxier.onNodeAdd(makeNode(TEST_NODE, { zone: 'zone-a' }));
  const r = t.requests();
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.last.fullSync, true);
  assert.equal(t.dp.last.node.labels['topology.kubernetes.io/zone'], 'zone-a');
  assert.ok(r >= 2);
  t.proxier.onNodeUpdate(
    makeNode(TEST_NODE, { zone: 'zone-a' }),
    makeNode(TEST_NODE, { zone: 'zone-a', labels: { team: 'x' } }),
  );
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.last.fullSync, false);
  t.proxier.onNodeUpdate(makeNode(TEST_NODE), makeNode(TEST_NODE, { zone: 'zone-b' }));
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.last.fullSync, true);
});

test('other nodes are ignored', async () => {
  const t = await initialized();
  const r = t.requests();
  t.proxier.onNodeAdd(makeNode('other-node', { zone: 'zone-x' }));
  assert.equal(t.requests(), r);
  assert.deepEqual(t.proxier.nodeInfo().labels, {});
});

test('the full sync is repeated hourly by the clock', async () => {
  const t = await initialized();
  t.clock.advance(59 * 60 * 1000);
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.last.fullSync, false);
  t.clock.advance(60 * 1000);
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.last.fullSync, true);
  t.clock.advance(1000);
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.last.fullSync, false);
});

test('a dataplane in large-cluster mode skips the hourly full sync, never a needed one (upstream PR #138571)', async () => {
  const t = await initialized();
  t.dp.skipPeriodic = true;
  t.clock.advance(2 * 60 * 60 * 1000);
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.last.fullSync, false, 'two hours on, still partial');
  // A failure makes the next sync full whatever the mode says.
  t.dp.failNext = 1;
  await t.proxier.syncProxyRules().catch(() => {});
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.last.fullSync, true, 'a needed full sync is never skipped');
  // Back under the threshold: the overdue periodic full sync happens at once.
  t.dp.skipPeriodic = false;
  t.clock.advance(60 * 60 * 1000);
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.last.fullSync, true);
});

test('noLocalEndpoints follows TestNoEndpointsMetric', async () => {
  const t = setup();
  t.proxier.onServiceAdd(
    svc('itp', '172.30.0.50', (s) => {
      s.spec.internalTrafficPolicy = 'Local';
    }),
  );
  t.proxier.onServiceAdd(
    svc('etp', '172.30.0.51', (s) => {
      s.spec.type = 'NodePort';
      s.spec.externalTrafficPolicy = 'Local';
      s.spec.ports = [svcPort('p80', 80, 'TCP', { nodePort: 30080 })];
    }),
  );
  t.proxier.onServiceAdd(
    svc('empty', '172.30.0.52', (s) => {
      s.spec.internalTrafficPolicy = 'Local';
    }),
  );
  t.proxier.onEndpointSliceAdd(slice('itp', ['10.180.1.1'], 'host-1'));
  t.proxier.onEndpointSliceAdd(slice('etp', ['10.180.1.2'], 'host-1'));
  t.proxier.onServiceSynced();
  t.proxier.onEndpointSliceSynced();
  await t.proxier.syncProxyRules();
  assert.deepEqual(t.observer.succeeded.at(-1)!.noLocalEndpoints, { internal: 1, external: 1 });
  t.proxier.onEndpointSliceUpdate(slice('itp', ['10.180.1.1'], 'host-1'), slice('itp', ['10.180.1.1', '10.180.0.1']));
  await t.proxier.syncProxyRules();
  assert.deepEqual(t.observer.succeeded.at(-1)!.noLocalEndpoints, { internal: 0, external: 1 });
});

test('network programming latency is measured from the slice trigger time after a successful sync', async () => {
  const t = await initialized();
  const s = slice('svc1', ['10.180.0.7']);
  s.metadata.annotations = {
    'endpoints.kubernetes.io/last-change-trigger-time': new Date(t.clock.now() + 1000).toISOString(),
  };
  t.clock.advance(3000);
  t.proxier.onEndpointSliceUpdate(slice(), s);
  t.dp.failNext = 1;
  await assert.rejects(t.proxier.syncProxyRules());
  assert.equal(t.observer.latency.length, 0, 'nothing measured on failure');
  t.clock.advance(2000);
  await t.proxier.syncProxyRules();
  assert.deepEqual(t.observer.latency, [['IPv4', 4]]);
});

test('malformed input is skipped and reported; healthy services still sync', async () => {
  const t = setup();
  const bad: unknown[] = [
    null,
    {},
    { metadata: { namespace: 'ns1' } },
    { metadata: { namespace: 'ns1', name: 'x' }, spec: { clusterIP: '1.2.3', ports: [{ port: 80 }] } },
    svc('badport', '172.30.0.60', (s) => {
      s.spec.ports = [{ name: 'a', port: 0 }, { name: 'b', port: -5 }, svcPort('c', 80)];
    }),
  ];
  for (const b of bad) assert.doesNotThrow(() => t.proxier.onServiceAdd(b as never));
  assert.doesNotThrow(() => t.proxier.onServiceUpdate(null as never, undefined as never));
  assert.doesNotThrow(() => t.proxier.onServiceDelete({ metadata: 5 } as never));
  for (const b of [
    null,
    {},
    { metadata: { namespace: 'ns1', name: 's' } },
    makeSlice('ns1', 'svc1', 9, (s) => {
      s.endpoints = [{ addresses: ['999.1.1.1'] }];
      s.ports = [{ name: 'p80', port: 'x' as never }];
    }),
  ]) {
    assert.doesNotThrow(() => t.proxier.onEndpointSliceAdd(b as never));
  }
  assert.doesNotThrow(() =>
    t.proxier.onNodeAdd({
      metadata: { name: TEST_NODE },
      status: { addresses: [{ type: 'InternalIP', address: 'bogus' }] },
    } as never),
  );
  assert.doesNotThrow(() => t.proxier.onNodeAdd(null as never));
  assert.doesNotThrow(() =>
    t.proxier.onServiceCIDRsChanged([null, { metadata: {}, spec: { cidrs: ['x', 5, '172.30.0.0/16'] } }] as never),
  );
  t.proxier.onServiceAdd(svc());
  t.proxier.onEndpointSliceAdd(slice());
  t.proxier.onServiceSynced();
  t.proxier.onEndpointSliceSynced();
  await t.proxier.syncProxyRules();
  assert.deepEqual([...t.dp.last.services.keys()], ['ns1/badport:c', 'ns1/svc1:p80']);
  assert.deepEqual(
    t.dp.last.endpoints.get('ns1/svc1:p80')!.map((e) => e.key),
    ['10.180.0.1:80'],
  );
  assert.deepEqual(t.dp.last.serviceCIDRs, ['172.30.0.0/16']);
  const kinds = new Set(t.observer.skipped.map((s) => s[0]));
  assert.deepEqual([...kinds].sort(), ['endpointslice', 'node', 'service']);
  assert.ok(t.observer.skipped.length >= 10, String(t.observer.skipped.length));
});

test('node eligibility: deleted, being deleted, or tainted for deletion', () => {
  const t = setup();
  assert.equal(t.proxier.nodeEligible(), false, 'unknown until the Node is seen');
  t.proxier.onNodeAdd(makeNode('other-node'));
  assert.equal(t.proxier.nodeEligible(), false);
  t.proxier.onNodeAdd(makeNode(TEST_NODE));
  assert.equal(t.proxier.nodeEligible(), true);
  const tainted = makeNode(TEST_NODE);
  tainted.spec!.taints = [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }];
  t.proxier.onNodeUpdate(makeNode(TEST_NODE), tainted);
  assert.equal(t.proxier.nodeEligible(), false);
  t.proxier.onNodeUpdate(tainted, makeNode(TEST_NODE));
  assert.equal(t.proxier.nodeEligible(), true);
  const deleting = makeNode(TEST_NODE);
  deleting.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
  t.proxier.onNodeUpdate(makeNode(TEST_NODE), deleting);
  assert.equal(t.proxier.nodeEligible(), false);
  t.proxier.onNodeUpdate(deleting, makeNode(TEST_NODE));
  t.proxier.onNodeDelete(makeNode(TEST_NODE));
  assert.equal(t.proxier.nodeEligible(), false);
});

test('node IPs and podCIDRs come from the Node; the override wins', () => {
  const clock = new FakeClock();
  const p = new Proxier({
    nodeName: TEST_NODE,
    dataplanes: [new RecordingDataplane('IPv4')],
    clock,
    observer: new RecordingObserver(),
    requestSync: () => {},
    nodeIPOverride: { IPv4: '192.168.0.9' },
  });
  p.onNodeAdd(
    makeNode(TEST_NODE, { internalIPs: ['192.168.0.2', 'fd00::2'], podCIDRs: ['10.0.0.0/24', 'fd00:10::/64'] }),
  );
  assert.deepEqual(p.nodeInfo().nodeIPs, { IPv4: '192.168.0.9', IPv6: 'fd00::2' });
  assert.deepEqual(p.podCIDRs(), ['10.0.0.0/24', 'fd00:10::/64']);
});

test('health helpers: healthCheckNodePorts and localReadyEndpoints from the last good state', async () => {
  const t = setup();
  t.proxier.onServiceAdd(
    svc('lb', '172.30.0.70', (s) => {
      s.spec.type = 'LoadBalancer';
      s.spec.externalTrafficPolicy = 'Local';
      s.spec.healthCheckNodePort = 30000;
      s.spec.ports = [svcPort('a', 80, 'TCP', { nodePort: 30001 }), svcPort('b', 81, 'TCP', { nodePort: 30002 })];
    }),
  );
  t.proxier.onEndpointSliceAdd(
    makeSlice('ns1', 'lb', 1, (s) => {
      s.ports = [slicePort('a', 80), slicePort('b', 81)];
      s.endpoints = [
        endpoint('10.180.0.1', { nodeName: TEST_NODE }),
        endpoint('10.180.0.2', { nodeName: TEST_NODE, ready: false, serving: true, terminating: true }),
        endpoint('10.180.1.1', { nodeName: 'host-1' }),
      ];
    }),
  );
  // A Service without a healthCheckNodePort has no health server to weigh it: it is not counted.
  t.proxier.onServiceAdd(svc('plain', '172.30.0.71'));
  t.proxier.onEndpointSliceAdd(slice('plain', ['10.180.0.9']));
  t.proxier.onServiceSynced();
  t.proxier.onEndpointSliceSynced();
  await t.proxier.syncProxyRules();
  assert.deepEqual([...t.proxier.healthCheckNodePorts()], [['ns1/lb', 30000]]);
  assert.deepEqual([...t.proxier.localReadyEndpoints()], [['ns1/lb', 1]]);
  assert.equal(t.proxier.lastSyncState('IPv4'), t.dp.last);
  assert.equal(t.proxier.lastSyncState('IPv6'), null);
});

test('UDP endpoint changes run the conntrack hook with the stale-flow predicate', async () => {
  const calls: Array<{ family: IPFamily; pred: (f: ConntrackFlow) => boolean }> = [];
  const conntrack: ConntrackHook = {
    async listAndDelete(family, pred) {
      calls.push({ family, pred });
      return 1;
    },
  };
  const t = await initialized(['IPv4'], { conntrack });
  assert.equal(calls.length, 0, 'TCP only so far');
  t.proxier.onServiceAdd(
    svc('dns', '172.30.0.10', (s) => {
      s.spec.ports = [svcPort('dns', 53, 'UDP')];
    }),
  );
  t.proxier.onEndpointSliceAdd(slice('dns', ['10.180.0.5'], TEST_NODE, slicePort('dns', 53, 'UDP')));
  await t.proxier.syncProxyRules();
  assert.equal(calls.length, 1);
  const pred = calls[0]!.pred;
  assert.equal(
    pred({ proto: 'UDP', origDst: '172.30.0.10', origDstPort: 53, replySrc: '10.180.0.9', replySrcPort: 53 }),
    true,
  );
  assert.equal(
    pred({ proto: 'UDP', origDst: '172.30.0.10', origDstPort: 53, replySrc: '10.180.0.5', replySrcPort: 53 }),
    false,
  );
  await t.proxier.syncProxyRules();
  assert.equal(calls.length, 1, 'no UDP change, no cleanup');
});

test('a UDP Service dropping to zero endpoints, then deleted, runs the hook each time', async () => {
  const calls: Array<(f: ConntrackFlow) => boolean> = [];
  const conntrack: ConntrackHook = {
    async listAndDelete(_family, pred) {
      calls.push(pred);
      return 0;
    },
  };
  const t = await initialized(['IPv4'], { conntrack });
  const dns = svc('dns', '172.30.0.10', (s) => {
    s.spec.ports = [svcPort('dns', 53, 'UDP')];
  });
  const sl = slice('dns', ['10.180.0.5'], TEST_NODE, slicePort('dns', 53, 'UDP'));
  t.proxier.onServiceAdd(dns);
  t.proxier.onEndpointSliceAdd(sl);
  await t.proxier.syncProxyRules();
  const toOld = { proto: 'UDP', origDst: '172.30.0.10', origDstPort: 53, replySrc: '10.180.0.5', replySrcPort: 53 };
  assert.equal(calls.at(-1)!(toOld), false, 'the serving endpoint is kept');
  const empty = slice('dns', [], TEST_NODE, slicePort('dns', 53, 'UDP'));
  t.proxier.onEndpointSliceUpdate(sl, empty);
  await t.proxier.syncProxyRules();
  assert.equal(calls.length, 2);
  assert.equal(calls.at(-1)!(toOld), true, 'zero endpoints: the old endpoint is stale');
  t.proxier.onEndpointSliceUpdate(empty, sl);
  await t.proxier.syncProxyRules();
  t.proxier.onServiceDelete(dns);
  await t.proxier.syncProxyRules();
  assert.equal(calls.length, 4, 'a deleted UDP Service triggers a cleanup by itself');
  assert.equal(calls.at(-1)!(toOld), true, 'deleted Service: its frontend is stale');
  await t.proxier.syncProxyRules();
  assert.equal(calls.length, 4, 'and only once');
});

for (const allow of [true, false]) {
  test(`AllowServiceExternalIPs=${allow}: every family's SyncState ${allow ? 'has' : 'has no'} externalIPs`, async () => {
    const t = setup(['IPv4', 'IPv6'], { allowServiceExternalIPs: allow });
    t.proxier.onServiceAdd(
      svc('ext', '172.30.0.50', (s) => {
        s.spec.ipFamilies = ['IPv4', 'IPv6'];
        s.spec.clusterIPs = ['172.30.0.50', 'fd00:30::50'];
        s.spec.externalIPs = ['192.168.99.1', 'fd00:99::1'];
      }),
    );
    t.proxier.onServiceSynced();
    t.proxier.onEndpointSliceSynced();
    await t.proxier.syncProxyRules();
    for (const dp of t.dps) {
      const sps = [...dp.last!.services.values()];
      assert.equal(sps.length, 1, dp.family);
      assert.deepEqual(sps[0]!.externalIPs, allow ? [dp.family === 'IPv4' ? '192.168.99.1' : 'fd00:99::1'] : []);
    }
  });
}

test('a failing conntrack hook is logged, not a sync failure', async () => {
  const conntrack: ConntrackHook = {
    async listAndDelete() {
      throw new Error('no conntrack');
    },
  };
  const t = await initialized(['IPv4'], { conntrack });
  t.proxier.onServiceAdd(
    svc('dns', '172.30.0.10', (s) => {
      s.spec.ports = [svcPort('dns', 53, 'UDP')];
    }),
  );
  t.proxier.onEndpointSliceAdd(slice('dns', ['10.180.0.5'], TEST_NODE, slicePort('dns', 53, 'UDP')));
  await t.proxier.syncProxyRules();
  assert.ok(t.observer.events.includes('conntrack cleanup failed'));
  assert.equal(t.observer.failed.length, 0);
});

test('pending change counts are published and drop to zero after a sync', async () => {
  const t = await initialized();
  t.proxier.onServiceAdd(svc('svc2', '172.30.0.42'));
  assert.deepEqual(t.observer.pending.filter((p) => p[0] === 'service').at(-1), ['service', 1]);
  await t.proxier.syncProxyRules();
  assert.deepEqual(t.observer.pending.filter((p) => p[0] === 'service').at(-1), ['service', 0]);
  assert.ok(t.observer.recorded.includes('service'));
  assert.ok(t.observer.recorded.includes('endpoint'));
});

test('ServiceCIDR changes reach the state and request a sync', async () => {
  const t = await initialized(['IPv4', 'IPv6']);
  const r = t.requests();
  t.proxier.onServiceCIDRsChanged([
    { metadata: { name: 'kubernetes' }, spec: { cidrs: ['172.30.0.0/16', 'fd00:172:30::/108'] } },
  ]);
  assert.equal(t.requests(), r + 1);
  await t.proxier.syncProxyRules();
  assert.deepEqual(t.dps[0]!.last.serviceCIDRs, ['172.30.0.0/16']);
  assert.equal(t.dps[0]!.last.fullSync, true);
  assert.deepEqual(t.dps[1]!.last.serviceCIDRs, ['fd00:172:30::/108']);
  t.proxier.onServiceCIDRsChanged([
    { metadata: { name: 'kubernetes' }, spec: { cidrs: ['fd00:172:30::/108', '172.30.0.0/16'] } },
  ]);
  assert.equal(t.requests(), r + 1, 'same set in another order is no change');
});

test('sync() queues every family once initialized; duplicate families are a bug', async () => {
  const t = setup(['IPv4', 'IPv6']);
  t.proxier.sync();
  assert.equal(t.requests(), 0, 'no sync request before initialization');
  t.proxier.onServiceSynced();
  t.proxier.onEndpointSliceSynced();
  const r = t.requests();
  const q = t.observer.queued.length;
  t.proxier.sync();
  assert.equal(t.requests(), r + 1);
  assert.deepEqual(
    t.observer.queued.slice(q).map((x) => x[0]),
    ['IPv4', 'IPv6'],
  );
  const clock = new FakeClock();
  assert.throws(
    () =>
      new Proxier({
        nodeName: TEST_NODE,
        dataplanes: [new RecordingDataplane('IPv4'), new RecordingDataplane('IPv4')],
        clock,
        observer: new RecordingObserver(),
        requestSync: () => {},
      }),
    (e: unknown) => hasCode(e, 'KPT_BUG'),
  );
});

test('dual-stack: bad input is reported once, also when only the IPv6 family looks at it', () => {
  const t = setup(['IPv4', 'IPv6']);
  t.proxier.onServiceAdd(
    svc('both', '172.30.0.80', (s) => {
      s.spec.clusterIPs = ['172.30.0.80', 'fd00::80'];
      s.spec.externalIPs = ['bogus'];
    }),
  );
  assert.deepEqual(t.observer.skipped, [['service', 'ns1/both', 'invalid externalIP "bogus"']]);
  t.observer.skipped.length = 0;
  t.proxier.onServiceAdd(
    svc('v6only', 'fd00::81', (s) => {
      s.spec.externalIPs = ['bogus'];
    }),
  );
  assert.deepEqual(t.observer.skipped, [['service', 'ns1/v6only', 'invalid externalIP "bogus"']]);
  t.observer.skipped.length = 0;
  t.proxier.onEndpointSliceAdd(
    makeSlice('ns1', 'v6only', 1, (s) => {
      s.addressType = 'IPv6';
      s.endpoints = [{ addresses: ['fd00::zz'] }];
      s.ports = [slicePort('p80', 80)];
    }),
  );
  assert.equal(t.observer.skipped.length, 1);
  assert.equal(t.observer.skipped[0]![0], 'endpointslice');
  t.observer.skipped.length = 0;
  t.proxier.onEndpointSliceAdd(null as never);
  assert.equal(t.observer.skipped.length, 1);
});

test('a slice relabelled to another Service leaves the old one', async () => {
  const t = await initialized();
  t.proxier.onServiceAdd(svc('svc2', '172.30.0.42'));
  const moved = slice();
  moved.metadata.labels = { 'kubernetes.io/service-name': 'svc2' };
  t.proxier.onEndpointSliceUpdate(slice(), moved);
  await t.proxier.syncProxyRules();
  assert.deepEqual(t.dp.last.endpoints.get('ns1/svc1:p80'), []);
  assert.deepEqual(
    t.dp.last.endpoints.get('ns1/svc2:p80')!.map((e) => e.key),
    ['10.180.0.1:80'],
  );
  assert.deepEqual([...t.dp.last.changedServices].sort(), ['ns1/svc1', 'ns1/svc2']);
  assert.doesNotThrow(() => t.proxier.onEndpointSliceUpdate(null as never, null as never));
});

test('a relist that reports Synced again with no change requests no sync', async () => {
  const t = await initialized();
  const before = t.requests();
  t.proxier.onServiceSynced();
  t.proxier.onEndpointSliceSynced();
  assert.equal(t.requests(), before, 'Synced after the first time is not a change');
  t.proxier.onEndpointSliceUpdate(slice(), slice('svc1', ['10.180.0.9']));
  assert.equal(t.requests(), before + 1, 'the relist diff requests its sync');
});

test('drift reported by a datapath: the next sync is full, and its success is reported once as the repair', async () => {
  const t = await initialized(['IPv4', 'IPv6']);
  const [v4, v6] = t.dps;
  const requests = t.requests();
  v6!.onDrift!({ reason: 'rules_changed', detail: 'delete rule KUBE-SERVICES' });
  assert.deepEqual(t.observer.drifts, [
    { family: 'IPv6', mode: 'nftables', reason: 'rules_changed', detail: 'delete rule KUBE-SERVICES' },
  ]);
  assert.equal(t.requests(), requests + 1, 'a sync is requested at once');
  t.clock.advance(300);
  v6!.onDrift!({ reason: 'changes_unaccounted', detail: 'a second report before the sync' });
  t.clock.advance(200);
  v6!.failNext = 1;
  await assert.rejects(t.proxier.syncProxyRules());
  assert.equal(t.observer.repairs.length, 0, 'a failed sync repaired nothing');
  t.clock.advance(500);
  await t.proxier.syncProxyRules();
  assert.equal(v6!.last.fullSync, true);
  assert.equal(v4!.last.fullSync, false, 'the other family is not disturbed');
  assert.equal(t.observer.repairs.length, 1);
  const r = t.observer.repairs[0]!;
  assert.equal(r.family, 'IPv6');
  assert.equal(r.reason, 'rules_changed', 'timed and named from the first report');
  assert.equal(r.seconds, 1);
  await t.proxier.syncProxyRules();
  assert.equal(v6!.last.fullSync, false, 'back to partial syncs');
  assert.equal(t.observer.repairs.length, 1);
});

test('drift reported while a sync runs is repaired by the next one, not by that sync', async () => {
  const t = await initialized();
  t.dp.onDrift!({ reason: 'rules_changed', detail: 'first' });
  t.dp.duringSync = () => t.dp.onDrift!({ reason: 'rules_changed', detail: 'during' });
  await t.proxier.syncProxyRules();
  assert.equal(t.observer.repairs.length, 0, 'the datapath may have read the kernel before the second change');
  await t.proxier.syncProxyRules();
  assert.equal(t.dp.last.fullSync, true);
  assert.equal(t.observer.repairs.length, 1);
  assert.equal(t.observer.repairs[0]!.detail, 'first');
});

test('the canary joins every sync of its family like a service port, and is changed only when it is new', async () => {
  let canary = canaryTarget('IPv4', TEST_NODE, '192.168.77.12', 40001);
  const t = setup(['IPv4', 'IPv6'], { canary: (f) => (f === 'IPv4' ? canary : null) });
  t.proxier.onServiceAdd(svc());
  t.proxier.onEndpointSliceAdd(slice());
  t.proxier.onServiceSynced();
  t.proxier.onEndpointSliceSynced();
  assert.equal(t.proxier.syncEpoch(), 0);
  await t.proxier.syncProxyRules();
  assert.equal(t.proxier.syncEpoch(), 2, 'one sync: started and ended');
  const [v4, v6] = t.dps;
  const key = canary.servicePort.key;
  assert.equal(v4!.last.services.get(key)!.clusterIP, CANARY_VIP4);
  assert.deepEqual(
    v4!.last.categorized.get(key)!.clusterEndpoints!.map((e) => e.key),
    ['192.168.77.12:40001'],
  );
  assert.equal(v6!.last.services.has(key), false);
  t.proxier.onServiceAdd(svc('svc2', '172.30.0.42'));
  await t.proxier.syncProxyRules();
  assert.equal(v4!.last.fullSync, false);
  assert.ok(v4!.last.services.has(key), 'a partial sync still carries it');
  assert.deepEqual([...v4!.last.changedServices], ['ns1/svc2'], 'an unchanged canary is not rewritten');
  canary = canaryTarget('IPv4', TEST_NODE, '192.168.77.12', 40002);
  t.proxier.sync();
  await t.proxier.syncProxyRules();
  assert.deepEqual([...v4!.last.changedServices], [CANARY_SERVICE_KEY], 'a new listener port is written');
  assert.equal(v4!.last.endpoints.get(key)![0]!.port, 40002);
});
