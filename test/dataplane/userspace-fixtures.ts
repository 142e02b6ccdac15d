// Loading a packet-flow scenario into the userspace Fake the way UserspaceDataplane syncs:
// plan, open the listeners, render the table for their ports, apply it.
import type { Scenario } from '../cases/packetflow.js';
import { scenarioConfig, scenarioSyncState } from '../cases/resolve.js';
import { Fake, UserspaceRenderer } from '../../src/dataplane/userspace/index.js';

export function loadScenario(s: Scenario): { fake: Fake; script: string } {
  const renderer = new UserspaceRenderer(scenarioConfig(s, 'userspace'));
  const plan = renderer.plan(scenarioSyncState(s));
  const fake = new Fake(s.family === 'IPv4' ? 'ip' : 'ip6');
  const ports = new Map([...plan.listeners.values()].map((spec) => [spec.key, fake.listen(spec)]));
  const script = renderer.render(plan, ports);
  fake.run(script);
  return { fake, script };
}
