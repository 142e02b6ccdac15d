// Every flow of the shared packet-flow table (test/cases/packetflow.ts)
// through renderer -> FakeIptables (restore + jump rules) -> tracer.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { expectedFor, PACKET_FLOW_SCENARIOS, sameOutput } from '../cases/packetflow.js';
import { scenarioConfig, scenarioLocalIPs, scenarioSyncState } from '../cases/resolve.js';
import {
  DEFAULT_IPTABLES_OPTIONS,
  FakeIptables,
  IPTABLES_JUMP_CHAINS,
  jumpRuleArgs,
  renderIptables,
} from '../../src/dataplane/iptables/index.js';
import type { Scenario } from '../cases/packetflow.js';
import { tracePacket } from '../tracer/iptables.js';

/** Render a scenario and load it into a fake like the platform would. */
export function loadScenario(s: Scenario): FakeIptables {
  const render = renderIptables({
    state: scenarioSyncState(s),
    config: scenarioConfig(s, 'iptables'),
    options: DEFAULT_IPTABLES_OPTIONS,
    previous: null,
    existingNatChains: [],
  });
  assert.deepEqual(render.skipped, []);
  const fake = new FakeIptables();
  fake.restore(render.restoreText, { noflush: true });
  for (const j of IPTABLES_JUMP_CHAINS) {
    if (j.onlyIfChainRendered && !render.filterChains.includes(j.to)) continue;
    fake.ensureRule('prepend', j.table, j.from, jumpRuleArgs(j));
  }
  return fake;
}

for (const s of PACKET_FLOW_SCENARIOS) {
  if (s.only && !s.only.includes('iptables')) continue;
  describe(`iptables packet flow: ${s.name} (#${s.refs.join(', #')})`, () => {
    const fake = loadScenario(s);
    for (const f of s.flows) {
      if (f.only && !f.only.includes('iptables')) continue;
      test(`${f.name}: ${f.protocol} ${f.src} -> ${f.dst}:${f.port}`, () => {
        const want = expectedFor(f, 'iptables');
        const got = tracePacket(
          fake,
          { src: f.src, dst: f.dst, port: f.port, protocol: f.protocol },
          scenarioLocalIPs(s),
        );
        assert.ok(
          sameOutput(got.output, want.output),
          `output ${JSON.stringify(got.output)}, want ${JSON.stringify(want.output)}\n${got.matched.join('\n')}`,
        );
        assert.equal(got.masq, want.masq, `masq\n${got.matched.join('\n')}`);
      });
    }
  });
}
