// IptablesDataplane against Fake (through fakerunner.ts): sync order,
// partial syncs, canary detection, failure -> full, cleanup ownership.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { Steps } from '../../core/steps.js';
import type { DataplaneConfig, Drift, SyncState } from '../../core/types.js';
import { FakeClock } from '../../../test/support/fakeclock.js';
import { service, slice } from '../../../test/cases/fixtures.js';
import { IptablesDataplane } from './dataplane.js';
import type { DriftWatch } from './driftwatch.js';
import { fakeRunner, type FakeRunner } from './fakerunner.js';
import { runnerSysctl } from './sysctl.js';

const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8'] },
  nodePortAddresses: null,
  localhostNodePorts: false,
  localIPs: ['127.0.0.1', '192.168.0.2'],
};

function state(opts: { svcs: number; full?: boolean; changed?: string[]; epOffset?: number }): SyncState {
  const services = [];
  const slices = [];
  for (let i = 0; i < opts.svcs; i++) {
    // 172.30.0.1, 10.180.0.1 for s0; from the 251st on, in the next /24s.
    const [hi, lo] = [Math.floor(i / 250), i % 250];
    services.push(service(`s${i}`, { clusterIP: `172.30.${hi}.${lo + 1}` }, [{ name: 'p80', port: 80 }]));
    slices.push(
      slice(
        `s${i}`,
        [{ name: 'p80', port: 80 }],
        [{ ip: `10.${180 + hi}.${lo}.${1 + (i === 0 ? (opts.epOffset ?? 0) : 0)}` }],
      ),
    );
  }
  return syncStateFromObjects({
    services,
    slices,
    family: 'IPv4',
    nodeIPs: { IPv4: '192.168.0.2' },
    fullSync: opts.full ?? true,
    ...(opts.changed ? { changedServices: opts.changed } : {}),
  });
}

function setup(
  config: DataplaneConfig = CONFIG,
  wholeTableCache: 'auto' | 'always' | 'never' = 'auto',
): { dp: IptablesDataplane; f: FakeRunner } {
  const f = fakeRunner();
  const dp = new IptablesDataplane({
    config,
    run: f.run,
    sysctl: runnerSysctl(f.run),
    clock: new FakeClock(),
    syncPeriodMs: 30_000,
    wholeTableCache,
  });
  return { dp, f };
}

test('full sync: canaries in mangle/nat/filter, rules restored, jump rules inserted once', async () => {
  const { dp, f } = setup();
  const out = await dp.sync(state({ svcs: 2 }));
  assert.equal(out.partial, false);
  for (const t of ['mangle', 'nat', 'filter'] as const) assert.ok(f.ipt.hasChain(t, 'KUBE-PROXY-CANARY'), t);
  assert.deepEqual(f.ipt.rules('nat', 'PREROUTING'), [
    '-m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  ]);
  assert.equal(f.ipt.rules('filter', 'INPUT').length, 3);
  assert.ok(f.ipt.rules('nat', 'KUBE-SERVICES').some((r) => r.includes('-d 172.30.0.2')));
  // A second full sync must not duplicate the jumps.
  await dp.sync(state({ svcs: 2 }));
  assert.equal(f.ipt.rules('filter', 'INPUT').length, 3);
  assert.equal(f.ipt.rules('nat', 'OUTPUT').length, 1);
  assert.ok(
    f.log.every((l) => !l.startsWith('iptables ') || l.startsWith('iptables -w 5 ') || l === 'iptables --version'),
  );
});

test('partial sync writes only the changed service chains and skips jump/canary setup', async () => {
  const { dp, f } = setup();
  await dp.sync(state({ svcs: 3 }));
  const before = f.log.length;
  const out = await dp.sync(state({ svcs: 3, full: false, changed: ['ns1/s0'], epOffset: 5 }));
  assert.equal(out.partial, true);
  const input = f.restoreInputs.at(-1)!;
  assert.match(input, /--to-destination 10\.180\.0\.6:80/);
  assert.doesNotMatch(input, /--to-destination 10\.180\.1\.1:80/);
  const cmds = f.log.slice(before);
  assert.ok(!cmds.some((l) => / -I /.test(l) || / -N /.test(l)), cmds.join('\n'));
  // The old endpoint chain of s0 is stale and deleted; s1's survives untouched.
  const save = f.ipt.save('nat');
  assert.doesNotMatch(save, /10\.180\.0\.1:80/);
  assert.match(save, /10\.180\.1\.1:80/);
});

test('a missing canary turns the next sync into a full one', async () => {
  const { dp, f } = setup();
  await dp.sync(state({ svcs: 2 }));
  f.ipt.deleteChain('mangle', 'KUBE-PROXY-CANARY');
  const out = await dp.sync(state({ svcs: 2, full: false, changed: [] }));
  assert.equal(out.partial, false);
  assert.equal(out.counters?.canaryMissing, 1);
  assert.ok(f.ipt.hasChain('mangle', 'KUBE-PROXY-CANARY'));
});

test('a failed restore rejects with KPT_SYNC_FAILED and makes the next sync full', async () => {
  const { dp, f } = setup();
  await dp.sync(state({ svcs: 2 }));
  f.failNextRestore();
  await assert.rejects(
    dp.sync(state({ svcs: 2, full: false, changed: ['ns1/s0'] })),
    (e: unknown) => (e as { code?: string }).code === 'KPT_SYNC_FAILED',
  );
  const out = await dp.sync(state({ svcs: 2, full: false, changed: [] }));
  assert.equal(out.partial, false);
});

test('localhost NodePorts set route_localnet=1 and add the KUBE-FIREWALL jumps', async () => {
  const { dp, f } = setup({ ...CONFIG, localhostNodePorts: true });
  await dp.sync(state({ svcs: 1 }));
  assert.equal(f.sysctls.get('net.ipv4.conf.all.route_localnet'), '1');
  assert.ok(f.ipt.rules('filter', 'INPUT').includes('-j KUBE-FIREWALL'));
  const { dp: dp2, f: f2 } = setup();
  await dp2.sync(state({ svcs: 1 }));
  assert.equal(f2.sysctls.has('net.ipv4.conf.all.route_localnet'), false);
});

test('whole-table cache request: always puts -S right after *nat; never leaves it out', async () => {
  const a = setup(CONFIG, 'always');
  await a.dp.sync(state({ svcs: 2 }));
  // The first restore is the main one; the second inserts the jump rules.
  assert.equal(a.f.restoreInputs.length, 2);
  assert.match(a.f.restoreInputs[0]!, /\n\*nat\n-S\n:KUBE-PROXY-CANARY - \[0:0\]\n:KUBE-SERVICES/);
  assert.match(a.f.restoreInputs[1]!, /^\*filter\n-I INPUT 1 /);
  const n = setup(CONFIG, 'never');
  await n.dp.sync(state({ svcs: 2 }));
  assert.ok(n.f.restoreInputs.every((i) => !/^-S$/m.test(i)));
  assert.equal(a.f.ipt.save(), n.f.ipt.save());
});

test('cleanup removes our jumps and chains and nothing else', async () => {
  const { dp, f } = setup({ ...CONFIG, localhostNodePorts: true });
  f.ipt.restore(
    [
      '*nat',
      ':KUBE-MARK-DROP - [0:0]',
      ':FOREIGN - [0:0]',
      '-A FOREIGN -j RETURN',
      '-A PREROUTING -s 198.51.100.1 -j FOREIGN',
      'COMMIT',
      '*filter',
      ':KUBE-KUBELET-CANARY - [0:0]',
      '-A INPUT -p tcp --dport 22 -j ACCEPT',
      'COMMIT',
      '',
    ].join('\n'),
    { noflush: true },
  );
  await dp.sync(state({ svcs: 2 }));
  await dp.cleanup();
  const nat = f.ipt.chains('nat');
  assert.deepEqual(nat.filter((c) => !['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'].includes(c)).sort(), [
    'FOREIGN',
    'KUBE-MARK-DROP',
  ]);
  assert.deepEqual(f.ipt.rules('nat', 'PREROUTING'), ['-s 198.51.100.1 -j FOREIGN']);
  assert.deepEqual(f.ipt.rules('nat', 'OUTPUT'), []);
  // KUBE-FIREWALL is kubelet's too: upstream cleanup keeps the chain and its jumps.
  assert.deepEqual(
    f.ipt
      .chains('filter')
      .filter((c) => c.startsWith('KUBE-'))
      .sort(),
    ['KUBE-FIREWALL', 'KUBE-KUBELET-CANARY'],
  );
  assert.deepEqual(f.ipt.rules('filter', 'INPUT'), ['-j KUBE-FIREWALL', '-p tcp --dport 22 -j ACCEPT']);
  assert.equal(f.ipt.hasChain('mangle', 'KUBE-PROXY-CANARY'), false);
});

test('nat rules removed by another actor make the next partial sync full, which repairs them', async () => {
  const { dp, f } = setup();
  const flushNat = (): void => {
    // What `iptables -t nat -F` does: every rule goes, every chain stays.
    const save = f.ipt.save('nat').replace(/^-A .*\n/gm, '');
    f.ipt.load(`${f.ipt.save('mangle')}${f.ipt.save('filter')}${save}`);
  };
  await dp.sync(state({ svcs: 2 }));
  const healthy = f.ipt.save('nat');
  const quiet = await dp.sync(state({ svcs: 2, full: false, changed: [] }));
  assert.equal(quiet.partial, true, 'nothing changed: partial');
  assert.equal(quiet.counters?.natDrift, 0);

  flushNat();
  const out = await dp.sync(state({ svcs: 2, full: false, changed: [] }));
  assert.equal(out.partial, false);
  assert.equal(out.counters?.natDrift, 1);
  assert.equal(out.counters?.canaryMissing, 0, 'the canary survived the flush');
  assert.equal(f.ipt.save('nat'), healthy, 'the nat table is back as it was');

  // An admin removes KUBE-SERVICES and its jumps.
  for (const from of ['PREROUTING', 'OUTPUT'])
    f.ipt.load(f.ipt.save().replace(new RegExp(`^-A ${from} .*-j KUBE-SERVICES\\n`, 'm'), ''));
  const again = await dp.sync(state({ svcs: 2, full: false, changed: [] }));
  assert.equal(again.counters?.natDrift, 1);
  assert.equal(f.ipt.save('nat'), healthy);
});

/** One Service with `n` endpoints (10.180.x.y), a full sync. */
function endpointsState(n: number): SyncState {
  const ips = Array.from({ length: n }, (_, i) => ({ ip: `10.180.${Math.floor(i / 250)}.${(i % 250) + 1}` }));
  return syncStateFromObjects({
    services: [service('big', { clusterIP: '172.30.0.1' }, [{ name: 'p80', port: 80 }])],
    slices: [slice('big', [{ name: 'p80', port: 80 }], ips)],
    family: 'IPv4',
    nodeIPs: { IPv4: '192.168.0.2' },
    fullSync: true,
  });
}

test('large-cluster mode (over 1000 endpoints) asks the engine to skip the hourly full sync', async () => {
  const { dp } = setup();
  assert.equal(dp.skipsPeriodicFullSync(), false, 'nothing synced yet');
  await dp.sync(endpointsState(1000));
  assert.equal(dp.skipsPeriodicFullSync(), false, '1000 endpoints is not large (upstream: more than 1000)');
  await dp.sync(endpointsState(1001));
  assert.equal(dp.skipsPeriodicFullSync(), true);
  await dp.sync(endpointsState(3));
  assert.equal(dp.skipsPeriodicFullSync(), false, 'back under the threshold');
});

test('large-cluster mode: a one-endpoint change leaves KUBE-SERVICES alone; a rule removed from it makes a sync full', async () => {
  const f = fakeRunner();
  const clock = new FakeClock();
  const dp = new IptablesDataplane({
    config: CONFIG,
    run: f.run,
    sysctl: runnerSysctl(f.run),
    clock,
    syncPeriodMs: 30_000,
    options: { largeClusterThreshold: 0 },
  });
  await dp.sync(state({ svcs: 3 }));
  const one = await dp.sync(state({ svcs: 3, full: false, changed: ['ns1/s0'], epOffset: 1 }));
  assert.equal(one.partial, true);
  assert.equal(one.counters?.natTopKept, 1);
  const input = f.restoreInputs.at(-1)!;
  assert.doesNotMatch(input.slice(input.indexOf('*nat')), /^:KUBE-SERVICES /m, 'not declared in nat: not flushed');
  assert.ok(f.ipt.rules('nat', 'KUBE-SERVICES').some((r) => r.includes('-d 172.30.0.1')));
  const healthy = f.ipt.save('nat');

  // Someone deletes a rule from KUBE-SERVICES; the next sync that reads the saved table (once a
  // sync period in large-cluster mode) counts the rules there, and is full.
  f.ipt.load(f.ipt.save().replace(/^-A KUBE-SERVICES .*-d 172\.30\.0\.2.*\n/m, ''));
  clock.advance(30_001);
  const again = await dp.sync(state({ svcs: 3, full: false, changed: [], epOffset: 1 }));
  assert.equal(again.partial, false);
  assert.equal(again.counters?.natDrift, 1);
  assert.equal(f.ipt.save('nat'), healthy);
});

/** A drift watch that reports what the test tells it to. */
class TestWatch implements DriftWatch {
  private onDrift: ((d: Drift) => void) | null = null;
  constructor(private readonly live: boolean) {}
  open(_o: unknown, onDrift: (d: Drift) => void): Promise<void> {
    this.onDrift = onDrift;
    return Promise.resolve();
  }
  ownChange<T>(fn: () => Promise<T>): Promise<T> {
    return fn();
  }
  watching(): boolean {
    return this.live && this.onDrift !== null;
  }
  stop(): void {
    this.onDrift = null;
  }
  report(): void {
    this.onDrift?.({ reason: 'rules_changed', detail: 'a test' });
  }
}

function watched(live: boolean, runSteps?: <T>(steps: Steps<T>) => Promise<T>) {
  const f = fakeRunner();
  const clock = new FakeClock();
  const watch = new TestWatch(live);
  const dp = new IptablesDataplane({
    config: CONFIG,
    run: f.run,
    sysctl: runnerSysctl(f.run),
    clock,
    syncPeriodMs: 30_000,
    options: { largeClusterThreshold: 0 },
    driftWatch: watch,
    ...(runSteps ? { runSteps } : {}),
  });
  const drifts: Drift[] = [];
  dp.watchDrift((d) => drifts.push(d));
  const saves = () => f.log.filter((l) => l.startsWith('iptables-save')).length;
  return { f, clock, watch, dp, drifts, saves };
}

test('large-cluster mode with the drift watch running: partial syncs read no iptables-save, the first sync after a drift does', async () => {
  const { clock, watch, dp, drifts, saves } = watched(true);
  await dp.sync(state({ svcs: 3 }));
  assert.equal(saves(), 1, 'the first sync reads the chain list');
  clock.advance(30_001);
  const one = await dp.sync(state({ svcs: 3, full: false, changed: ['ns1/s0'], epOffset: 1 }));
  assert.equal(one.partial, true);
  assert.equal(one.counters?.natSaveMs, 0);
  assert.equal(saves(), 1, 'a sync period later, still not read: the watch reports changes by others');
  watch.report();
  assert.equal(drifts.length, 1);
  const repair = await dp.sync(state({ svcs: 3, full: false, changed: [], epOffset: 1 }));
  assert.equal(repair.partial, false, 'the planner forgot what it knew: the next sync is full');
  assert.equal(saves(), 2, 'and starts from the live chain list');
});

test('large-cluster mode without a drift watch: a partial sync reads iptables-save once a sync period', async () => {
  const { clock, dp, saves } = watched(false);
  await dp.sync(state({ svcs: 3 }));
  await dp.sync(state({ svcs: 3, full: false, changed: ['ns1/s0'], epOffset: 1 }));
  assert.equal(saves(), 1);
  clock.advance(30_001);
  await dp.sync(state({ svcs: 3, full: false, changed: ['ns1/s0'], epOffset: 0 }));
  assert.equal(saves(), 2);
});

test('a drift reported while the plan runs in slices is held until the plan is done, then makes the next sync full', async () => {
  let fire: (() => void) | null = null;
  let steps = 0;
  // Reports the drift between two of the plan's steps, where the loop would have turned.
  const runSteps = <T>(s: Steps<T>): Promise<T> => {
    for (;;) {
      const r = s.next();
      if (r.done) return Promise.resolve(r.value);
      if (steps++ === 0) fire?.();
    }
  };
  const { f, watch, dp, drifts } = watched(true, runSteps);
  fire = () => watch.report();
  // Enough service ports for the render to take more than one step.
  const first = await dp.sync(state({ svcs: 600 }));
  assert.ok(steps > 1, `${steps} steps`);
  assert.equal(drifts.length, 1, 'reported to the engine at once');
  assert.equal(first.partial, false);
  assert.ok(f.ipt.rules('nat', 'KUBE-SERVICES').length >= 600, 'the plan in progress was applied whole');
  fire = null;
  const next = await dp.sync(state({ svcs: 600, full: false, changed: [] }));
  assert.equal(next.partial, false, 'the drift made the next sync full');
});
