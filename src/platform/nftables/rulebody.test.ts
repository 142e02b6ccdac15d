// Rule bodies (src/dataplane/nftables/rule.ts) against their two printers:
// every rule the renderer writes, under every config and layout of the rich
// cases and the packet-flow scenarios, carries a body whose text is the
// rule's text and whose compiled expressions are exactly those of that text
// read back (ruleparse.ts, the path of text-only rules). So the netlink
// encoding of a body cannot drift from the text `nft -f`, the Fake and the
// tracer see. The userspace mode's table likewise.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nftFamily } from '../../dataplane/nftables/names.js';
import { ENDPOINT_LAYOUTS } from '../../dataplane/nftables/static.js';
import { ruleText } from '../../dataplane/nftables/rule.js';
import { parseRule } from '../../dataplane/nftables/ruleparse.js';
import type { Transaction } from '../../dataplane/nftables/transaction.js';
import { compileRule } from './nlrule.js';
import { NftablesPlanner } from './planner.js';
import { PACKET_FLOW_SCENARIOS } from '../../../test/cases/packetflow.js';
import { packetFlowCases, richCases } from '../../../test/support/nftables-rich.js';
import { loadScenario, TABLE_KNOBS } from '../../../test/dataplane/userspace-fixtures.js';

function checkRules(tx: Transaction, where: string): number {
  let n = 0;
  for (const { object: o } of tx.operations) {
    if (o.kind !== 'rule') continue;
    n++;
    assert.ok(o.body, `${where}: ${o.rule} has a body`);
    assert.equal(ruleText(o.body), o.rule, where);
    const parsed = parseRule(o.rule);
    assert.ok(parsed, `${where}: ${o.rule} reads back`);
    const mine = compileRule(o.body, tx.family);
    assert.ok(mine, `${where}: ${o.rule} compiles`);
    assert.deepEqual(mine, compileRule(parsed, tx.family), `${where}: ${o.rule}`);
  }
  return n;
}

test('every rendered nftables rule: body printed is the text, body compiled is the text compiled', () => {
  let rules = 0;
  for (const c of [...richCases(), ...packetFlowCases()])
    for (const layout of ENDPOINT_LAYOUTS) {
      const { tx } = new NftablesPlanner(c.config, layout).plan(c.state, 0, null);
      assert.equal(tx.family, nftFamily(c.family));
      rules += checkRules(tx, `${c.name} (${layout})`);
    }
  assert.ok(rules > 1000, `${rules} rules`);
});

test("the userspace mode's table: the same for every packet-flow scenario under every knob", () => {
  let rules = 0;
  for (const s of PACKET_FLOW_SCENARIOS)
    for (const knob of TABLE_KNOBS) rules += checkRules(loadScenario(s, knob.config).tx, `${s.name} (${knob.name})`);
  assert.ok(rules > 100, `${rules} rules`);
});

test('a body with a value of the other family or out of range does not compile', () => {
  assert.equal(compileRule([{ k: 'dnat', addr: 'fd00::1', port: 80 }], 'ip'), null);
  assert.equal(compileRule([{ k: 'dnat', addr: '10.0.0.1', port: 65536 }], 'ip'), null);
  assert.equal(compileRule([{ k: 'addrIn', fam: 'ip6', dir: 'saddr', neq: false, set: 's' }], 'ip'), null);
  assert.equal(compileRule([{ k: 'lookup', fields: ['ip6 daddr', 'th dport'], set: 's', vmap: true }], 'ip'), null);
  assert.equal(compileRule([{ k: 'iifname', neq: false, name: 'a-name-longer-than-15', prefix: false }], 'ip'), null);
  assert.equal(compileRule([{ k: 'numgen', mod: 0, value: 0 }], 'ip'), null);
  assert.equal(compileRule([], 'ip'), null);
});
