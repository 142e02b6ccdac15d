// IpvsDataplane on a real IPVS kernel (the QEMU guest), in one network
// namespace: the kernel ends up holding what the Fake holds after the same
// syncs (virtual and real servers, set members, kube-ipvs0's addresses,
// rules), a partial sync sends only the change, `explain` reads the live
// state back and traces through it (and a saved bundle of the tools' output
// the same way), `diff` finds nothing to change after a
// sync and exactly the change after a new endpoint, and cleanup leaves
// another tool's virtual server, set and chain alone.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../src/core/types.js';
import { Fake } from '../../src/dataplane/ipvs/fake.js';
import { realClock } from '../../src/platform/clock.js';
import { netnsRunner, type CommandRunner } from '../../src/platform/exec.js';
import { runnerSysctl } from '../../src/platform/iptables/sysctl.js';
import { cleanupIpvsLeftovers } from '../../src/platform/ipvs/cleanup.js';
import { IpvsDataplane, type IpvsModeOptions } from '../../src/platform/ipvs/dataplane.js';
import { fakeKernel, openKernel, type IpvsKernelDeps } from '../../src/platform/ipvs/kernel.js';
import { runExplain } from '../../src/cmd/explain.js';
import type { ServiceExplanation } from '../../src/cmd/explainservice.js';
import { statusAfterSync } from '../cases/status.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { diffIpvsFamily } from '../../src/cmd/modes/ipvs/diff.js';
import { readLiveIpvs } from '../../src/cmd/modes/ipvs/live.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../netns/cleanup.js';
import { newPrefix } from '../netns/names.js';

const NS = `${newPrefix()}dp`;
const sh = (...args: string[]) => execFileSync('ip', ['netns', 'exec', NS, ...args], { encoding: 'utf8' });
const NODE_IP = '192.168.60.2';

const config: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.244.0.0/16'] },
  nodePortAddresses: null,
  localhostNodePorts: false,
  localIPs: [NODE_IP],
};
const opts: IpvsModeOptions = {
  scheduler: 'rr',
  excludeCIDRs: [],
  strictARP: false,
  tcpTimeout: 0,
  tcpFinTimeout: 0,
  udpTimeout: 0,
};

function state(eps: Record<string, string[]>, full = true, changed?: string[]): SyncState {
  const names = Object.keys(eps);
  return syncStateFromObjects({
    services: names.map((n, i) => ({
      metadata: { namespace: 'ns', name: n },
      spec: {
        type: 'LoadBalancer',
        clusterIP: `10.96.7.${i + 1}`,
        externalIPs: [`192.168.61.${i + 1}`],
        loadBalancerSourceRanges: ['203.0.113.0/25'],
        ports: [
          { name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, nodePort: 31000 + i },
          { name: 'dns', port: 53, protocol: 'UDP', targetPort: 5353, nodePort: 32000 + i },
        ],
      },
      status: { loadBalancer: { ingress: [{ ip: `198.51.100.${i + 1}` }] } },
    })) as never,
    slices: names.map((n) => ({
      metadata: { namespace: 'ns', name: `${n}-1`, labels: { 'kubernetes.io/service-name': n } },
      addressType: 'IPv4',
      endpoints: eps[n]!.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: 'node1' })),
      ports: [
        { name: 'http', port: 8080, protocol: 'TCP' },
        { name: 'dns', port: 5353, protocol: 'UDP' },
      ],
    })) as never,
    family: 'IPv4',
    nodeName: 'node1',
    nodeIPs: { IPv4: NODE_IP },
    fullSync: full,
    ...(changed ? { changedServices: changed } : {}),
  });
}

describe('IpvsDataplane against the real kernel', { concurrency: false }, () => {
  let kernel: IpvsKernelDeps;
  let dp: IpvsDataplane;
  const fake = new Fake({ nodeAddresses: ['127.0.0.1', NODE_IP] });
  let fdp: IpvsDataplane;
  const run = () => netnsRunner(NS);
  let iptablesProcesses = 0;

  before(async () => {
    trackNamespace(NS);
    execFileSync('ip', ['netns', 'add', NS]);
    sh('ip', 'link', 'set', 'lo', 'up');
    sh('ip', 'link', 'add', 'eth0', 'type', 'dummy');
    sh('ip', 'addr', 'add', `${NODE_IP}/24`, 'dev', 'eth0');
    sh('ip', 'link', 'set', 'eth0', 'up');
    // The kernel's iptables processes are counted: a partial sync whose rules did not change runs none.
    const counted: CommandRunner = (cmd, args, o) => {
      if (/^ip6?tables/.test(cmd)) iptablesProcesses++;
      return run()(cmd, args, o);
    };
    kernel = await openKernel(counted, runnerSysctl(run()), NS);
    const common = { config, ipvs: opts, run: run(), clock: realClock, syncPeriodMs: 3_600_000 };
    dp = new IpvsDataplane({ ...common, kernel });
    fdp = new IpvsDataplane({ ...common, kernel: fakeKernel(fake) });
  });
  after(() => {
    dp?.close();
    fdp?.close();
    kernel?.close();
    deleteNamespaceSync(NS);
    untrackNamespace(NS);
  });

  test('after the same syncs the kernel holds exactly what the Fake holds', async () => {
    const s1 = state({ a: ['10.244.1.5', '10.244.2.6'], b: ['10.244.1.7'] });
    await dp.sync(s1);
    await fdp.sync(s1);
    const s2 = state({ a: ['10.244.1.5'], b: ['10.244.1.7', '10.244.3.8'] }, false, ['ns/a', 'ns/b']);
    const out = await dp.sync(s2);
    await fdp.sync(s2);
    assert.equal(out.partial, true);
    const live = (await readLiveIpvs(run(), NS, 'IPv4')).fake;
    const part = (f: Fake, name: string) =>
      f
        .dump()
        .split(/^# /m)
        .find((x) => x.startsWith(name))!
        .split('\n')
        .slice(1)
        .filter(Boolean)
        .sort();
    for (const name of ['ipvsadm -Sn', 'ip addr show kube-ipvs0', 'ipset save'])
      assert.deepEqual(part(live, name), part(fake, name), name);
    for (const table of ['nat', 'filter'] as const)
      for (const chain of [
        'KUBE-SERVICES',
        'KUBE-POSTROUTING',
        'KUBE-NODE-PORT',
        'KUBE-PROXY-FIREWALL',
        'KUBE-IPVS-FILTER',
      ])
        assert.deepEqual(
          live.rules(table, chain).map(tokensOf),
          fake.rules(table, chain).map(tokensOf),
          `${table}/${chain}`,
        );
    // The removed real server of a TCP port is draining at weight 0, as in the Fake.
    assert.match(sh('ipvsadm', '-Ln', '-t', '10.96.7.1:80'), /10\.244\.2\.6:8080\s+Masq\s+0/);
  });

  test('a one-endpoint change is a handful of requests and no process for iptables', async () => {
    const s = state({ a: ['10.244.1.5', '10.244.4.9'], b: ['10.244.1.7', '10.244.3.8'] }, false, ['ns/a']);
    const before = iptablesProcesses;
    const out = await dp.sync(s);
    assert.equal(out.partial, true);
    assert.equal(iptablesProcesses - before, 0, 'no iptables-save or iptables-restore');
    // ClusterIP, external IP, LB IP and one NodePort per node address, TCP and UDP: one add each (+ UDP's 10.244.2.6 is gone).
    assert.ok((out.counters!['ipvsRequests'] as number) <= 12, JSON.stringify(out.counters));
  });

  test('explain reads the live state and traces through it', async () => {
    let text = '';
    const io = { out: (s: string) => (text += s), err: (s: string) => (text += s) };
    const code = await runExplain(
      ['--netns', NS, '--mode', 'ipvs', '--src', '203.0.113.9', '--dst', '198.51.100.1', '--port', '80'],
      io,
    );
    assert.equal(code, 0, text);
    assert.match(text, /ipvs: TCP\/198\.51\.100\.1:80 rr/);
    assert.match(text, /endpoint 10\.244\.1\.5:8080/);
    assert.match(text, /endpoint 10\.244\.4\.9:8080/);
    assert.match(text, /Masquerade: yes/);
    text = '';
    await runExplain(['--netns', NS, '--src', '203.0.113.200', '--dst', '198.51.100.1', '--port', '80'], io);
    assert.match(text, /\(mode ipvs\)/, 'detected from the nat table');
    assert.match(text, /Verdict:\s+DROP/, 'outside loadBalancerSourceRanges');
  });

  test('explain --from: a bundle of the tools output gives the live answers; --service with a saved status', async () => {
    const json = async (...args: string[]) => {
      let out = '';
      let err = '';
      const code = await runExplain([...args, '-o', 'json'], { out: (s) => (out += s), err: (s) => (err += s) });
      assert.equal(code, 0, `${args.join(' ')}: ${err}`);
      return JSON.parse(out) as unknown;
    };
    const dir = mkdtempSync(join(tmpdir(), 'kpt-ipvs-explain-'));
    try {
      const bundle = join(dir, 'bundle');
      // What a support engineer collects on the node.
      writeFileSync(bundle, sh('sh', '-c', 'ipvsadm -Sn; ipset save; iptables-save -c; ip -o addr'));
      const packets = [
        ['--src', '203.0.113.9', '--dst', '198.51.100.1', '--port', '80'],
        ['--src', '203.0.113.200', '--dst', '198.51.100.1', '--port', '80'],
        ['--src', '10.244.1.5', '--dst', '10.96.7.2', '--port', '53', '--protocol', 'udp'],
        ['--src', '203.0.113.9', '--dst', NODE_IP, '--port', '31000'],
      ];
      for (const p of packets) assert.deepEqual(await json('--from', bundle, ...p), await json('--netns', NS, ...p));
      const st = state({ a: ['10.244.1.5', '10.244.4.9'], b: ['10.244.1.7', '10.244.3.8'] });
      const status = join(dir, 'status.json');
      writeFileSync(status, JSON.stringify(statusAfterSync('ipvs', st)));
      const live = (await json('--netns', NS, '--status', status, '--service', 'ns/a')) as ServiceExplanation[];
      assert.deepEqual(await json('--from', bundle, '--status', status, '--service', 'ns/a'), live);
      const v = live[0]!;
      assert.equal(v.mode, 'ipvs');
      assert.deepEqual(v.addresses.map((a) => `${a.kind} ${a.address ?? 'node'}:${a.port}/${a.protocol}`).sort(), [
        'cluster IP 10.96.7.1:53/UDP',
        'cluster IP 10.96.7.1:80/TCP',
        'external IP 192.168.61.1:53/UDP',
        'external IP 192.168.61.1:80/TCP',
        'load balancer IP 198.51.100.1:53/UDP',
        'load balancer IP 198.51.100.1:80/TCP',
        'node port node:31000/TCP',
        'node port node:32000/UDP',
      ]);
      const lb = v.addresses.find((a) => a.address === '198.51.100.1' && a.port === 80)!.views[0]!;
      assert.equal(lb.verdict, 'DNAT', lb.summary);
      assert.deepEqual(lb.candidates.map((c) => c.endpoint).sort(), ['10.244.1.5:8080', '10.244.4.9:8080']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('diff: nothing to change after a sync; exactly a new endpoint after one appears', async () => {
    const s = state({ a: ['10.244.1.5', '10.244.4.9'], b: ['10.244.1.7', '10.244.3.8'] });
    const input = { run: run(), netns: NS, family: 'IPv4' as const, config, ipvs: opts, syncPeriodMs: 3_600_000 };
    // A real server drained to weight 0 by an earlier test is deleted by the next sync once the kernel
    // has expired its last connection (TIME_WAIT lasts 2 min). When that happens depends on the guest's
    // speed, so such a removal may show in either diff; every other line must not.
    const drained = (text: string) => text.split('\n').filter((l) => /^- .* -w 0$/.test(l)).length;
    const same = await diffIpvsFamily({ ...input, state: s });
    assert.equal(same.changes - drained(same.text), 0, same.text);
    const more = await diffIpvsFamily({
      ...input,
      state: state({ a: ['10.244.1.5', '10.244.4.9'], b: ['10.244.1.7', '10.244.3.8', '10.244.5.5'] }),
    });
    assert.match(more.text, /\+ -a -t 10\.96\.7\.2:80 -r 10\.244\.5\.5:8080 -m -w 1/);
    assert.match(more.text, /\+ add KUBE-LOOP-BACK 10\.244\.5\.5,tcp:8080,10\.244\.5\.5/);
    const removed = more.text.split('\n').filter((l) => l.startsWith('- '));
    assert.equal(removed.length, drained(more.text), `nothing removed but drained real servers:\n${more.text}`);
    assert.equal(sh('ipvsadm', '-Sn').includes('10.244.5.5'), false, 'diff changed nothing');
  });

  test('cleanup removes only our state', async () => {
    sh('ipvsadm', '-A', '-t', '192.168.60.99:443', '-s', 'wrr');
    sh('ipset', 'create', 'OTHER', 'hash:ip');
    sh('iptables', '-N', 'OTHER-CHAIN');
    const r = await cleanupIpvsLeftovers(kernel, { families: ['IPv4', 'IPv6'] });
    assert.deepEqual(r.errors, []);
    assert.equal(sh('ipvsadm', '-Sn').trim(), '-A -t 192.168.60.99:443 -s wrr');
    assert.equal(sh('ipset', 'list', '-n').trim(), 'OTHER');
    assert.match(sh('iptables-save'), /:OTHER-CHAIN/);
    assert.doesNotMatch(sh('iptables-save'), /KUBE-/);
    assert.throws(() => sh('ip', 'link', 'show', 'kube-ipvs0'));
  });
});

/**
 * A rule as a sorted multiset of its words, after the rewrites iptables-save
 * makes (MARK spelled --set-xmark, REJECT's default spelled out, /32 added):
 * equal for the rule we wrote and the one the kernel prints back.
 */
function tokensOf(rule: string): string {
  const r = rule
    .replace(/--or-mark (\S+)/, '--set-xmark $1/$1')
    .replace(/--xor-mark (\S+)/, '--set-xmark $1/0x0')
    .replace(/-j REJECT$/, '-j REJECT --reject-with icmp-port-unreachable')
    .replace(/(-[sd]) (\d+\.\d+\.\d+\.\d+)(?=\s|$)/g, '$1 $2/32');
  return (r.match(/"[^"]*"|\S+/g) ?? []).sort().join(' ');
}
