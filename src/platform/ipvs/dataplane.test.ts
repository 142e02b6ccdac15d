// IpvsDataplane over the IPVS Fake: what a sync writes, partial syncs,
// graceful termination, ownership, failure and repair, cleanup. The same
// dataplane runs against the real kernel in test/guest/ipvs-dataplane.guest.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../core/types.js';
import { Fake } from '../../dataplane/ipvs/fake.js';
import type { VirtualServer } from '../../dataplane/ipvs/objects.js';
import { FakeClock } from '../../../test/support/fakeclock.js';
import type { CommandRunner } from '../exec.js';
import { cleanupIpvsLeftovers } from './cleanup.js';
import { IpvsDataplane, type IpvsModeOptions } from './dataplane.js';
import { fakeKernel } from './kernel.js';

const config: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8'] },
  nodePortAddresses: null,
  localhostNodePorts: true,
  localIPs: ['127.0.0.1', '192.168.0.2'],
};
const ipvsOpts: IpvsModeOptions = {
  scheduler: '',
  excludeCIDRs: ['10.99.0.0/16'],
  strictARP: true,
  tcpTimeout: 0,
  tcpFinTimeout: 0,
  udpTimeout: 0,
};
const run: CommandRunner = async () => ({ stdout: 'iptables v1.8.9 (nf_tables)\n', stderr: '', code: 0 });

type Ep = { ip: string; terminating?: boolean };
function state(
  eps: Record<string, Ep[]>,
  opts: { full?: boolean; changed?: string[]; protocol?: 'TCP' | 'UDP'; nodePort?: boolean } = {},
): SyncState {
  const protocol = opts.protocol ?? 'TCP';
  const names = Object.keys(eps);
  return syncStateFromObjects({
    services: names.map((n, i) => ({
      metadata: { namespace: 'ns', name: n },
      spec: {
        type: opts.nodePort ? 'NodePort' : 'ClusterIP',
        clusterIP: `172.30.0.${i + 1}`,
        ports: [{ name: 'p', port: 80, protocol, targetPort: 80, ...(opts.nodePort ? { nodePort: 30000 + i } : {}) }],
      },
    })) as never,
    slices: names.map((n) => ({
      metadata: { namespace: 'ns', name: `${n}-1`, labels: { 'kubernetes.io/service-name': n } },
      addressType: 'IPv4',
      endpoints: eps[n]!.map((e) => ({
        addresses: [e.ip],
        conditions: e.terminating ? { ready: false, serving: true, terminating: true } : { ready: true },
        nodeName: 'node2',
      })),
      ports: [{ name: 'p', port: 80, protocol }],
    })) as never,
    family: 'IPv4',
    nodeName: 'test-node',
    nodeIPs: { IPv4: '192.168.0.2' },
    fullSync: opts.full ?? true,
    ...(opts.changed ? { changedServices: opts.changed } : {}),
  });
}

function setup(drainBounds = { tcpMs: 60_000, udpMs: 30_000 }, iptables: CommandRunner = run) {
  const fake = new Fake({ nodeAddresses: ['127.0.0.1', '192.168.0.2'] });
  const clock = new FakeClock();
  const flushed: string[] = [];
  const dp = new IpvsDataplane({
    config,
    ipvs: ipvsOpts,
    kernel: fakeKernel(fake),
    run: iptables,
    clock,
    syncPeriodMs: 30_000,
    drainBounds,
    flushUDP: async (_f, deleted) => {
      for (const { vs, rs } of deleted) flushed.push(`${vs.address}:${vs.port}->${rs.address}:${rs.port}`);
    },
  });
  return { fake, clock, dp, flushed };
}
const dests = (fake: Fake, ip: string, proto: 'TCP' | 'UDP' = 'TCP') =>
  fake
    .listDests({ protocol: proto, address: ip, port: 80 })
    .map((d) => `${d.address}:${d.weight}`)
    .sort();

test('a first sync writes virtual servers, kube-ipvs0 addresses, ipsets, rules with their jumps, and sysctls', async () => {
  const { fake, dp } = setup();
  const out = await dp.sync(state({ a: [{ ip: '10.180.0.1' }, { ip: '10.180.0.2' }] }, { nodePort: true }));
  assert.equal(out.partial, false);
  assert.deepEqual(dests(fake, '172.30.0.1'), ['10.180.0.1:1', '10.180.0.2:1']);
  assert.deepEqual(dests(fake, '192.168.0.2'), []); // the NodePort is on 30000
  assert.equal(fake.listDests({ protocol: 'TCP', address: '192.168.0.2', port: 30000 }).length, 2);
  assert.deepEqual(fake.dummyAddresses(), ['172.30.0.1']);
  assert.deepEqual([...fake.members('KUBE-CLUSTER-IP')!], ['172.30.0.1,tcp:80']);
  assert.deepEqual([...fake.members('KUBE-NODE-PORT-TCP')!], ['30000']);
  assert.match(
    fake.iptables.save('nat'),
    /-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES/,
  );
  assert.match(
    fake.iptables.save('filter'),
    /-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER/,
  );
  assert.equal(fake.sysctls.get('net/ipv4/vs/conntrack'), '1');
  assert.equal(fake.sysctls.get('net/ipv4/vs/expire_nodest_conn'), '1');
  assert.equal(fake.sysctls.get('net/ipv4/conf/all/arp_ignore'), '1', 'strict ARP');
  assert.equal(fake.sysctls.get('net/ipv4/conf/all/arp_announce'), '2');
});

test('a Service address is bound on kube-ipvs0 only once its virtual server and real servers exist', async () => {
  const fake = new Fake({ nodeAddresses: ['127.0.0.1', '192.168.0.2'] });
  const kernel = fakeKernel(fake);
  // What the kernel held each time an address was bound: an address bound first would, for a moment,
  // deliver the Service's packets to the node's own sockets.
  const atBind: string[] = [];
  const link = {
    ...kernel.link,
    changeAddresses: (index: number, add: boolean, addrs: readonly string[]) => {
      if (add)
        for (const a of addrs) {
          const rs = fake.listServices().some((vs) => vs.address === a) ? dests(fake, a) : null;
          atBind.push(`${a}: ${rs === null ? 'no virtual server' : rs.join(',')}`);
        }
      return kernel.link.changeAddresses(index, add, addrs);
    },
  };
  const dp = new IpvsDataplane({
    config,
    ipvs: ipvsOpts,
    kernel: { ...kernel, link },
    run,
    clock: new FakeClock(),
    syncPeriodMs: 30_000,
    flushUDP: async () => {},
  });
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }] }));
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }], b: [{ ip: '10.180.0.2' }] }, { full: false, changed: ['ns/b'] }));
  assert.deepEqual(atBind, ['172.30.0.1: 10.180.0.1:1', '172.30.0.2: 10.180.0.2:1']);
  assert.deepEqual(fake.dummyAddresses().sort(), ['172.30.0.1', '172.30.0.2']);
});

test("a new Service's rules are written before its virtual servers exist", async () => {
  const fake = new Fake({ nodeAddresses: ['127.0.0.1', '192.168.0.2'] });
  const kernel = fakeKernel(fake);
  // Whether the NodePort rules matched the NodePort set when IPVS was asked for the virtual servers: if not,
  // a first packet to the new NodePort is served by the rules of before (not masqueraded, say).
  const atApply: boolean[] = [];
  const ipvs = {
    ...kernel.ipvs,
    apply: (ops: Parameters<typeof kernel.ipvs.apply>[0]) => {
      if (ops.some((o) => o.op === 'add-service' && o.vs.port === 30000))
        atApply.push(fake.iptables.save('nat').includes('--match-set KUBE-NODE-PORT-TCP'));
      return kernel.ipvs.apply(ops);
    },
  };
  const dp = new IpvsDataplane({
    config,
    ipvs: ipvsOpts,
    kernel: { ...kernel, ipvs },
    run,
    clock: new FakeClock(),
    syncPeriodMs: 30_000,
    flushUDP: async () => {},
  });
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }] }));
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }] }, { full: false, changed: ['ns/a'], nodePort: true }));
  assert.deepEqual(atApply, [true]);
});

test('taking over from iptables mode, IPVS serves and binds before our rules replace its KUBE-SERVICES', async () => {
  const fake = new Fake({ nodeAddresses: ['127.0.0.1', '192.168.0.2'] });
  const kernel = fakeKernel(fake);
  // iptables mode's state, as a proxy in iptables mode left it: its KUBE-SERVICES DNATs every Service.
  const leftover = [
    '*nat',
    ':KUBE-SERVICES - [0:0]',
    ':KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]',
    '-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA',
    'COMMIT',
    '',
  ].join('\n');
  await kernel.iptables('IPv4').restore(leftover, { noflush: true, counters: false });
  const seen: Array<{ at: string; iptablesServes: boolean; bound: number }> = [];
  const look = (at: string) =>
    seen.push({
      at,
      iptablesServes: fake.iptables.save('nat').includes('-j KUBE-SVC-AAAAAAAAAAAAAAAA'),
      bound: fake.dummyAddresses().length,
    });
  const ipvs = {
    ...kernel.ipvs,
    apply: (ops: Parameters<typeof kernel.ipvs.apply>[0]) => {
      if (ops.length > 0) look('ipvs');
      return kernel.ipvs.apply(ops);
    },
  };
  const ipt = (f: Parameters<typeof kernel.iptables>[0]) => {
    const real = kernel.iptables(f);
    return {
      ...real,
      restore: (text: string, o: Parameters<typeof real.restore>[1]) => {
        if (text.includes(':KUBE-SERVICES')) look('rules');
        return real.restore(text, o);
      },
    };
  };
  const dp = new IpvsDataplane({
    config,
    ipvs: ipvsOpts,
    kernel: { ...kernel, ipvs, iptables: ipt },
    run,
    clock: new FakeClock(),
    syncPeriodMs: 30_000,
    flushUDP: async () => {},
  });
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }] }));
  assert.deepEqual(seen, [
    { at: 'ipvs', iptablesServes: true, bound: 0 },
    { at: 'rules', iptablesServes: true, bound: 1 },
  ]);
  assert.ok(!fake.iptables.save('nat').includes('-j KUBE-SVC-AAAAAAAAAAAAAAAA'), 'our KUBE-SERVICES replaced its');
  // Later syncs keep the usual order: rules first.
  seen.length = 0;
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }], b: [{ ip: '10.180.0.2' }] }));
  assert.deepEqual(
    seen.map((x) => x.at),
    ['rules', 'ipvs'],
  );
});

test('a partial sync sends only the changed real servers; a removed TCP one drains at weight 0, then goes', async () => {
  const { fake, dp, clock } = setup();
  const names = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`s${i}`, [{ ip: `10.180.0.${i + 1}` }]]));
  await dp.sync(state(names));
  const out = await dp.sync(state({ ...names, s3: [{ ip: '10.180.9.9' }] }, { full: false, changed: ['ns/s3'] }));
  assert.equal(out.partial, true);
  assert.equal(out.counters!['ipvsRequests'], 2, 'add the new real server, weight 0 for the old one');
  assert.deepEqual(dests(fake, '172.30.0.4'), ['10.180.0.4:0', '10.180.9.9:1']);
  fake.setConnections('TCP/172.30.0.4:80', '10.180.0.4:80', 1, 0);
  assert.equal(await dp.checkDraining(), 0, 'a connection left: it stays');
  assert.deepEqual(dests(fake, '172.30.0.4'), ['10.180.0.4:0', '10.180.9.9:1']);
  fake.setConnections('TCP/172.30.0.4:80', '10.180.0.4:80', 0, 0);
  assert.equal(await dp.checkDraining(), 1, 'drained: deleted');
  assert.deepEqual(dests(fake, '172.30.0.4'), ['10.180.9.9:1']);
  // A real server kept busy is deleted after the bound.
  await dp.sync(state({ ...names, s3: [{ ip: '10.180.8.8' }] }, { full: false, changed: ['ns/s3'] }));
  fake.setConnections('TCP/172.30.0.4:80', '10.180.9.9:80', 3, 0);
  clock.advance(59_000);
  assert.equal(await dp.checkDraining(), 0);
  clock.advance(1_000);
  assert.equal(await dp.checkDraining(), 1);
  assert.deepEqual(dests(fake, '172.30.0.4'), ['10.180.8.8:1']);
});

test('UDP: a gone endpoint is deleted at once and its conntrack flushed; a terminating one drains', async () => {
  const { fake, dp, flushed } = setup();
  await dp.sync(
    state({ dns: [{ ip: '10.180.0.1' }, { ip: '10.180.0.2' }, { ip: '10.180.0.3' }] }, { protocol: 'UDP' }),
  );
  await dp.sync(
    state(
      { dns: [{ ip: '10.180.0.1' }, { ip: '10.180.0.3', terminating: true }] },
      { protocol: 'UDP', full: false, changed: ['ns/dns'] },
    ),
  );
  assert.deepEqual(dests(fake, '172.30.0.1', 'UDP'), ['10.180.0.1:1', '10.180.0.3:0']);
  assert.deepEqual(flushed, ['172.30.0.1:80->10.180.0.2:80']);
});

test('a real server wanted again while it drains gets its weight back', async () => {
  const { fake, dp } = setup();
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }, { ip: '10.180.0.2' }] }));
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }] }, { full: false, changed: ['ns/a'] }));
  assert.deepEqual(dests(fake, '172.30.0.1'), ['10.180.0.1:1', '10.180.0.2:0']);
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }, { ip: '10.180.0.2' }] }, { full: false, changed: ['ns/a'] }));
  assert.deepEqual(dests(fake, '172.30.0.1'), ['10.180.0.1:1', '10.180.0.2:1']);
  assert.equal(await dp.checkDraining(), 0, 'no longer draining');
});

test('a draining UDP real server whose endpoint then goes is deleted at once, and its conntrack flushed', async () => {
  const { fake, dp, flushed } = setup();
  await dp.sync(state({ dns: [{ ip: '10.180.0.1' }, { ip: '10.180.0.2' }] }, { protocol: 'UDP' }));
  const partial = { protocol: 'UDP' as const, full: false, changed: ['ns/dns'] };
  await dp.sync(state({ dns: [{ ip: '10.180.0.1' }, { ip: '10.180.0.2', terminating: true }] }, partial));
  assert.deepEqual(dests(fake, '172.30.0.1', 'UDP'), ['10.180.0.1:1', '10.180.0.2:0'], 'terminating: drains');
  await dp.sync(state({ dns: [{ ip: '10.180.0.1' }] }, partial));
  assert.deepEqual(dests(fake, '172.30.0.1', 'UDP'), ['10.180.0.1:1'], 'gone: deleted without waiting');
  assert.deepEqual(flushed, ['172.30.0.1:80->10.180.0.2:80']);
  assert.equal(await dp.checkDraining(), 0, 'nothing left draining');
});

test('a full sync every sync period reads the kernel back and repairs what others changed unseen', async () => {
  const { fake, dp, clock } = setup();
  const eps = { a: [{ ip: '10.180.0.1' }, { ip: '10.180.0.2' }] };
  await dp.sync(state(eps));
  // A real server and a set member removed by hand: nothing watches those.
  fake.applyIpvs([{ op: 'del-dest', vs: fake.listServices()[0]!, rs: { address: '10.180.0.2', port: 80, weight: 1 } }]);
  fake.ipsetRestore('del KUBE-CLUSTER-IP 172.30.0.1,tcp:80\n');
  const quiet = await dp.sync(state(eps, { full: false, changed: [] }));
  assert.equal(quiet.partial, true);
  assert.deepEqual(dests(fake, '172.30.0.1'), ['10.180.0.1:1'], 'a partial sync trusts its memory');
  clock.advance(30_000);
  const periodic = await dp.sync(state(eps, { full: false, changed: [] }));
  assert.equal(periodic.partial, false);
  assert.deepEqual(dests(fake, '172.30.0.1'), ['10.180.0.1:1', '10.180.0.2:1']);
  assert.deepEqual([...fake.members('KUBE-CLUSTER-IP')!], ['172.30.0.1,tcp:80']);
});

test("a Service's virtual server on a node address (an externalIP the node holds) goes with the Service", async () => {
  const { fake, dp } = setup();
  const withExternal = (services: unknown[], full: boolean) =>
    syncStateFromObjects({
      services: services as never,
      slices: [],
      family: 'IPv4',
      nodeName: 'test-node',
      nodeIPs: { IPv4: '192.168.0.2' },
      fullSync: full,
      changedServices: ['ns/ext'],
    });
  const ext = {
    metadata: { namespace: 'ns', name: 'ext' },
    spec: {
      clusterIP: '172.30.0.9',
      externalIPs: ['192.168.0.2'],
      ports: [{ name: 'p', port: 8443, protocol: 'TCP' }],
    },
  };
  await dp.sync(withExternal([ext], true));
  const keys = () =>
    fake
      .listServices()
      .map((v) => `${v.address}:${v.port}`)
      .sort();
  assert.deepEqual(keys(), ['172.30.0.9:8443', '192.168.0.2:8443']);
  assert.deepEqual(fake.dummyAddresses(), ['172.30.0.9'], 'the node address is not bound on kube-ipvs0');
  await dp.sync(withExternal([], false));
  assert.deepEqual(keys(), []);
});

test('full syncs delete only our stale virtual servers: others and --ipvs-exclude-cidrs stay', async () => {
  const { fake, dp } = setup();
  const foreign = (address: string, port = 80): VirtualServer => ({
    family: 'IPv4',
    protocol: 'TCP',
    address,
    port,
    scheduler: 'rr',
    flags: 0,
    timeout: 0,
  });
  fake.applyIpvs([
    { op: 'add-service', vs: foreign('192.168.0.2', 8443) }, // someone's VIP on a node address
    { op: 'add-service', vs: foreign('10.99.0.1') }, // excluded range
    { op: 'add-service', vs: foreign('203.0.113.50') }, // not on any of our addresses
  ]);
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }], b: [{ ip: '10.180.0.2' }] }));
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }] })); // b is gone: its ClusterIP is on kube-ipvs0, so ours
  const left = fake
    .listServices()
    .map((v) => `${v.address}:${v.port}`)
    .sort();
  assert.deepEqual(left, ['10.99.0.1:80', '172.30.0.1:80', '192.168.0.2:8443', '203.0.113.50:80']);
  assert.deepEqual(fake.dummyAddresses(), ['172.30.0.1']);
});

test('a refused change fails the sync; the next one is full and repairs from the kernel', async () => {
  const { fake, dp } = setup();
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }] }));
  // Someone deletes our virtual server behind our back; a partial sync adding a real server to it is refused.
  fake.applyIpvs([{ op: 'del-service', vs: fake.listServices()[0]! }]);
  await assert.rejects(
    dp.sync(state({ a: [{ ip: '10.180.0.1' }, { ip: '10.180.0.2' }] }, { full: false, changed: ['ns/a'] })),
    /change\(s\) refused/,
  );
  const out = await dp.sync(state({ a: [{ ip: '10.180.0.1' }, { ip: '10.180.0.2' }] }, { full: false, changed: [] }));
  assert.equal(out.partial, false);
  assert.deepEqual(dests(fake, '172.30.0.1'), ['10.180.0.1:1', '10.180.0.2:1']);
});

test('cleanup removes kube-ipvs0, our virtual servers, sets, chains and jumps, and nothing else', async () => {
  const { fake, dp } = setup();
  fake.applyIpvs([
    {
      op: 'add-service',
      vs: { family: 'IPv4', protocol: 'TCP', address: '203.0.113.50', port: 80, scheduler: 'rr', flags: 0, timeout: 0 },
    },
  ]);
  fake.iptables.restore('*nat\n:OTHER - [0:0]\n-A PREROUTING -j OTHER\nCOMMIT\n', { noflush: true });
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }] }, { nodePort: true }));
  const r = await cleanupIpvsLeftovers(fakeKernel(fake), { families: ['IPv4', 'IPv6'] });
  assert.deepEqual(r.errors, []);
  assert.deepEqual(
    fake.listServices().map((v) => v.address),
    ['203.0.113.50'],
  );
  assert.equal(fake.hasDummy(), false);
  assert.deepEqual(fake.setNames(), []);
  assert.equal(
    fake.iptables.save('nat'),
    '*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:OTHER - [0:0]\n-A PREROUTING -j OTHER\nCOMMIT\n',
  );
  assert.doesNotMatch(fake.iptables.save('filter'), /KUBE-/);
  assert.equal(r.virtualServers, 2, 'the ClusterIP and the NodePort');
});

test('after iptables mode took over, cleanup leaves the chains and jumps it shares with IPVS mode', async () => {
  const { fake, dp } = setup();
  await dp.sync(state({ a: [{ ip: '10.180.0.1' }] }, { nodePort: true }));
  // iptables mode's first sync: its restore declares (and so rewrites) the chains it writes.
  const taken = [
    '*nat',
    ':KUBE-SERVICES - [0:0]',
    ':KUBE-POSTROUTING - [0:0]',
    ':KUBE-MARK-MASQ - [0:0]',
    ':KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]',
    '-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA',
    '-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000',
    'COMMIT',
    '*filter',
    ':KUBE-FORWARD - [0:0]',
    ':KUBE-PROXY-FIREWALL - [0:0]',
    'COMMIT',
    '',
  ].join('\n');
  fake.iptables.restore(taken, { noflush: true });
  const { IPTABLES_JUMP_CHAINS } = await import('../../dataplane/iptables/jumps.js');
  const { NAT_CHAINS_TO_REMOVE, FILTER_CHAINS_TO_REMOVE } = await import('../iptables/cleanup.js');
  const keep = { nat: NAT_CHAINS_TO_REMOVE, filter: FILTER_CHAINS_TO_REMOVE, jumps: IPTABLES_JUMP_CHAINS };
  const r = await cleanupIpvsLeftovers(fakeKernel(fake), { families: ['IPv4'], keep });
  assert.deepEqual(r.errors, []);
  const nat = fake.iptables.save('nat');
  for (const kept of [
    '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
    '-j KUBE-SVC-AAAAAAAAAAAAAAAA',
    ':KUBE-MARK-MASQ',
  ])
    assert.ok(nat.includes(kept), `${kept} kept:\n${nat}`);
  assert.doesNotMatch(nat, /KUBE-NODE-PORT|KUBE-LOAD-BALANCER/);
  const filter = fake.iptables.save('filter');
  assert.match(filter, /-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD/);
  assert.match(filter, /:KUBE-PROXY-FIREWALL/);
  assert.doesNotMatch(filter, /KUBE-IPVS-FILTER|KUBE-SOURCE-RANGES-FIREWALL|kube-proxy firewall rules/);
  assert.equal(fake.hasDummy(), false);
  assert.deepEqual(fake.setNames(), []);
});

test('the drift watch reports a cleared table and a removed address once each; a full sync repairs both', async () => {
  // The legacy backend: no nf_tables monitor on this machine's own tables (the guest tests cover it).
  const legacy: CommandRunner = async () => ({ stdout: 'iptables v1.8.9 (legacy)\n', stderr: '', code: 0 });
  const { fake, dp, clock } = setup(undefined, legacy);
  const drifts: string[] = [];
  dp.watchDrift((d) => drifts.push(`${d.reason}: ${d.detail}`));
  const eps = { a: [{ ip: '10.180.0.1' }], b: [{ ip: '10.180.0.2' }] };
  await dp.sync(state(eps));
  // A virtual server of someone else's is not ours to watch.
  const foreign: VirtualServer = {
    family: 'IPv4',
    protocol: 'TCP',
    address: '10.77.0.1',
    port: 80,
    scheduler: 'rr',
    flags: 0,
    timeout: 0,
  };
  fake.applyIpvs([{ op: 'add-service', vs: foreign }]);
  assert.equal(await dp.checkDrift(), null, 'in step with the kernel');

  fake.applyIpvs(fake.listServices().map((vs) => ({ op: 'del-service' as const, vs })));
  clock.advance(1000);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(drifts, ['rules_changed: 2 of 2 IPVS virtual servers gone: TCP/172.30.0.1:80, TCP/172.30.0.2:80']);
  clock.advance(5000);
  await new Promise((r) => setImmediate(r));
  assert.equal(drifts.length, 1, 'reported once until a sync repairs it');
  await dp.sync(state(eps, { full: true }));
  assert.deepEqual(dests(fake, '172.30.0.1'), ['10.180.0.1:1']);
  assert.equal(await dp.checkDrift(), null);

  fake.changeAddresses(false, ['172.30.0.2']);
  assert.equal((await dp.checkDrift())?.reason, 'address_removed');
  assert.match(drifts[1]!, /^address_removed: 1 of 2 addresses gone from kube-ipvs0: 172\.30\.0\.2$/);
  await dp.sync(state(eps, { full: true }));
  assert.deepEqual(fake.dummyAddresses().sort(), ['172.30.0.1', '172.30.0.2']);
  assert.equal(await dp.checkDrift(), null);
  dp.close();
});
