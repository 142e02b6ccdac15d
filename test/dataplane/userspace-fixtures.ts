// Loading a packet-flow scenario into the userspace Fake the way UserspaceDataplane syncs:
// planned by its planner (the driver under the one reconciler), the listeners opened, then the
// table's transaction for their ports, applied.
import { NODE_IP } from '../cases/fixtures.js';
import type { Scenario } from '../cases/packetflow.js';
import { scenarioConfig, scenarioSyncState } from '../cases/resolve.js';
import type { DataplaneConfig, IPFamily, SyncState } from '../../src/core/types.js';
import type { Transaction } from '../../src/dataplane/nftables/transaction.js';
import { Fake, type UserspacePlan } from '../../src/dataplane/userspace/index.js';
import { UserspacePlanner } from '../../src/platform/userspace/planner.js';

/** The config of the driver's and planner's unit tests: IPv4, NodePorts on every local address. */
export const UNIT_CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'none' },
  nodePortAddresses: null,
  localhostNodePorts: true,
  localIPs: ['127.0.0.1', NODE_IP],
};

/** `config` changes the scenario's resolved config (knobs the table does not cover). */
export function loadScenario(
  s: Scenario,
  config: (c: DataplaneConfig) => DataplaneConfig = (c) => c,
): { fake: Fake; tx: Transaction; script: string } {
  const fake = new Fake(s.family === 'IPv4' ? 'ip' : 'ip6');
  const tx = syncFake(new UserspacePlanner(config(scenarioConfig(s, 'userspace'))), fake, scenarioSyncState(s));
  return { fake, tx, script: tx.toString() };
}

/**
 * One sync into the Fake as UserspaceDataplane does it with its drift watch on: listeners
 * opened or updated, the table's transaction applied, then listeners closed. The listeners
 * adopted when the table is replaced are the Fake's, their content unknown (each is updated).
 */
export function syncFake(planner: UserspacePlanner, fake: Fake, state: SyncState): Transaction {
  const live = () => [...fake.listeners.keys()].map((key) => ({ kind: 'listener' as const, key, value: null }));
  const plan = planner.plan(state, live, true);
  for (const spec of [...plan.work.open, ...plan.work.update]) fake.listen(spec);
  const { tx } = planner.transaction(plan, (k) => fake.listeners.get(k)?.port);
  fake.run(tx);
  for (const key of plan.work.close) fake.close(key);
  return tx;
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

/**
 * Three service ports, one of each fate: redirected (cluster IP, external IP
 * and NodePort, to listeners A and AL), refused (reject internally, drop
 * externally), and one whose listener did not open (no port in
 * PORTAL_PORTS). IPv6 keeps the last byte of each address.
 */
export function portalPlan(family: IPFamily): UserspacePlan {
  const ip = (v4: string) => (family === 'IPv4' ? v4 : `fd00:172:30::${v4.split('.').pop()}`);
  return {
    listeners: new Map(),
    skipped: [],
    portals: [
      {
        servicePortKey: 'ns1/a:p',
        protocol: 'TCP',
        port: 80,
        clusterIP: ip('172.30.0.41'),
        internal: { kind: 'listener', listener: 'A' },
        externalIPs: [ip('192.168.99.11')],
        nodePort: 30080,
        external: { kind: 'listener', listener: 'AL' },
      },
      {
        servicePortKey: 'ns1/b:p',
        protocol: 'UDP',
        port: 53,
        clusterIP: ip('172.30.0.42'),
        internal: { kind: 'reject' },
        externalIPs: [],
        nodePort: 30053,
        external: { kind: 'drop' },
      },
      {
        servicePortKey: 'ns1/c:p',
        protocol: 'TCP',
        port: 81,
        clusterIP: ip('172.30.0.43'),
        internal: { kind: 'listener', listener: 'C-failed' },
        externalIPs: [],
        nodePort: 0,
        external: null,
      },
    ],
  };
}

/** The ports portalPlan's listeners got (C-failed has none). */
export const PORTAL_PORTS: ReadonlyMap<string, number> = new Map([
  ['A', 40001],
  ['AL', 40002],
]);
