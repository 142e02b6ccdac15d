// The tracer itself: hook selection, ctstate, and refusal of rules it does not understand.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Fake } from '../../src/dataplane/iptables/index.js';
import { trace, type TracePacket } from '../../src/dataplane/iptables/trace.js';

const LOCAL = ['127.0.0.1', '192.168.0.2'];

/** The parts of a trace these tests compare (the full result also has steps, verdict and candidates). */
function tracePacket(fake: Fake, packet: TracePacket, localIPs: readonly string[]) {
  const r = trace(fake, packet, localIPs);
  return { output: r.output, masq: r.masq, matched: r.matched };
}

function fakeWith(nat: string, filter = ''): Fake {
  const f = new Fake();
  f.restore(
    `*filter\n:KUBE-T - [0:0]\n${filter}COMMIT\n*nat\n:KUBE-T - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n${nat}COMMIT\n`,
  );
  for (const [t, c] of [
    ['nat', 'PREROUTING'],
    ['nat', 'OUTPUT'],
    ['filter', 'INPUT'],
    ['filter', 'FORWARD'],
    ['filter', 'OUTPUT'],
  ] as const) {
    f.ensureRule('append', t, c, ['-m', 'comment', '--comment', `from ${c}`, '-j', 'KUBE-T']);
  }
  return f;
}

test('node-local sources go through nat OUTPUT, remote ones through PREROUTING', () => {
  const f = fakeWith(
    '-A KUBE-T -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ\n-A KUBE-T -d 172.30.0.1 -p tcp -j DNAT --to-destination 10.0.0.1:80\n',
  );
  const local = tracePacket(f, { src: '192.168.0.2', dst: '172.30.0.1', port: 80 }, LOCAL);
  assert.deepEqual(local, { output: '10.0.0.1:80', masq: true, matched: local.matched });
  assert.ok(local.matched.some((m) => m.includes('nat/OUTPUT')));
  const remote = tracePacket(f, { src: '203.0.113.2', dst: '172.30.0.1', port: 80 }, LOCAL);
  assert.equal(remote.masq, false);
  assert.ok(
    remote.matched.some((m) => m.includes('nat/PREROUTING')) && !remote.matched.some((m) => m.includes('nat/OUTPUT')),
  );
});

test('filter hooks: FORWARD for remote destinations, INPUT for local, OUTPUT then INPUT for local-to-local', () => {
  const f = fakeWith('', '-A KUBE-T -m comment --comment "drop 1" -p udp --dport 9 -j DROP\n');
  assert.equal(
    tracePacket(f, { src: '203.0.113.2', dst: '10.0.0.9', port: 9, protocol: 'UDP' }, LOCAL).matched.filter((m) =>
      m.startsWith('filter/FORWARD'),
    ).length,
    1,
  );
  assert.equal(
    tracePacket(f, { src: '203.0.113.2', dst: '192.168.0.2', port: 9, protocol: 'UDP' }, LOCAL).matched.filter((m) =>
      m.startsWith('filter/INPUT'),
    ).length,
    1,
  );
  const ll = tracePacket(f, { src: '192.168.0.2', dst: '192.168.0.2', port: 9, protocol: 'TCP' }, LOCAL);
  assert.deepEqual(
    ll.matched
      .map((m) => m.split(':')[0])
      .filter((h) => h === 'filter/OUTPUT' || h === 'filter/INPUT' || h === 'filter/FORWARD'),
    ['filter/OUTPUT', 'filter/INPUT'],
  );
  assert.equal(tracePacket(f, { src: '203.0.113.2', dst: '10.0.0.9', port: 9, protocol: 'UDP' }, LOCAL).output, 'DROP');
});

test('conntrack state is NEW, plus DNAT after a DNAT; negation works', () => {
  const f = fakeWith(
    '-A KUBE-T -d 172.30.0.1 -p tcp -j DNAT --to-destination 10.0.0.1:80\n',
    '-A KUBE-T -m conntrack ! --ctstate DNAT -d 10.0.0.1 -j REJECT\n-A KUBE-T -m conntrack ! --ctstate DNAT -d 10.0.0.2 -j DROP\n',
  );
  assert.equal(tracePacket(f, { src: '203.0.113.2', dst: '172.30.0.1', port: 80 }, LOCAL).output, '10.0.0.1:80');
  assert.equal(tracePacket(f, { src: '203.0.113.2', dst: '10.0.0.2', port: 80 }, LOCAL).output, 'DROP');
});

test('rules the tracer does not understand make it throw', () => {
  const f = fakeWith('-A KUBE-T -m foo --bar 1 -j ACCEPT\n');
  assert.throws(
    () => tracePacket(f, { src: '203.0.113.2', dst: '1.1.1.1', port: 1 }, LOCAL),
    /unknown rule option --bar/,
  );
});
