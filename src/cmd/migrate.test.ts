// `kube-proxy-ts migrate`: its flags, the node facts read from captured
// /proc and `ip` output (the IPVS facts cannot be made on a kernel without
// IPVS, so they are read from what such a kernel prints), and the report.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { hasCode } from '../core/errors.js';
import type { CommandRunner, ExecResult } from '../platform/exec.js';
import { migrateReportText, splitMigrateArgs, type MigrateReport } from './migrate.js';
import { parseIpAddr, parseProcIpvs, parseProcNet, parseSysctl, readNodeFacts } from './migratefacts.js';

// A node in IPVS mode: /proc/net/ip_vs with an IPv4 and an IPv6 virtual server, a firewall-mark service.
const PROC_IPVS = `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port Forward Weight ActiveConn InActConn
TCP  0A60000A:0050 rr
  -> 0AF40105:1F90      Masq    1      0          0
  -> 0AF40206:1F90      Masq    1      0          0
UDP  0A600035:0035 sh persistent 10800 FFFFFFFF
TCP  [fd00:0000:0000:0000:0000:0000:0000:000a]:01BB mh
FWM  00000001 wlc
`;

const PROC_TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0A00600A:2328 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
   2: 0A00A8C0:0016 0500A8C0:D431 01 00000000:00000000 02:00000000 00000000     0        0 3 4 0000000000000000 20 4 1 10 -1
`;

const PROC_TCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:0051 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 6 1 0000000000000000 100 0 0 10 0
   2: 0000FDFD000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 7 1 0000000000000000 100 0 0 10 0
`;

const PROC_UDP = `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  10: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 8 2 0000000000000000 0
  11: 0A00A8C0:A1B2 08080808:0035 01 00000000:00000000 00:00000000 00000000     0        0 9 2 0000000000000000 0
`;

const IP_ADDR = JSON.stringify([
  { ifindex: 1, ifname: 'lo', addr_info: [{ family: 'inet', local: '127.0.0.1' }] },
  { ifindex: 2, ifname: 'eth0', addr_info: [{ family: 'inet', local: '192.168.0.10' }] },
  {
    ifindex: 3,
    ifname: 'kube-ipvs0',
    addr_info: [
      { family: 'inet', local: '10.96.0.10' },
      { family: 'inet6', local: 'fd00::a' },
    ],
  },
]);

describe('migrate: node facts', () => {
  it('/proc/net/ip_vs: virtual servers with their schedulers (IPv4 in network order, IPv6 in full); FWM and real servers skipped', () => {
    assert.deepEqual(parseProcIpvs(PROC_IPVS), [
      { protocol: 'TCP', address: '10.96.0.10', port: 80, scheduler: 'rr' },
      { protocol: 'UDP', address: '10.96.0.53', port: 53, scheduler: 'sh' },
      { protocol: 'TCP', address: 'fd00::a', port: 443, scheduler: 'mh' },
    ]);
  });

  it('/proc/net/tcp{,6} and udp: listening sockets only (host-order words), connected ones left out', () => {
    assert.deepEqual(parseProcNet(PROC_TCP, 'TCP'), [
      { protocol: 'TCP', address: '10.96.0.10', port: 9000 },
      { protocol: 'TCP', address: '0.0.0.0', port: 22 },
    ]);
    assert.deepEqual(parseProcNet(PROC_TCP6, 'TCP'), [
      { protocol: 'TCP', address: '::', port: 80 },
      { protocol: 'TCP', address: '::1', port: 81 },
      { protocol: 'TCP', address: 'fdfd::1', port: 8080 },
    ]);
    assert.deepEqual(parseProcNet(PROC_UDP, 'UDP'), [{ protocol: 'UDP', address: '0.0.0.0', port: 53 }]);
  });

  it('ip -j addr and sysctls', () => {
    assert.deepEqual(
      parseIpAddr(IP_ADDR).map((a) => `${a.ifname} ${a.address}`),
      ['lo 127.0.0.1', 'eth0 192.168.0.10', 'kube-ipvs0 10.96.0.10', 'kube-ipvs0 fd00::a'],
    );
    assert.equal(parseSysctl('1\n'), 1);
    assert.equal(parseSysctl(''), null);
  });

  it('readNodeFacts: kube-ipvs0 apart, missing files tolerated, and nothing but reads run', async () => {
    const files: Record<string, string> = {
      '/proc/net/tcp': PROC_TCP,
      '/proc/net/udp': PROC_UDP,
      '/proc/net/ip_vs': PROC_IPVS,
      '/proc/sys/net/ipv4/conf/all/arp_ignore': '1\n',
      '/proc/sys/net/ipv4/conf/all/arp_announce': '2\n',
    };
    const ran: string[] = [];
    const run: CommandRunner = (cmd, args) => {
      ran.push([cmd, ...args].join(' '));
      const ok = (stdout: string): Promise<ExecResult> => Promise.resolve({ stdout, stderr: '', code: 0 });
      if (cmd === 'ip' && args.join(' ') === '-j addr show') return ok(IP_ADDR);
      if (cmd === 'cat' && files[args[0]!] !== undefined) return ok(files[args[0]!]!);
      return Promise.resolve({ stdout: '', stderr: 'No such file or directory', code: 1 });
    };
    const facts = await readNodeFacts(run);
    assert.deepEqual(facts.addresses, ['127.0.0.1', '192.168.0.10']);
    assert.deepEqual(facts.ipvsAddresses, ['10.96.0.10', 'fd00::a']);
    assert.equal(facts.virtualServers?.length, 3);
    assert.equal(facts.listeners.length, 3);
    assert.deepEqual([facts.arpIgnore, facts.arpAnnounce], [1, 2]);
    assert.ok(
      ran.every((c) => c === 'ip -j addr show' || /^cat \/proc\//.test(c)),
      ran.join('\n'),
    );
  });

  it('readNodeFacts without IPVS: no kube-ipvs0, no table', async () => {
    const run: CommandRunner = (cmd, args) =>
      Promise.resolve(
        cmd === 'ip' && args[0] === '-j'
          ? { stdout: '[]', stderr: '', code: 0 }
          : { stdout: '', stderr: 'missing', code: 1 },
      );
    const facts = await readNodeFacts(run);
    assert.equal(facts.ipvsAddresses, null);
    assert.equal(facts.virtualServers, null);
    assert.equal(facts.arpIgnore, null);
  });
});

describe('migrate: flags and report', () => {
  it('takes --to, --netns and --output out of the proxy flags', () => {
    assert.deepEqual(splitMigrateArgs(['--to', 'nftables', '--proxy-mode', 'ipvs', '--netns=n1', '-o']), {
      to: 'nftables',
      rest: ['--proxy-mode', 'ipvs', '-o'],
      netns: 'n1',
      output: 'text',
    });
    assert.equal(splitMigrateArgs(['--to=ebpf', '--output', 'json']).output, 'json');
  });

  it('refuses a missing or unknown --to, and --to ipvs with a reason', () => {
    const code = (argv: string[]) => {
      try {
        splitMigrateArgs(argv);
        return 'ok';
      } catch (e) {
        return hasCode(e, 'KPT_FLAG_INVALID') ? 'flag' : hasCode(e, 'KPT_UNSUPPORTED') ? 'unsupported' : 'other';
      }
    };
    assert.equal(code([]), 'flag');
    assert.equal(code(['--to', 'userspace']), 'flag');
    assert.equal(code(['--to', 'nftables', '--output', 'yaml']), 'flag');
    assert.equal(code(['--to', 'ipvs']), 'unsupported');
  });

  it('the text report: where the mode came from, then each Service with what changes and what to do', () => {
    const r: MigrateReport = {
      node: 'node1',
      from: 'ipvs',
      fromSource: 'configured',
      live: 'iptables',
      to: 'nftables',
      services: 2,
      findings: [
        { kind: 'strict-arp', service: null, changes: false, change: 'c0', action: 'a0' },
        { kind: 'scheduler', service: 'ns/web', changes: true, change: 'c1', action: 'a1' },
      ],
    };
    assert.equal(
      migrateReportText(r),
      [
        '# migrate ipvs -> nftables on node node1: ipvs is the configured mode (--proxy-mode or the config file)',
        "# note: the node holds iptables mode's state; to check a move from it, pass --proxy-mode iptables",
        '# 2 Service(s): 1 change(s), 1 note(s)',
        '',
        '(this node)',
        '  note   strict-arp: c0',
        '         do: a0',
        '',
        'ns/web',
        '  CHANGE scheduler: c1',
        '         do: a1',
        '',
      ].join('\n'),
    );
  });
});
