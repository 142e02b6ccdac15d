// IptablesDataplane on the real kernel, inside ONE fresh network namespace
// (kpt-ipt-<pid>-<rand>), never the root one: full and partial syncs, the
// canary, foreign rules and chains, cleanup, route_localnet, and one real
// packet through a ClusterIP DNAT. Runs as root, serially.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../src/core/types.js';
import { netnsRunner, type CommandRunner } from '../../src/platform/exec.js';
import { IptablesDataplane, runnerSysctl } from '../../src/platform/iptables/index.js';
import { realClock } from '../../src/platform/clock.js';
import { service, slice } from '../cases/fixtures.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../netns/cleanup.js';

const NS = `kpt-ipt-${process.pid}-${randomBytes(2).toString('hex')}`;
const EP_IP = '10.180.0.1';
const CLUSTER_IP = '172.30.0.10';

const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8'] },
  nodePortAddresses: null,
  localhostNodePorts: true,
  localIPs: ['127.0.0.1', '192.168.0.2', EP_IP],
};

/** Services s0..s(n-1); s0 is the one the packet test uses; `ep1` moves s1's endpoint. */
function state(opts: { full: boolean; changed?: string[]; ep1?: string }): SyncState {
  const svcs = [
    service('s0', { clusterIP: CLUSTER_IP }, [{ name: 'http', port: 80, targetPort: 8080 }]),
    service('s1', { clusterIP: '172.30.0.11' }, [{ name: 'http', port: 80 }]),
    service('s2', { clusterIP: '172.30.0.12' }, [{ name: 'http', port: 80 }]),
  ];
  const slices = [
    slice('s0', [{ name: 'http', port: 8080 }], [{ ip: EP_IP, node: 'test-node' }]),
    slice('s1', [{ name: 'http', port: 80 }], [{ ip: opts.ep1 ?? '10.181.0.1' }, { ip: '10.181.0.2' }]),
    slice('s2', [{ name: 'http', port: 80 }], [{ ip: '10.182.0.1' }]),
  ];
  return syncStateFromObjects({
    services: svcs,
    slices,
    family: 'IPv4',
    nodeIPs: { IPv4: '192.168.0.2' },
    fullSync: opts.full,
    ...(opts.changed ? { changedServices: opts.changed } : {}),
  });
}

function sh(...args: string[]): string {
  return execFileSync('ip', ['netns', 'exec', NS, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
}
const save = (table?: string) => sh('iptables-save', ...(table ? ['-t', table] : []));
/** iptables-save without its timestamp comments and packet counters, for comparisons. */
const norm = (text: string) => text.replace(/^#.*\n/gm, '').replace(/\[\d+:\d+\]/g, '');
const chainsOf = (text: string) => [...text.matchAll(/^:(\S+) /gm)].map((m) => m[1]!);
/** nf_tables rule handles of one chain: new handles mean the chain was rewritten. */
const handles = (chain: string) =>
  [...sh('nft', '-a', 'list', 'chain', 'ip', 'nat', chain).matchAll(/# handle (\d+)/g)].map((m) => m[1]).join(',');

describe('iptables dataplane on the real kernel', { concurrency: false }, () => {
  let run: CommandRunner;
  let dp: IptablesDataplane;
  const rootRouteLocalnet = readFileSync('/proc/sys/net/ipv4/conf/all/route_localnet', 'utf8');

  before(() => {
    trackNamespace(NS);
    execFileSync('ip', ['netns', 'add', NS]);
    sh('ip', 'link', 'set', 'lo', 'up');
    // No dummy driver on this kernel: a veth pair with both ends in the namespace.
    sh('ip', 'link', 'add', 'dummy0', 'type', 'veth', 'peer', 'name', 'dummy1');
    sh('ip', 'link', 'set', 'dummy0', 'up');
    sh('ip', 'link', 'set', 'dummy1', 'up');
    sh('ip', 'addr', 'add', `${EP_IP}/32`, 'dev', 'dummy0');
    sh('ip', 'addr', 'add', '192.168.0.2/24', 'dev', 'dummy0');
    sh('ip', 'route', 'add', '172.30.0.0/16', 'dev', 'dummy0');
    // Foreign state that must survive: a nat chain + jump, a filter rule, and
    // a chain named like kubelet's KUBE-MARK-DROP.
    execFileSync('ip', ['netns', 'exec', NS, 'iptables-restore', '--noflush'], {
      input: [
        '*nat',
        ':FOREIGN-NAT - [0:0]',
        '-A FOREIGN-NAT -p udp --dport 9999 -j RETURN',
        '-A PREROUTING -s 198.51.100.0/24 -j FOREIGN-NAT',
        'COMMIT',
        '*filter',
        ':KUBE-MARK-DROP - [0:0]',
        '-A KUBE-MARK-DROP -j MARK --or-mark 0x8000',
        '-A INPUT -p tcp --dport 2222 -j ACCEPT',
        'COMMIT',
        '',
      ].join('\n'),
    });
    run = netnsRunner(NS);
    dp = new IptablesDataplane({
      config: CONFIG,
      run,
      sysctl: runnerSysctl(run),
      clock: realClock,
      syncPeriodMs: 30_000,
    });
  });

  after(() => {
    deleteNamespaceSync(NS);
    untrackNamespace(NS);
  });

  it('full sync: our chains, canaries and jump rules; route_localnet set only in the namespace', async () => {
    const out = await dp.sync(state({ full: true }));
    assert.equal(out.partial, false);
    const all = save();
    for (const c of ['KUBE-SERVICES', 'KUBE-NODEPORTS', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ', 'KUBE-PROXY-CANARY'])
      assert.ok(chainsOf(save('nat')).includes(c), c);
    for (const c of [
      'KUBE-SERVICES',
      'KUBE-EXTERNAL-SERVICES',
      'KUBE-FORWARD',
      'KUBE-NODEPORTS',
      'KUBE-PROXY-FIREWALL',
      'KUBE-FIREWALL',
      'KUBE-PROXY-CANARY',
    ]) {
      assert.ok(chainsOf(save('filter')).includes(c), c);
    }
    assert.ok(chainsOf(save('mangle')).includes('KUBE-PROXY-CANARY'));
    assert.equal(chainsOf(save('nat')).filter((c) => c.startsWith('KUBE-SVC-')).length, 3);
    assert.equal(chainsOf(save('nat')).filter((c) => c.startsWith('KUBE-SEP-')).length, 4);
    assert.match(all, /-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES/);
    assert.match(all, /-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES/);
    assert.match(all, /-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING/);
    assert.match(
      all,
      /-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES/,
    );
    assert.match(all, /-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD/);
    assert.match(all, /-A INPUT -j KUBE-FIREWALL/);
    assert.match(all, /MASQUERADE --random-fully/);
    assert.equal(sh('sysctl', '-n', 'net.ipv4.conf.all.route_localnet').trim(), '1');
    assert.equal(readFileSync('/proc/sys/net/ipv4/conf/all/route_localnet', 'utf8'), rootRouteLocalnet);
    // Jump rules are inserted once, even after another full sync.
    await dp.sync(state({ full: true }));
    assert.equal(save('nat').match(/-A PREROUTING .*-j KUBE-SERVICES/g)?.length, 1);
  });

  it('a ClusterIP packet from a process in the namespace is DNATed to the endpoint listener', async () => {
    const script = `
      const net = require('node:net');
      const srv = net.createServer((c) => { c.end('pong from ' + c.localAddress + ':' + c.localPort); });
      srv.listen(8080, '${EP_IP}', () => {
        const c = net.connect({ host: '${CLUSTER_IP}', port: 80 });
        let got = '';
        c.on('data', (d) => { got += d; });
        c.on('end', () => { console.log(got); srv.close(); });
        c.on('error', (e) => { console.log('error ' + e.code); process.exit(2); });
        c.setTimeout(5000, () => { console.log('timeout'); process.exit(3); });
      });`;
    const r = await run('node', ['-e', script]);
    assert.equal(r.stdout.trim(), `pong from ${EP_IP}:8080`);
  });

  it('partial sync rewrites only the changed service chains', async () => {
    const nat = save('nat');
    const svcChain = (ip: string) =>
      new RegExp(`-A KUBE-SERVICES .*-d ${ip.replaceAll('.', '\\.')}/32 .*-j (KUBE-SVC-\\S+)`).exec(nat)![1]!;
    const s1 = svcChain('172.30.0.11');
    const s2 = svcChain('172.30.0.12');
    const [h1, h2] = [handles(s1), handles(s2)];
    const out = await dp.sync(state({ full: false, changed: ['ns1/s1'], ep1: '10.181.0.9' }));
    assert.equal(out.partial, true);
    assert.equal(out.counters?.canaryMissing, 0);
    assert.equal(handles(s2), h2, 'unchanged service chain must not be rewritten');
    assert.notEqual(handles(s1), h1, 'changed service chain must be rewritten');
    const after = save('nat');
    assert.match(after, /--to-destination 10\.181\.0\.9:80/);
    assert.doesNotMatch(after, /--to-destination 10\.181\.0\.1:80/);
    assert.equal(
      chainsOf(after).filter((c) => c.startsWith('KUBE-SEP-')).length,
      4,
      'the stale endpoint chain is deleted',
    );
  });

  it('a deleted canary is detected and the next sync is full', async () => {
    sh('iptables', '-t', 'mangle', '-F', 'KUBE-PROXY-CANARY');
    sh('iptables', '-t', 'mangle', '-X', 'KUBE-PROXY-CANARY');
    const out = await dp.sync(state({ full: false, changed: [] }));
    assert.equal(out.partial, false);
    assert.equal(out.counters?.canaryMissing, 1);
    assert.ok(chainsOf(save('mangle')).includes('KUBE-PROXY-CANARY'));
  });

  it('foreign rules and chains survive syncs and cleanup; cleanup leaves none of our chains or jumps', async () => {
    await dp.sync(state({ full: true }));
    await dp.cleanup();
    const all = save();
    assert.match(all, /:FOREIGN-NAT - /);
    assert.match(all, /-A FOREIGN-NAT -p udp -m udp --dport 9999 -j RETURN/);
    assert.match(all, /-A PREROUTING -s 198\.51\.100\.0\/24 -j FOREIGN-NAT/);
    assert.match(all, /:KUBE-MARK-DROP - /);
    assert.match(all, /-A KUBE-MARK-DROP -j MARK --set-xmark 0x8000\/0x8000/);
    assert.match(all, /-A INPUT -p tcp -m tcp --dport 2222 -j ACCEPT/);
    // KUBE-FIREWALL (and its two jumps) is kubelet's too; upstream cleanup keeps it.
    const ours = chainsOf(all).filter((c) => c.startsWith('KUBE-') && c !== 'KUBE-MARK-DROP' && c !== 'KUBE-FIREWALL');
    assert.deepEqual(ours, []);
    const jumps = all.split('\n').filter((l) => /^-A (PREROUTING|INPUT|OUTPUT|FORWARD|POSTROUTING) .*-j KUBE-/.test(l));
    assert.deepEqual(jumps, ['-A INPUT -j KUBE-FIREWALL', '-A OUTPUT -j KUBE-FIREWALL']);
  });

  it('the whole-table cache request (-S) yields exactly the ruleset of a plain restore', async () => {
    const dump = async (mode: 'always' | 'never') => {
      const d = new IptablesDataplane({
        config: CONFIG,
        run,
        sysctl: runnerSysctl(run),
        clock: realClock,
        syncPeriodMs: 30_000,
        wholeTableCache: mode,
      });
      const out = await d.sync(state({ full: true }));
      assert.equal(out.counters?.wholeTableCache, mode === 'always' ? 1 : 0);
      const text = norm(save());
      await d.cleanup();
      return text;
    };
    const withCache = await dump('always');
    assert.equal(withCache, await dump('never'));
    assert.match(withCache, /KUBE-SVC-/);
  });

  // Also the regression test for 'always' on a table that does not exist yet:
  // iptables-nft then fails `-I <built-in> 1` inside a restore carrying `-S`.
  it('IPv6: ip6tables full sync, partial sync and cleanup; the IPv4 ruleset is left alone', async () => {
    const v4Before = norm(save());
    const v6 = new IptablesDataplane({
      config: {
        ...CONFIG,
        family: 'IPv6',
        localDetector: { kind: 'cidr', cidrs: ['fd00:10::/64'] },
        localIPs: ['::1', '2001:db8::2'],
      },
      run,
      sysctl: runnerSysctl(run),
      clock: realClock,
      syncPeriodMs: 30_000,
      wholeTableCache: 'always',
    });
    const svcs = [service('v6', { clusterIP: 'fd00:172:30::10' }, [{ name: 'http', port: 80 }])];
    const st = (ep: string, full: boolean) =>
      syncStateFromObjects({
        services: svcs,
        slices: [slice('v6', [{ name: 'http', port: 80 }], [{ ip: ep }])],
        family: 'IPv6',
        nodeIPs: { IPv6: '2001:db8::2' },
        fullSync: full,
        changedServices: ['ns1/v6'],
      });
    assert.equal((await v6.sync(st('fd00:10::5', true))).partial, false);
    assert.equal((await v6.sync(st('fd00:10::6', false))).partial, true);
    const s6 = sh('ip6tables-save');
    assert.match(s6, /-j DNAT --to-destination \[fd00:10::6\]:80/);
    assert.doesNotMatch(s6, /fd00:10::5/);
    assert.match(s6, /-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES/);
    assert.doesNotMatch(s6, /KUBE-FIREWALL/, 'no localhost NodePorts on IPv6');
    assert.equal(norm(save()), v4Before);
    await v6.cleanup();
    assert.deepEqual(
      chainsOf(sh('ip6tables-save')).filter((c) => c.startsWith('KUBE-')),
      [],
    );
  });
});
