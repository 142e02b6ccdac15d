// explainEndpointUse: every endpoint is either used for a kind of traffic or
// carries the reason it is not, and the reasons match the rules of
// categorizeEndpoints (checked case by case and over every combination of a
// small endpoint space).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { explainEndpointUse, type EndpointUsePort, type ServicePortUse } from './endpointuse.js';
import { categorizeEndpoints } from './topology.js';
import type { Endpoint } from './types.js';

const NODE = 'node1';
const ZONE_A = { 'topology.kubernetes.io/zone': 'zone-a' };

interface EpOpts {
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
  local?: boolean;
  zones?: string[];
  nodes?: string[];
}
function ep(key: string, o: EpOpts = {}): Endpoint {
  const [ip, port] = key.split(':') as [string, string];
  const ready = o.ready ?? true;
  return {
    ip,
    port: Number(port),
    key,
    isLocal: o.local ?? false,
    ready,
    serving: o.serving ?? ready,
    terminating: o.terminating ?? false,
    zoneHints: o.zones ? new Set(o.zones) : null,
    nodeHints: o.nodes ? new Set(o.nodes) : null,
    nodeName: o.local ? NODE : 'node2',
    zone: '',
  };
}

function port(o: { itpLocal?: boolean; etpLocal?: boolean; external?: boolean } = {}): EndpointUsePort & {
  usesLocalEndpoints: boolean;
} {
  const external = o.external ?? false;
  const itp = o.itpLocal ?? false;
  const etp = (o.etpLocal ?? false) && external;
  return {
    internalPolicyLocal: itp,
    externalPolicyLocal: etp,
    externallyAccessible: external,
    usesClusterEndpoints: !itp || external,
    usesLocalEndpoints: itp || etp,
  };
}

function explain(eps: Endpoint[], p: ReturnType<typeof port>, labels: Record<string, string> = {}): ServicePortUse {
  return explainEndpointUse(eps, p, categorizeEndpoints(eps, p, NODE, labels), NODE, labels);
}

/** key -> "internal:reason external:reason" of what was skipped, or "used:internal,external". */
function summary(u: ServicePortUse): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of u.endpoints) {
    const parts = [
      ...(e.usedFor.length ? [`used:${e.usedFor.join(',')}`] : []),
      ...e.skipped.map((s) => `${s.traffic}:${s.reason}`),
    ];
    out[e.endpoint.key] = parts.join(' ');
  }
  return out;
}

test('not ready, terminating-not-serving and serving-terminating-with-ready-peers are named apart', () => {
  const u = explain(
    [
      ep('10.0.0.1:80'),
      ep('10.0.0.2:80', { ready: false }),
      ep('10.0.0.3:80', { ready: false, serving: false, terminating: true }),
      ep('10.0.0.4:80', { ready: false, serving: true, terminating: true }),
    ],
    port(),
  );
  assert.deepEqual(summary(u), {
    '10.0.0.1:80': 'used:internal',
    '10.0.0.2:80': 'internal:not-ready',
    '10.0.0.3:80': 'internal:terminating',
    '10.0.0.4:80': 'internal:terminating',
  });
  assert.match(u.endpoints[3]!.skipped[0]!.detail, /only when no ready endpoint/);
  assert.deepEqual(
    u.traffic.map((t) => [t.traffic, t.policy, t.verdict, t.endpoints.length]),
    [['internal', 'Cluster', 'forward', 1]],
  );
});

test('serving-terminating endpoints are used once no ready endpoint is left', () => {
  const u = explain([ep('10.0.0.4:80', { ready: false, serving: true, terminating: true })], port());
  assert.deepEqual(summary(u), { '10.0.0.4:80': 'used:internal' });
});

test("zone hints: endpoints hinted for another zone are skipped with the hint and this node's zone", () => {
  const u = explain(
    [ep('10.0.0.1:80', { zones: ['zone-a'] }), ep('10.0.0.2:80', { zones: ['zone-b', 'zone-c'] })],
    port(),
    ZONE_A,
  );
  assert.equal(u.topology, 'PreferSameZone');
  assert.deepEqual(summary(u), { '10.0.0.1:80': 'used:internal', '10.0.0.2:80': 'internal:other-zone-hint' });
  assert.equal(u.endpoints[1]!.skipped[0]!.detail, 'hinted for zone zone-b, zone-c; this node is in zone zone-a');
});

test('node hints: endpoints hinted for another node are skipped as "another node"', () => {
  const u = explain(
    [ep('10.0.0.1:80', { nodes: [NODE], local: true }), ep('10.0.0.2:80', { nodes: ['node2'] })],
    port(),
  );
  assert.equal(u.topology, 'PreferSameNode');
  assert.deepEqual(summary(u), { '10.0.0.1:80': 'used:internal', '10.0.0.2:80': 'internal:other-node-hint' });
});

test('externalTrafficPolicy Local: remote endpoints serve ClusterIP traffic but not external traffic', () => {
  const u = explain([ep('10.0.0.1:80', { local: true }), ep('10.0.0.2:80')], port({ external: true, etpLocal: true }));
  assert.deepEqual(summary(u), {
    '10.0.0.1:80': 'used:internal,external',
    '10.0.0.2:80': 'used:internal external:local-policy',
  });
  assert.match(u.endpoints[1]!.skipped[0]!.detail, /runs on node node2/);
  assert.deepEqual(
    u.traffic.map((t) => [t.traffic, t.policy, t.verdict]),
    [
      ['internal', 'Cluster', 'forward'],
      ['external', 'Local', 'forward'],
    ],
  );
});

test('Local policy without a local endpoint drops; no serving endpoint anywhere rejects', () => {
  const drop = explain([ep('10.0.0.2:80')], port({ external: true, etpLocal: true, itpLocal: true }));
  assert.deepEqual(
    drop.traffic.map((t) => [t.traffic, t.verdict]),
    [
      ['internal', 'drop'],
      ['external', 'drop'],
    ],
  );
  assert.deepEqual(summary(drop), { '10.0.0.2:80': 'internal:local-policy external:local-policy' });

  const reject = explain([ep('10.0.0.2:80', { ready: false })], port({ external: true }));
  assert.deepEqual(
    reject.traffic.map((t) => [t.traffic, t.verdict, t.detail]),
    [
      ['internal', 'reject', 'no serving endpoints: connections are rejected'],
      ['external', 'reject', 'no serving endpoints: connections are rejected'],
    ],
  );
  assert.deepEqual(explain([], port()).traffic[0]!.verdict, 'reject');
});

test('every combination of a small endpoint space: used exactly as categorized, every other one explained', () => {
  // 3 endpoints x (ready/serving/terminating states) x locality x hints, under every policy pair.
  const states: EpOpts[] = [
    {},
    { ready: false },
    { ready: false, serving: true, terminating: true },
    { ready: false, serving: false, terminating: true },
  ];
  const hints: Array<Pick<EpOpts, 'zones' | 'nodes'>> = [
    {},
    { zones: ['zone-a'] },
    { zones: ['zone-b'] },
    { nodes: [NODE] },
    { nodes: ['node2'], zones: ['zone-a'] },
  ];
  const variants: EpOpts[] = [];
  for (const s of states)
    for (const h of hints) for (const local of [false, true]) variants.push({ ...s, ...h, local });
  const policies = [
    port(),
    port({ itpLocal: true }),
    port({ external: true }),
    port({ external: true, etpLocal: true }),
    port({ external: true, etpLocal: true, itpLocal: true }),
  ];
  let checked = 0;
  for (let i = 0; i < variants.length; i += 3) {
    for (let j = 0; j < variants.length; j += 7) {
      const eps = [
        ep('10.0.0.1:80', variants[i]),
        ep('10.0.0.2:80', variants[j]),
        ep('10.0.0.3:80', variants[(i + j) % variants.length]),
      ];
      for (const p of policies) {
        const cat = categorizeEndpoints(eps, p, NODE, ZONE_A);
        const u = explainEndpointUse(eps, p, cat, NODE, ZONE_A);
        for (const t of u.traffic) {
          const list = (t.policy === 'Local' ? cat.localEndpoints : cat.clusterEndpoints) ?? [];
          const usedKeys = u.endpoints.filter((e) => e.usedFor.includes(t.traffic)).map((e) => e.endpoint.key);
          assert.deepEqual(
            usedKeys,
            list.map((e) => e.key),
          );
          for (const e of u.endpoints) {
            const skips = e.skipped.filter((s) => s.traffic === t.traffic);
            assert.equal(skips.length, e.usedFor.includes(t.traffic) ? 0 : 1);
            for (const s of skips) assert.notEqual(s.reason, 'unexplained', `${e.endpoint.key} ${JSON.stringify(eps)}`);
          }
        }
        checked++;
      }
    }
  }
  assert.ok(checked > 300, `only ${checked} combinations checked`);
});
