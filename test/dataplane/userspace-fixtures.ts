// Loading a packet-flow scenario into the userspace Fake the way UserspaceDataplane syncs:
// plan, open the listeners, render the table for their ports, apply it.
import type { Scenario } from '../cases/packetflow.js';
import { scenarioConfig, scenarioSyncState } from '../cases/resolve.js';
import type { DataplaneConfig } from '../../src/core/types.js';
import type { Transaction } from '../../src/dataplane/nftables/transaction.js';
import { Fake, UserspaceRenderer } from '../../src/dataplane/userspace/index.js';

/** `config` changes the scenario's resolved config (knobs the table does not cover). */
export function loadScenario(
  s: Scenario,
  config: (c: DataplaneConfig) => DataplaneConfig = (c) => c,
): { fake: Fake; tx: Transaction; script: string } {
  const renderer = new UserspaceRenderer(config(scenarioConfig(s, 'userspace')));
  const plan = renderer.plan(scenarioSyncState(s));
  const fake = new Fake(s.family === 'IPv4' ? 'ip' : 'ip6');
  const ports = new Map([...plan.listeners.values()].map((spec) => [spec.key, fake.listen(spec)]));
  const tx = renderer.render(plan, ports);
  fake.run(tx);
  return { fake, tx, script: tx.toString() };
}

/** Config changes that give the table another shape than the packet-flow scenarios' configs. */
export const TABLE_KNOBS: ReadonlyArray<{ name: string; config: (c: DataplaneConfig) => DataplaneConfig }> = [
  { name: 'as the scenario says', config: (c) => c },
  { name: 'localhost NodePorts', config: (c) => ({ ...c, localhostNodePorts: true }) },
  {
    name: 'nodePortAddresses CIDRs, two adjacent',
    config: (c) => ({
      ...c,
      nodePortAddresses:
        c.family === 'IPv4' ? ['192.168.0.0/24', '10.0.1.0/24', '10.0.0.0/24'] : ['fd00:1::/64', '2001:db8::/32'],
    }),
  },
  {
    name: 'nodePortAddresses open to the top',
    config: (c) => ({ ...c, nodePortAddresses: c.family === 'IPv4' ? ['128.0.0.0/1'] : ['8000::/1'] }),
  },
];
