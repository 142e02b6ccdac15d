// The registry: every mode has one driver, asked in fixed orders, and the
// facts each driver states about its mode are upstream's.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ProxyMode } from '../../core/types.js';
import { isEbpfDump, isIpvsBundle, isIptablesDump, isNftablesDump, isUserspaceDump } from './dumps.js';
import { DETECTION_ORDER, DUMP_ORDER, MODES, modeDriver, SUPPORTED_MODES } from './index.js';

const ALL: readonly ProxyMode[] = ['iptables', 'nftables', 'ipvs', 'userspace', 'ebpf'];

test('every mode has exactly one driver, which names its own mode', () => {
  assert.deepEqual([...SUPPORTED_MODES].sort(), [...ALL].sort());
  for (const m of ALL) assert.equal(MODES[m].mode, m);
  assert.deepEqual(DETECTION_ORDER.map((d) => d.mode).sort(), [...ALL].sort());
  assert.deepEqual(DUMP_ORDER.map((d) => d.mode).sort(), [...ALL].sort());
});

test('an unknown mode is refused with a clear error', () => {
  assert.throws(() => modeDriver('kernelspace'), {
    code: 'KPT_UNSUPPORTED',
    message: /"kernelspace" is not available in this build \(supported: iptables, ipvs, nftables, userspace, ebpf\)/,
  });
});

test("a failed sync counts in upstream's counter of each mode", () => {
  // iptables-restore failures for iptables mode and for IPVS mode (upstream's IPVS proxier counts its
  // iptables-restore runs); nftables transactions; userspace and ebpf have no such counter.
  const want: Record<ProxyMode, string | null> = {
    iptables: 'iptables-restore',
    ipvs: 'iptables-restore',
    nftables: 'nftables-sync',
    userspace: null,
    ebpf: null,
  };
  for (const m of ALL) assert.equal(MODES[m].failureCounter, want[m], m);
});

test('IPVS mode is told apart before iptables mode, whose chains and dumps it contains', () => {
  const order = DETECTION_ORDER.map((d) => d.mode);
  assert.ok(order.indexOf('ipvs') < order.indexOf('iptables'));
  const dumps = DUMP_ORDER.map((d) => d.mode);
  assert.ok(dumps.indexOf('ipvs') < dumps.indexOf('iptables'));
  const bundle = '# ipvsadm -Sn\n-A -t 10.96.0.1:443 -s rr\n*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n';
  assert.equal(DUMP_ORDER.find((d) => d.holdsDump(bundle))?.mode, 'ipvs');
});

test('each saved format is told by its own first lines', () => {
  const samples: Array<[string, string]> = [
    ['iptables', '*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n'],
    ['nftables', 'table ip kube-proxy {\n}\n'],
    ['userspace', 'table ip kube-proxy-userspace {\n}\n'],
    ['ebpf', '{"kind":"kube-proxy-ts ebpf maps","version":1,"maps":{}}'],
  ];
  for (const [mode, text] of samples) assert.equal(DUMP_ORDER.find((d) => d.holdsDump(text))?.mode, mode, mode);
  assert.equal(isIptablesDump('table ip kube-proxy {'), false);
  assert.equal(isNftablesDump('table ip kube-proxy-userspace {'), false);
  assert.equal(isUserspaceDump('table ip kube-proxy {'), false);
  assert.equal(isIpvsBundle('*nat\n'), false);
  assert.equal(isEbpfDump('{"kind":"something else"}'), false);
});

test('the datapath canary and traffic counters are offered where the modes support them', () => {
  assert.deepEqual(
    ALL.filter((m) => MODES[m].canaryFamilies.includes('IPv4')),
    ['iptables', 'nftables', 'ipvs', 'userspace', 'ebpf'],
  );
  // IPVS runs only in the QEMU guest, where the IPv6 canary has not been proven.
  assert.deepEqual(
    ALL.filter((m) => MODES[m].canaryFamilies.includes('IPv6')),
    ['iptables', 'nftables', 'userspace', 'ebpf'],
  );
  assert.deepEqual(
    ALL.filter((m) => MODES[m].countsTraffic),
    ['nftables', 'ebpf'],
  );
  assert.deepEqual(
    ALL.filter((m) => MODES[m].deprecation !== undefined),
    ['ipvs'],
  );
  assert.equal(MODES.ipvs.deprecation?.reason, 'IPVSDeprecation');
});
