// The chain walker both iptables-based tracers share: what each of its two
// mark readings does, the match hook IPVS mode passes, and the targets whose
// meaning depends on the table.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hasCode } from '../../core/errors.js';
import { Fake } from './fake.js';
import { IptablesWalk, type IptablesWalkOptions, type RuleStep } from './walk.js';
import type { WalkedPacket } from '../trace.js';

const LOCAL = ['192.168.0.2'];
const pkt = (): WalkedPacket => ({ src: '203.0.113.2', dst: '172.30.0.1', port: 80, protocol: 'TCP' });

function fakeWith(nat: string): Fake {
  const f = new Fake();
  f.restore(`*nat\n:KUBE-T - [0:0]\n:KUBE-MARK - [0:0]\n-A KUBE-MARK -j MARK --or-mark 0x4000\n${nat}COMMIT\n`);
  return f;
}

function walk(
  f: Fake,
  how: Partial<IptablesWalkOptions<RuleStep, WalkedPacket>> = {},
  strict = true,
): IptablesWalk<RuleStep> {
  return new IptablesWalk<RuleStep>(f, LOCAL, { strict }, { marks: 'never', step: (s) => s, ...how });
}

test("marks: 'tracked' matches the mark MARK set on the way; 'never' matches no mark", () => {
  const f = fakeWith('-A KUBE-T -j KUBE-MARK\n-A KUBE-T -m mark --mark 0x4000/0x4000 -j DROP\n');
  const tracked = walk(f, { marks: 'tracked' });
  assert.equal(tracked.run('nat', 'KUBE-T', pkt()), 'terminal');
  assert.deepEqual(tracked.outputs, ['DROP']);
  assert.equal(tracked.mark, 0x4000);
  const never = walk(f);
  assert.equal(never.run('nat', 'KUBE-T', pkt()), 'continue');
  assert.deepEqual(never.outputs, []);
  assert.equal(never.masq, true, 'MARK --or-mark still says masquerade');
});

test('the match hook reads the options the walker does not know, with their values', () => {
  const f = fakeWith('-A KUBE-T -m set --match-set S dst,dst -j DROP\n');
  const seen: string[] = [];
  const w = walk(f, {
    match: (option, tokens, i) => {
      seen.push(`${option} ${tokens[i + 1]} ${tokens[i + 2]}`);
      return option === '--match-set' ? { ok: true, values: 2 } : undefined;
    },
  });
  assert.equal(w.run('nat', 'KUBE-T', pkt()), 'terminal');
  assert.deepEqual(seen, ['--match-set S dst,dst']);
  assert.deepEqual(w.matched, ['nat/KUBE-T: -m set --match-set S dst,dst -j DROP']);
  assert.throws(
    () => walk(f).run('nat', 'KUBE-T', pkt()),
    (e: unknown) => hasCode(e, 'KPT_TRACE_FAILED') && /unknown rule option --match-set/.test(String(e)),
  );
  const lenient = walk(f, {}, false);
  assert.equal(lenient.run('nat', 'KUBE-T', pkt()), 'continue');
  assert.deepEqual(lenient.notUnderstood, ['nat/KUBE-T: -m set --match-set S dst,dst -j DROP']);
});

test('ACCEPT in nat ends the table without a verdict; MASQUERADE ends the chain', () => {
  const f = fakeWith('-A KUBE-T -p tcp -j ACCEPT\n-A KUBE-T -j DROP\n');
  const w = walk(f);
  assert.equal(w.run('nat', 'KUBE-T', pkt()), 'terminal');
  assert.deepEqual(w.outputs, []);
  const m = walk(fakeWith('-A KUBE-T -j MASQUERADE\n-A KUBE-T -j DROP\n'));
  assert.equal(m.run('nat', 'KUBE-T', pkt()), 'terminal');
  assert.deepEqual(
    m.steps.map((s) => s.target),
    ['MASQUERADE'],
  );
});
