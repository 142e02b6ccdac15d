// The shared packet-flow table (test/cases/packetflow.ts) against the
// iptables mode: IptablesPlanner (driver + reconciler) -> Fake (restore + jump rules) -> trace.

import assert from 'node:assert/strict';
import type { Scenario } from '../cases/packetflow.js';
import { scenarioConfig, scenarioSyncState } from '../cases/resolve.js';
import { runPacketFlowTable } from '../cases/runtable.js';
import {
  DEFAULT_IPTABLES_OPTIONS,
  Fake,
  IPTABLES_JUMP_CHAINS,
  jumpRuleArgs,
  trace,
} from '../../src/dataplane/iptables/index.js';
import { IptablesPlanner } from '../../src/platform/iptables/planner.js';

/** Render a scenario and load it into a fake like the platform would. */
export function loadScenario(s: Scenario): Fake {
  const render = new IptablesPlanner().plan(
    {
      state: scenarioSyncState(s),
      config: scenarioConfig(s, 'iptables'),
      options: DEFAULT_IPTABLES_OPTIONS,
    },
    true,
    [],
  );
  assert.deepEqual(render.skipped, []);
  const fake = new Fake();
  fake.restore(render.restoreText, { noflush: true });
  for (const j of IPTABLES_JUMP_CHAINS) {
    if (j.onlyIfChainRendered && !render.filterChains.includes(j.to)) continue;
    fake.ensureRule('prepend', j.table, j.from, jumpRuleArgs(j));
  }
  return fake;
}

runPacketFlowTable({
  mode: 'iptables',
  load: loadScenario,
  trace: (fake, packet, localIPs) => trace(fake, packet, localIPs),
  skip: [
    {
      reason:
        'iptables has no rule for unallocated ServiceCIDR addresses: such packets are routed on, not dropped (upstream does the same)',
      scenarios: ['ClusterIPGeneral'],
      flows: ['unallocated IP inside the ServiceCIDR'],
    },
  ],
});
