// explain's flag parsing and text output, and diff's own flags (the kernel
// and API server parts are covered by test/e2e/tools-*.test.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hasCode } from '../core/errors.js';
import { splitDiffArgs } from './diff.js';
import { parseExplainArgs } from './explain.js';
import { explanationText, serviceFromComment, summarize, type Explanation } from './explainview.js';

const invalid = (e: unknown) => hasCode(e, 'KPT_FLAG_INVALID');

test('parseExplainArgs: required flags, normalised addresses, defaults', () => {
  const v6 = parseExplainArgs(['--src', 'fd00:10::5', '--dst', 'fd00:172:30::0:a', '--port', '80']);
  assert.ok(
    v6 !== 'help' &&
      v6.kind === 'packet' &&
      v6.dst === 'fd00:172:30::a' &&
      v6.protocol === 'TCP' &&
      v6.output === 'text',
  );
  assert.throws(() => parseExplainArgs(['--src', '10.0.0.5', '--dst', 'fd00::1', '--port', '80']), /same IP family/);
  const ok = parseExplainArgs([
    '--src',
    '10.0.0.5',
    '--dst',
    '172.30.0.10',
    '--port',
    '53',
    '--protocol',
    'udp',
    '--local-ip',
    '192.168.0.2',
    '--netns',
    'x',
    '-o',
    'json',
  ]);
  assert.deepEqual(ok, {
    kind: 'packet',
    from: null,
    statusFile: null,
    src: '10.0.0.5',
    dst: '172.30.0.10',
    port: 53,
    protocol: 'UDP',
    mode: null,
    netns: 'x',
    iif: null,
    localIPs: ['192.168.0.2'],
    output: 'json',
    sport: null,
    pinRoot: '/sys/fs/bpf/kube-proxy-ts',
    address: '127.0.0.1:10249',
  });
  assert.equal(parseExplainArgs(['--help']), 'help');
  for (const bad of [
    ['--dst', '172.30.0.10', '--port', '80'],
    ['--src', '10.0.0.5', '--dst', '172.30.0.10', '--port', '0'],
    ['--src', '10.0.0.5', '--dst', '172.30.0.10', '--port', '80x'],
    ['--src', '10.0.0.5', '--dst', '172.30.0.10', '--port', '80', '--protocol', 'icmp'],
    ['--src', '10.0.0.5', '--dst', '172.30.0.10', '--port', '80', '--mode', 'iptables-legacy'],
    ['--src', '10.0.0.5', '--dst', '172.30.0.10', '--port', '80', '--output', 'yaml'],
  ])
    assert.throws(() => parseExplainArgs(bad), invalid, bad.join(' '));
  assert.throws(() => parseExplainArgs(['--bogus']), /Unknown option/);
});

test('parseExplainArgs --service and --from: a Service instead of a packet, a file instead of the kernel', () => {
  assert.deepEqual(parseExplainArgs(['--service', 'ns1/s1', '--from', 'dump.txt', '--local-ip', '192.168.0.2']), {
    kind: 'service',
    service: 'ns1/s1',
    src: null,
    mode: null,
    netns: null,
    localIPs: ['192.168.0.2'],
    output: 'text',
    from: 'dump.txt',
    statusFile: null,
    address: '127.0.0.1:10249',
    pinRoot: '/sys/fs/bpf/kube-proxy-ts',
  });
  // Every mode has --service; ebpf reads the maps, ipvs and userspace ask the proxy at --address.
  for (const mode of ['ebpf', 'ipvs', 'userspace'])
    assert.equal((parseExplainArgs(['--service', 'ns1/s1', '--mode', mode]) as { mode: string }).mode, mode);
  assert.deepEqual(parseExplainArgs(['--save', 'maps.json', '--mode', 'ebpf']), {
    kind: 'save',
    file: 'maps.json',
    mode: 'ebpf',
    netns: null,
    pinRoot: '/sys/fs/bpf/kube-proxy-ts',
  });
  const p = parseExplainArgs(['--src', '10.0.0.5', '--dst', '172.30.0.10', '--port', '80', '--from', 'f']);
  assert.ok(p !== 'help' && p.kind === 'packet' && p.from === 'f');
  for (const bad of [
    ['--service', 'ns1'],
    ['--service', 'ns1/s1', '--dst', '172.30.0.10'],
    ['--service', 'ns1/s1', '--port', '80'],
    ['--service', 'ns1/s1', '--src', 'x'],
    ['--service', 'ns1/s1', '--from', 'f', '--netns', 'n'],
    ['--save', 'f', '--src', '10.0.0.5'],
    ['--save', 'f', '--from', 'g'],
  ])
    assert.throws(() => parseExplainArgs(bad), invalid, bad.join(' '));
});

test('serviceFromComment takes the ns/name:port of kube-proxy comments only', () => {
  assert.equal(serviceFromComment('ns1/s0:http cluster IP'), 'ns1/s0:http');
  assert.equal(serviceFromComment('ns1/s0:http'), 'ns1/s0:http');
  assert.equal(serviceFromComment('default/kubernetes:https -> 10.0.0.1:6443'), 'default/kubernetes:https');
  assert.equal(serviceFromComment('kubernetes service portals'), null);
  assert.equal(serviceFromComment(null), null);
});

test('summary and text: candidates with percentages, masquerade, no match', () => {
  const cands = [
    { endpoint: '10.180.0.1:8080', probability: 1 / 3 },
    { endpoint: '10.180.0.2:8080', probability: 2 / 3 },
  ];
  assert.equal(
    summarize('ns1/s0:http', 'DNAT', cands, true),
    'ns1/s0:http: DNAT to one of 2 endpoints at random: 10.180.0.1:8080 (33.3%), 10.180.0.2:8080 (66.7%); masqueraded (SNAT to the node address)',
  );
  assert.equal(summarize(null, 'NONE', [], false), 'not a service address: no kube-proxy rule matched this packet');
  const e: Explanation = {
    mode: 'iptables',
    packet: { src: '10.0.0.5', dst: '172.30.0.10', port: 80, protocol: 'TCP' },
    service: 'ns1/s0:http',
    verdict: 'DNAT',
    candidates: cands,
    masquerade: false,
    notUnderstood: ['filter/INPUT: -m set --match-set x src -j DROP'],
    steps: [
      { where: 'nat/PREROUTING', rule: '-j KUBE-SERVICES', comment: null, depth: 0, probability: 1 },
      {
        where: 'nat/KUBE-SVC-X',
        rule: '-m statistic --mode random --probability 0.33 -j KUBE-SEP-A',
        comment: null,
        depth: 2,
        probability: 1 / 3,
      },
    ],
    summary: 'x',
  };
  const t = explanationText(e);
  assert.match(t, /^Packet TCP 10\.0\.0\.5 -> 172\.30\.0\.10:80 \(mode iptables\)$/m);
  assert.match(t, /^ {2}nat\/PREROUTING: -j KUBE-SERVICES$/m);
  assert.match(t, /^ {6}nat\/KUBE-SVC-X: .* \[p=33\.3%\]$/m);
  assert.match(t, /^ {2}filter\/INPUT: -m set/m);
  assert.match(t, /^ {2}endpoint 10\.180\.0\.2:8080 {2}probability 66\.7%$/m);
  assert.match(t, /^Masquerade: no$/m);
});

test('splitDiffArgs keeps the proxy flags and takes --netns/--output out', () => {
  assert.deepEqual(splitDiffArgs(['--kubeconfig', 'k', '--netns', 'n1', '--proxy-mode=nftables', '--output=json']), {
    rest: ['--kubeconfig', 'k', '--proxy-mode=nftables'],
    netns: 'n1',
    output: 'json',
  });
  assert.throws(() => splitDiffArgs(['--netns']), invalid);
  assert.throws(() => splitDiffArgs(['--output', 'yaml']), invalid);
});
