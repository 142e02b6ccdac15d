// The IPVS mode's kernel clients against a real IPVS kernel (the QEMU guest,
// scripts/guest): generic-netlink virtual and real servers read back by
// ipvsadm, rtnetlink kube-ipvs0 and addresses read back by `ip`, ipsets
// through ipset restore/save; and the dataplane's drift check at 1000
// virtual servers, timed. Each case works in its own network namespace.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { IpvsKernel } from '../../src/platform/ipvs/client.js';
import { Rtnl } from '../../src/platform/ipvs/rtnl.js';
import { IpsetTool } from '../../src/platform/ipvs/ipset.js';
import { netnsRunner } from '../../src/platform/exec.js';
import type { VirtualServer } from '../../src/dataplane/ipvs/objects.js';
import { SVC_FLAG } from '../../src/dataplane/ipvs/objects.js';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import { realClock } from '../../src/platform/clock.js';
import { runnerSysctl } from '../../src/platform/iptables/sysctl.js';
import { IpvsDataplane } from '../../src/platform/ipvs/dataplane.js';
import { openKernel } from '../../src/platform/ipvs/kernel.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../netns/cleanup.js';
import { newPrefix } from '../netns/names.js';

const NS = `${newPrefix()}ipvs`;
const sh = (...args: string[]) => execFileSync('ip', ['netns', 'exec', NS, ...args], { encoding: 'utf8' });

const vs = (over: Partial<VirtualServer> = {}): VirtualServer => ({
  family: 'IPv4',
  protocol: 'TCP',
  address: '10.96.0.10',
  port: 80,
  scheduler: 'rr',
  flags: 0,
  timeout: 0,
  ...over,
});

before(() => {
  trackNamespace(NS);
  execFileSync('ip', ['netns', 'add', NS]);
  sh('ip', 'link', 'set', 'lo', 'up');
});
after(() => {
  deleteNamespaceSync(NS);
  untrackNamespace(NS);
});

describe('IPVS over generic netlink', () => {
  let k: IpvsKernel;
  before(async () => {
    k = await IpvsKernel.open(NS);
  });
  after(() => k.close());

  test('virtual servers of every protocol and family, read back by ipvsadm and by our own dump', () => {
    const want = [
      vs(),
      vs({ protocol: 'UDP', port: 53, scheduler: 'wrr' }),
      vs({ protocol: 'SCTP', port: 9999, scheduler: 'lc' }),
      vs({ address: '10.96.0.11', scheduler: 'sh', flags: SVC_FLAG.PERSISTENT, timeout: 10800 }),
      vs({ address: '10.96.0.12', scheduler: 'mh', flags: SVC_FLAG.SCHED2 }),
      vs({ family: 'IPv6', address: 'fd00:10:96::a', port: 443 }),
    ];
    assert.deepEqual(k.apply(want.map((v) => ({ op: 'add-service', vs: v }))), []);
    const saved = sh('ipvsadm', '-Sn').trim().split('\n').sort();
    assert.deepEqual(
      saved,
      [
        '-A -t 10.96.0.10:80 -s rr',
        '-A -t 10.96.0.11:80 -s sh -p 10800',
        '-A -t 10.96.0.12:80 -s mh -b mh-port',
        '-A -t [fd00:10:96::a]:443 -s rr',
        '-A -u 10.96.0.10:53 -s wrr',
        '-A --sctp-service 10.96.0.10:9999 -s lc',
      ].sort(),
    );
    const listed = k.listServices();
    const key = (v: VirtualServer) => JSON.stringify(v);
    assert.deepEqual(listed.map(key).sort(), want.map(key).sort());
  });

  test('real servers: add, weight edit, list with counters, delete; ipvsadm sees each step', () => {
    const v = vs();
    const eps = [
      { address: '10.244.1.5', port: 8080, weight: 1 },
      { address: '10.244.2.6', port: 8080, weight: 1 },
    ];
    assert.deepEqual(k.apply(eps.map((rs) => ({ op: 'add-dest', vs: v, rs }))), []);
    assert.match(
      sh('ipvsadm', '-Ln', '-t', '10.96.0.10:80'),
      /10\.244\.1\.5:8080\s+Masq\s+1[\s\S]*10\.244\.2\.6:8080\s+Masq\s+1/,
    );
    assert.deepEqual(k.apply([{ op: 'edit-dest', vs: v, rs: { ...eps[0]!, weight: 0 } }]), []);
    const listed = k.listDests(v).sort((a, b) => a.address.localeCompare(b.address));
    assert.deepEqual(
      listed.map((d) => [d.address, d.port, d.weight, d.activeConns, d.inactiveConns]),
      [
        ['10.244.1.5', 8080, 0, 0, 0],
        ['10.244.2.6', 8080, 1, 0, 0],
      ],
    );
    assert.deepEqual(k.apply([{ op: 'del-dest', vs: v, rs: eps[0]! }]), []);
    assert.deepEqual(
      k.listDests(v).map((d) => d.address),
      ['10.244.2.6'],
    );
    const v6 = vs({ family: 'IPv6', address: 'fd00:10:96::a', port: 443 });
    assert.deepEqual(
      k.apply([{ op: 'add-dest', vs: v6, rs: { address: 'fd00:10:244::5', port: 8443, weight: 1 } }]),
      [],
    );
    assert.match(sh('ipvsadm', '-Ln', '-t', '[fd00:10:96::a]:443'), /\[fd00:10:244::5\]:8443\s+Masq\s+1/);
  });

  test('edits and deletes of services; refused requests are reported with errno, the rest applied', () => {
    assert.deepEqual(k.apply([{ op: 'edit-service', vs: vs({ scheduler: 'wlc' }) }]), []);
    assert.match(sh('ipvsadm', '-Ln', '-t', '10.96.0.10:80'), /TCP\s+10\.96\.0\.10:80 wlc/);
    const failures = k.apply([
      { op: 'add-service', vs: vs() }, // exists
      { op: 'add-service', vs: vs({ address: '10.96.0.20', scheduler: 'nosuch' }) },
      { op: 'del-service', vs: vs({ address: '10.96.0.99' }) }, // absent
      { op: 'add-service', vs: vs({ address: '10.96.0.21' }) }, // fine, after the failures
    ]);
    assert.deepEqual(
      failures.map((f) => [f.op.op, f.op.vs.address, f.errno]),
      [
        ['add-service', '10.96.0.10', 17],
        ['add-service', '10.96.0.20', 2],
        ['del-service', '10.96.0.99', 3],
      ],
    );
    assert.ok(k.listServices().some((s) => s.address === '10.96.0.21'));
    assert.deepEqual(k.apply(k.listServices().map((s) => ({ op: 'del-service' as const, vs: s }))), []);
    assert.equal(sh('ipvsadm', '-Sn').trim(), '');
  });

  test('timeouts: set like ipvsadm --set, 0 leaves a value alone; version', () => {
    k.setTimeouts({ tcp: 900, tcpFin: 120, udp: 300 });
    assert.deepEqual(k.timeouts(), { tcp: 900, tcpFin: 120, udp: 300 });
    k.setTimeouts({ tcp: 0, tcpFin: 30, udp: 0 });
    assert.deepEqual(k.timeouts(), { tcp: 900, tcpFin: 30, udp: 300 });
    assert.match(sh('ipvsadm', '-L', '--timeout'), /Timeout \(tcp tcpfin udp\): 900 30 300/);
    assert.match(k.version(), /^1\.\d+\.\d+$/);
  });

  test('1000 virtual servers with 5 real servers each in one apply, listed back complete', () => {
    const ops = [];
    for (let i = 0; i < 1000; i++) {
      const v = vs({ address: `10.97.${i >> 8}.${i & 255}` });
      ops.push({ op: 'add-service' as const, vs: v });
      for (let e = 0; e < 5; e++)
        ops.push({
          op: 'add-dest' as const,
          vs: v,
          rs: { address: `10.244.${e}.${(i % 250) + 1}`, port: 8080, weight: 1 },
        });
    }
    assert.deepEqual(k.apply(ops), []);
    const listed = k.listServices();
    assert.equal(listed.length, 1000);
    assert.equal(k.listDests(listed[500]!).length, 5);
    assert.equal(sh('ipvsadm', '-Sn').trim().split('\n').length, 6000);
    assert.deepEqual(k.apply(listed.map((s) => ({ op: 'del-service' as const, vs: s }))), []);
  });
});

describe('kube-ipvs0 and its addresses over rtnetlink', () => {
  let r: Rtnl;
  before(async () => {
    r = await Rtnl.open(NS);
  });
  after(() => r.close());

  test('the dummy link is made once, left down, holds /32 and /128 addresses, and goes away', () => {
    assert.equal(r.link('kube-ipvs0'), null);
    const idx = r.ensureDummy('kube-ipvs0');
    assert.equal(r.ensureDummy('kube-ipvs0'), idx, 'idempotent');
    assert.deepEqual(r.changeAddresses(idx, true, ['10.96.0.10', '10.96.0.11', 'fd00:10:96::a']), []);
    assert.deepEqual(r.changeAddresses(idx, true, ['10.96.0.10']), [], 'an address already there is fine');
    const shown = sh('ip', '-o', 'addr', 'show', 'dev', 'kube-ipvs0');
    assert.match(shown, /inet 10\.96\.0\.10\/32/);
    assert.match(shown, /inet6 fd00:10:96::a\/128/);
    assert.match(sh('ip', 'link', 'show', 'kube-ipvs0'), /state DOWN/);
    assert.match(sh('ip', 'route', 'show', 'table', 'local'), /local 10\.96\.0\.11 dev kube-ipvs0/);
    const mine = r
      .addresses()
      .filter((a) => a.index === idx)
      .map((a) => a.address)
      .sort();
    assert.deepEqual(mine, ['10.96.0.10', '10.96.0.11', 'fd00:10:96::a']);
    assert.deepEqual(r.changeAddresses(idx, false, ['10.96.0.11', '10.96.0.99']), [], 'an absent address is fine');
    assert.doesNotMatch(sh('ip', '-o', 'addr', 'show', 'dev', 'kube-ipvs0'), /10\.96\.0\.11\//);
    assert.equal(r.deleteDummy('kube-ipvs0'), true);
    assert.equal(r.link('kube-ipvs0'), null);
  });

  test('a non-dummy link of that name is neither used nor deleted', () => {
    sh('ip', 'link', 'add', 'kube-ipvs0', 'type', 'bridge');
    assert.throws(() => r.ensureDummy('kube-ipvs0'), /is a bridge link/);
    assert.throws(() => r.deleteDummy('kube-ipvs0'), /not a dummy/);
    sh('ip', 'link', 'del', 'kube-ipvs0');
  });
});

describe('ipsets through ipset restore and save', () => {
  test('create, add, delete and destroy in restore scripts; save reads them back', async () => {
    const t = new IpsetTool(netnsRunner(NS));
    await t.restore(
      [
        'create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 -exist',
        'create KUBE-NODE-PORT-TCP bitmap:port range 0-65535 -exist',
        'add KUBE-CLUSTER-IP 10.96.0.10,tcp:80 -exist',
        'add KUBE-CLUSTER-IP 10.96.0.10,sctp:9999 -exist',
        'add KUBE-NODE-PORT-TCP 30080 -exist',
        '',
      ].join('\n'),
    );
    let saved = await t.save(['KUBE-CLUSTER-IP', 'KUBE-NODE-PORT-TCP', 'KUBE-OTHER']);
    assert.deepEqual([...saved.keys()].sort(), ['KUBE-CLUSTER-IP', 'KUBE-NODE-PORT-TCP']);
    assert.deepEqual([...saved.get('KUBE-CLUSTER-IP')!.entries].sort(), ['10.96.0.10,sctp:9999', '10.96.0.10,tcp:80']);
    assert.match(saved.get('KUBE-CLUSTER-IP')!.header, /^hash:ip,port family inet hashsize 1024 maxelem 65536/);
    await t.restore('del KUBE-CLUSTER-IP 10.96.0.10,tcp:80 -exist\ndel KUBE-CLUSTER-IP 10.96.0.99,tcp:80 -exist\n');
    saved = await t.save(['KUBE-CLUSTER-IP']);
    assert.deepEqual([...saved.get('KUBE-CLUSTER-IP')!.entries], ['10.96.0.10,sctp:9999']);
    assert.deepEqual((await t.destroy(['KUBE-CLUSTER-IP', 'KUBE-NODE-PORT-TCP', 'KUBE-OTHER'])).sort(), [
      'KUBE-CLUSTER-IP',
      'KUBE-NODE-PORT-TCP',
    ]);
    assert.equal((await t.save()).size, 0);
    assert.match(await t.version(), /^\d+\.\d+$/);
  });
});

describe("the ipvs dataplane's drift check at 1000 virtual servers", () => {
  // Last in the file: the sets, chains and kube-ipvs0 it leaves go with the namespace (a cleanup would
  // cost another half minute under emulation).
  test('finds nothing while in step, then a virtual server deleted by others; timed per run', async () => {
    const n = 1000;
    const state = syncStateFromObjects({
      services: Array.from({ length: n }, (_, i) => ({
        metadata: { namespace: 'ns', name: `s${i}` },
        spec: { clusterIP: `10.98.${i >> 8}.${i & 255}`, ports: [{ name: 'p', port: 80, protocol: 'TCP' }] },
      })) as never,
      slices: [],
      family: 'IPv4',
      nodeName: 'node1',
      nodeIPs: {},
      fullSync: true,
    });
    const kernel = await openKernel(netnsRunner(NS), runnerSysctl(netnsRunner(NS)), NS);
    const dp = new IpvsDataplane({
      config: {
        family: 'IPv4',
        masqueradeMark: 0x4000,
        masqueradeAll: false,
        localDetector: { kind: 'none' },
        nodePortAddresses: null,
        localhostNodePorts: false,
        localIPs: [],
      },
      ipvs: { scheduler: 'rr', excludeCIDRs: [], strictARP: false, tcpTimeout: 0, tcpFinTimeout: 0, udpTimeout: 0 },
      kernel,
      run: netnsRunner(NS),
      clock: realClock,
      syncPeriodMs: 3_600_000,
      driftCheckMs: 3_600_000, // checked by hand below
      netns: NS,
    });
    const drifts: string[] = [];
    dp.watchDrift((d) => drifts.push(d.reason));
    try {
      await dp.sync(state);
      assert.equal(kernel.ipvs.listServices().length, n);
      const runs = 5;
      const cpu = () => {
        const u = process.cpuUsage();
        return (u.user + u.system) / 1000;
      };
      let t0 = cpu();
      for (let i = 0; i < runs; i++) assert.equal(await dp.checkDrift(), null);
      const check = (cpu() - t0) / runs;
      t0 = cpu();
      for (let i = 0; i < runs; i++) kernel.ipvs.listServices();
      const ipvsDump = (cpu() - t0) / runs;
      console.log(
        `ipvs drift check, ${n} virtual servers and addresses: ${check.toFixed(1)} ms of CPU per run, ` +
          `${ipvsDump.toFixed(1)} ms of it the IPVS dump (emulated)`,
      );

      sh('ipvsadm', '-D', '-t', '10.98.1.7:80');
      const d = await dp.checkDrift();
      assert.equal(d?.reason, 'rules_changed');
      assert.match(d.detail, /^1 of 1000 IPVS virtual servers gone: TCP\/10\.98\.1\.7:80$/);
      assert.deepEqual(drifts, ['rules_changed']);
    } finally {
      dp.close();
      kernel.close();
    }
  });
});
