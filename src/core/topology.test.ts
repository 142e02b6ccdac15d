// categorizeEndpoints cases written from upstream's rules (topology.go) and
// the case list of upstream pkg/proxy/topology_test.go (hints are always
// honoured and terminating endpoints always used now), plus packet-flow cases
// #34-40 (docs/packet-flows.md) built from real EndpointSlice JSON.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { categorizeEndpoints, topologyModeFromHints } from './topology.js';
import type { Endpoint } from './types.js';
import { syncStateFromObjects } from './snapshot.js';
import {
  READY,
  SERVING_TERMINATING,
  TERMINATING_NOT_SERVING,
  TEST_NODE,
  endpoint,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
  withLoadBalancerIngress,
} from '../../test/support/fixtures.js';

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
    nodeName: o.local ? TEST_NODE : 'other',
    zone: '',
  };
}

/** Flags as serviceport.ts derives them. */
function svc(o: { itpLocal?: boolean; etpLocal?: boolean; external?: boolean } = {}) {
  const external = o.external ?? false;
  const itp = o.itpLocal ?? false;
  const etp = (o.etpLocal ?? false) && external;
  return { usesClusterEndpoints: !itp || external, usesLocalEndpoints: itp || etp };
}

const zoneA = { 'topology.kubernetes.io/zone': 'zone-a' };
const keys = (l: readonly Endpoint[] | null) => (l === null ? null : l.map((e) => e.key).sort());

interface Case {
  name: string;
  labels?: Record<string, string>;
  svc: ReturnType<typeof svc>;
  eps: Endpoint[];
  cluster: string[] | null;
  local: string[] | null;
  all?: string[];
  hasAny: boolean;
}

const fourZoned = (readyLast = true) => [
  ep('10.1.2.3:80', { zones: ['zone-a'] }),
  ep('10.1.2.4:80', { zones: ['zone-b'] }),
  ep('10.1.2.5:80', { zones: ['zone-c'] }),
  ep('10.1.2.6:80', { zones: ['zone-a'], ready: readyLast }),
];
const ALL4 = ['10.1.2.3:80', '10.1.2.4:80', '10.1.2.5:80', '10.1.2.6:80'];

const cases: Case[] = [
  {
    name: 'zone hints: only endpoints hinted for the node zone',
    labels: zoneA,
    svc: svc(),
    eps: fourZoned(),
    cluster: ['10.1.2.3:80', '10.1.2.6:80'],
    local: null,
    hasAny: true,
  },
  {
    name: 'empty node labels: no filtering',
    labels: {},
    svc: svc(),
    eps: [ep('10.1.2.3:80', { zones: ['zone-a'] })],
    cluster: ['10.1.2.3:80'],
    local: null,
    hasAny: true,
  },
  {
    name: 'empty zone label: no filtering',
    labels: { 'topology.kubernetes.io/zone': '' },
    svc: svc(),
    eps: [ep('10.1.2.3:80', { zones: ['zone-a'] })],
    cluster: ['10.1.2.3:80'],
    local: null,
    hasAny: true,
  },
  {
    name: 'node in a zone nobody is hinted for: no filtering',
    labels: { 'topology.kubernetes.io/zone': 'zone-b' },
    svc: svc(),
    eps: [ep('10.1.2.3:80', { zones: ['zone-a'] })],
    cluster: ['10.1.2.3:80'],
    local: null,
    hasAny: true,
  },
  {
    name: 'unready endpoint in zone is not used',
    labels: zoneA,
    svc: svc(),
    eps: fourZoned(false),
    cluster: ['10.1.2.3:80'],
    local: null,
    hasAny: true,
  },
  {
    name: 'only unready endpoints in the same zone: no filtering',
    labels: zoneA,
    svc: svc(),
    eps: [
      ep('10.1.2.3:80', { zones: ['zone-a'], ready: false }),
      ep('10.1.2.4:80', { zones: ['zone-b'] }),
      ep('10.1.2.5:80', { zones: ['zone-c'] }),
      ep('10.1.2.6:80', { zones: ['zone-a'], ready: false }),
    ],
    cluster: ['10.1.2.4:80', '10.1.2.5:80'],
    local: null,
    hasAny: true,
  },
  {
    name: 'a ready endpoint without hints disables filtering',
    labels: zoneA,
    svc: svc(),
    eps: [
      ep('10.1.2.3:80', { zones: ['zone-a'] }),
      ep('10.1.2.4:80', { zones: ['zone-b'] }),
      ep('10.1.2.5:80'),
      ep('10.1.2.6:80', { zones: ['zone-a'] }),
    ],
    cluster: ALL4,
    local: null,
    hasAny: true,
  },
  {
    name: 'multiple hints per endpoint',
    labels: { 'topology.kubernetes.io/zone': 'zone-c' },
    svc: svc(),
    eps: [
      ep('10.1.2.3:80', { zones: ['zone-a', 'zone-b', 'zone-c'] }),
      ep('10.1.2.4:80', { zones: ['zone-b', 'zone-c'] }),
      ep('10.1.2.5:80', { zones: ['zone-b', 'zone-d'] }),
      ep('10.1.2.6:80', { zones: ['zone-c'] }),
    ],
    cluster: ['10.1.2.3:80', '10.1.2.4:80', '10.1.2.6:80'],
    local: null,
    hasAny: true,
  },
  {
    name: 'eTP Local: topology ignored for local endpoints',
    labels: zoneA,
    svc: svc({ etpLocal: true, external: true }),
    eps: [
      ep('10.1.2.3:80', { zones: ['zone-a'], local: true }),
      ep('10.1.2.4:80', { zones: ['zone-b'], local: true }),
      ep('10.1.2.5:80', { zones: ['zone-c'] }),
      ep('10.1.2.6:80', { zones: ['zone-a'] }),
    ],
    cluster: ['10.1.2.3:80', '10.1.2.6:80'],
    local: ['10.1.2.3:80', '10.1.2.4:80'],
    all: ['10.1.2.3:80', '10.1.2.4:80', '10.1.2.6:80'],
    hasAny: true,
  },
  {
    name: 'iTP Local with NodePort: topology ignored for local endpoints',
    labels: zoneA,
    svc: svc({ itpLocal: true, external: true }),
    eps: [
      ep('10.1.2.3:80', { zones: ['zone-a'], local: true }),
      ep('10.1.2.4:80', { zones: ['zone-b'], local: true }),
      ep('10.1.2.5:80', { zones: ['zone-c'] }),
      ep('10.1.2.6:80', { zones: ['zone-a'] }),
    ],
    cluster: ['10.1.2.3:80', '10.1.2.6:80'],
    local: ['10.1.2.3:80', '10.1.2.4:80'],
    all: ['10.1.2.3:80', '10.1.2.4:80', '10.1.2.6:80'],
    hasAny: true,
  },
  {
    name: 'conflicting topology and localness are merged in allReachable',
    labels: zoneA,
    svc: svc({ etpLocal: true, external: true }),
    eps: [
      ep('10.0.0.0:80', { zones: ['zone-a'], local: true }),
      ep('10.0.0.1:80', { zones: ['zone-b'], local: true }),
      ep('10.0.0.2:80', { zones: ['zone-a'] }),
      ep('10.0.0.3:80', { zones: ['zone-b'] }),
    ],
    cluster: ['10.0.0.0:80', '10.0.0.2:80'],
    local: ['10.0.0.0:80', '10.0.0.1:80'],
    all: ['10.0.0.0:80', '10.0.0.1:80', '10.0.0.2:80'],
    hasAny: true,
  },
  { name: 'iTP Local, no endpoints', svc: svc({ itpLocal: true }), eps: [], cluster: null, local: [], hasAny: false },
  {
    name: 'iTP Local, all endpoints remote',
    svc: svc({ itpLocal: true }),
    eps: [ep('10.0.0.0:80'), ep('10.0.0.1:80')],
    cluster: null,
    local: [],
    hasAny: true,
  },
  {
    name: 'iTP Local, all endpoints local',
    svc: svc({ itpLocal: true }),
    eps: [ep('10.0.0.0:80', { local: true }), ep('10.0.0.1:80', { local: true })],
    cluster: null,
    local: ['10.0.0.0:80', '10.0.0.1:80'],
    hasAny: true,
  },
  {
    name: 'iTP Local, some endpoints local',
    svc: svc({ itpLocal: true }),
    eps: [ep('10.0.0.0:80', { local: true }), ep('10.0.0.1:80')],
    cluster: null,
    local: ['10.0.0.0:80'],
    hasAny: true,
  },
  {
    name: 'Cluster policy, no endpoint ready',
    svc: svc(),
    eps: [ep('10.0.0.0:80', { ready: false }), ep('10.0.0.1:80', { ready: false })],
    cluster: [],
    local: null,
    hasAny: false,
  },
  {
    name: 'Cluster policy, some endpoints ready',
    svc: svc(),
    eps: [ep('10.0.0.0:80', { ready: false }), ep('10.0.0.1:80')],
    cluster: ['10.0.0.1:80'],
    local: null,
    hasAny: true,
  },
  {
    name: 'Cluster policy, all endpoints serving-terminating: fallback',
    svc: svc(),
    eps: [ep('10.0.0.0:80', { ...SERVING_TERMINATING, local: true }), ep('10.0.0.1:80', SERVING_TERMINATING)],
    cluster: ['10.0.0.0:80', '10.0.0.1:80'],
    local: null,
    hasAny: true,
  },
  {
    name: 'Cluster policy, terminating but not serving: nothing',
    svc: svc(),
    eps: [ep('10.0.0.0:80', TERMINATING_NOT_SERVING)],
    cluster: [],
    local: null,
    hasAny: false,
  },
  {
    name: 'iTP Local, eTP Cluster, NodePort, some local',
    svc: svc({ itpLocal: true, external: true }),
    eps: [ep('10.0.0.0:80', { local: true }), ep('10.0.0.1:80')],
    cluster: ['10.0.0.0:80', '10.0.0.1:80'],
    local: ['10.0.0.0:80'],
    all: ['10.0.0.0:80', '10.0.0.1:80'],
    hasAny: true,
  },
  {
    name: 'iTP Cluster, eTP Local, some local',
    svc: svc({ etpLocal: true, external: true }),
    eps: [ep('10.0.0.0:80', { local: true }), ep('10.0.0.1:80')],
    cluster: ['10.0.0.0:80', '10.0.0.1:80'],
    local: ['10.0.0.0:80'],
    all: ['10.0.0.0:80', '10.0.0.1:80'],
    hasAny: true,
  },
  {
    name: 'iTP Local, eTP Local, all remote',
    svc: svc({ itpLocal: true, etpLocal: true, external: true }),
    eps: [ep('10.0.0.0:80'), ep('10.0.0.1:80')],
    cluster: ['10.0.0.0:80', '10.0.0.1:80'],
    local: [],
    all: ['10.0.0.0:80', '10.0.0.1:80'],
    hasAny: true,
  },
  {
    name: 'iTP Local, eTP Local, all remote and serving-terminating',
    svc: svc({ itpLocal: true, etpLocal: true, external: true }),
    eps: [ep('10.0.0.0:80', SERVING_TERMINATING), ep('10.0.0.1:80', SERVING_TERMINATING)],
    cluster: ['10.0.0.0:80', '10.0.0.1:80'],
    local: [],
    all: ['10.0.0.0:80', '10.0.0.1:80'],
    hasAny: true,
  },
  {
    name: 'iTP Cluster, eTP Local, local fallback to serving-terminating',
    svc: svc({ etpLocal: true, external: true }),
    eps: [
      ep('10.0.0.0:80'),
      ep('10.0.0.1:80', { ready: false, serving: false, local: true }),
      ep('10.0.0.2:80', { ...SERVING_TERMINATING, local: true }),
      ep('10.0.0.3:80', SERVING_TERMINATING),
    ],
    cluster: ['10.0.0.0:80'],
    local: ['10.0.0.2:80'],
    all: ['10.0.0.0:80', '10.0.0.2:80'],
    hasAny: true,
  },
  {
    name: 'eTP Local ignored when not externally accessible',
    svc: svc({ etpLocal: true, external: false }),
    eps: [ep('10.0.0.0:80'), ep('10.0.0.1:80', { local: true })],
    cluster: ['10.0.0.0:80', '10.0.0.1:80'],
    local: null,
    hasAny: true,
  },
  {
    name: 'iTP Local internal-only: no cluster endpoints',
    svc: svc({ itpLocal: true }),
    eps: [ep('10.0.0.0:80'), ep('10.0.0.1:80', { local: true })],
    cluster: null,
    local: ['10.0.0.1:80'],
    hasAny: true,
  },
  {
    name: 'PreferSameNode: node hints for this node win over zone hints',
    labels: zoneA,
    svc: svc(),
    eps: [
      ep('10.0.0.1:80', { nodes: [TEST_NODE], zones: ['zone-a'] }),
      ep('10.0.0.2:80', { nodes: ['node2'], zones: ['zone-a'] }),
      ep('10.0.0.3:80', { nodes: ['node3'], zones: ['zone-b'] }),
    ],
    cluster: ['10.0.0.1:80'],
    local: null,
    hasAny: true,
  },
  {
    name: 'PreferSameNode needs node hints on every ready endpoint; falls back to zone',
    labels: zoneA,
    svc: svc(),
    eps: [
      ep('10.0.0.1:80', { nodes: [TEST_NODE], zones: ['zone-a'] }),
      ep('10.0.0.2:80', { zones: ['zone-a'] }),
      ep('10.0.0.3:80', { nodes: ['node3'], zones: ['zone-b'] }),
    ],
    cluster: ['10.0.0.1:80', '10.0.0.2:80'],
    local: null,
    hasAny: true,
  },
  {
    name: 'node hints present but none for this node: zone mode',
    labels: zoneA,
    svc: svc(),
    eps: [
      ep('10.0.0.2:80', { nodes: ['node2'], zones: ['zone-a'] }),
      ep('10.0.0.3:80', { nodes: ['node3'], zones: ['zone-b'] }),
    ],
    cluster: ['10.0.0.2:80'],
    local: null,
    hasAny: true,
  },
  {
    name: 'unready endpoint without node hints does not disable PreferSameNode',
    svc: svc(),
    eps: [
      ep('10.0.0.1:80', { nodes: [TEST_NODE] }),
      ep('10.0.0.2:80', { nodes: ['node2'] }),
      ep('10.0.0.3:80', { ready: false }),
    ],
    cluster: ['10.0.0.1:80'],
    local: null,
    hasAny: true,
  },
];

for (const c of cases) {
  test(`categorizeEndpoints: ${c.name}`, () => {
    const r = categorizeEndpoints(c.eps, c.svc, TEST_NODE, c.labels ?? {});
    assert.deepEqual(keys(r.clusterEndpoints), c.cluster);
    assert.deepEqual(keys(r.localEndpoints), c.local);
    const all = c.all ?? c.cluster ?? c.local ?? [];
    assert.deepEqual(keys(r.allReachableEndpoints), [...all].sort());
    assert.equal(r.hasAnyEndpoints, c.hasAny);
  });
}

test('topologyModeFromHints chooses from ready endpoints only', () => {
  assert.equal(topologyModeFromHints([], TEST_NODE, 'zone-a'), '');
  assert.equal(
    topologyModeFromHints([ep('10.0.0.1:80', { zones: ['zone-a'] })], TEST_NODE, 'zone-a'),
    'PreferSameZone',
  );
  assert.equal(
    topologyModeFromHints([ep('10.0.0.1:80', { nodes: [TEST_NODE] })], TEST_NODE, 'zone-a'),
    'PreferSameNode',
  );
  assert.equal(
    topologyModeFromHints([ep('10.0.0.1:80', { zones: ['zone-a'], ready: false })], TEST_NODE, 'zone-a'),
    '',
  );
});

// ---- packet-flow cases #34-40, from EndpointSlice JSON through the real intake ----

function terminatingCase(etp: 'Local' | 'Cluster', eps: Array<[string, object, boolean]>) {
  const s = makeService('ns1', 'svc1', (x) => {
    withClusterIP(x, '172.30.1.1');
    x.spec.type = 'LoadBalancer';
    x.spec.ports = [svcPort('', 80, 'TCP', { nodePort: 3001 })];
    x.spec.externalTrafficPolicy = etp;
    x.spec.healthCheckNodePort = 30000;
  });
  withLoadBalancerIngress(s, '1.2.3.4');
  const slice = makeSlice('ns1', 'svc1', 1, (x) => {
    x.ports = [slicePort('', 80)];
    x.endpoints = eps.map(([ip, cond, local]) => endpoint(ip, { ...cond, nodeName: local ? TEST_NODE : 'host-1' }));
  });
  const st = syncStateFromObjects({ services: [s], slices: [slice], family: 'IPv4' });
  return st.categorized.get('ns1/svc1')!;
}

test('5.3 #34/#35: pods reach ready eps anywhere; external traffic only ready local ones', () => {
  const c = terminatingCase('Local', [
    ['10.0.1.1', READY, true],
    ['10.0.1.2', { ready: true }, true],
    ['10.0.1.3', SERVING_TERMINATING, true],
    ['10.0.1.4', TERMINATING_NOT_SERVING, true],
    ['10.0.1.5', READY, false],
  ]);
  assert.deepEqual(keys(c.clusterEndpoints), ['10.0.1.1:80', '10.0.1.2:80', '10.0.1.5:80']);
  assert.deepEqual(keys(c.localEndpoints), ['10.0.1.1:80', '10.0.1.2:80']);
});

test('5.3 #36/#37: only terminating locals: cluster uses the remote ready one, local falls back', () => {
  const c = terminatingCase('Local', [
    ['10.0.1.2', SERVING_TERMINATING, true],
    ['10.0.1.3', SERVING_TERMINATING, true],
    ['10.0.1.4', TERMINATING_NOT_SERVING, true],
    ['10.0.1.5', READY, false],
  ]);
  assert.deepEqual(keys(c.clusterEndpoints), ['10.0.1.5:80']);
  assert.deepEqual(keys(c.localEndpoints), ['10.0.1.2:80', '10.0.1.3:80']);
});

test('5.3 #38: only a remote serving-terminating endpoint: cluster uses it, external has none (DROP)', () => {
  const c = terminatingCase('Local', [['10.0.1.5', SERVING_TERMINATING, false]]);
  assert.deepEqual(keys(c.clusterEndpoints), ['10.0.1.5:80']);
  assert.deepEqual(keys(c.localEndpoints), []);
  assert.equal(c.hasAnyEndpoints, true);
});

for (const local of [true, false]) {
  test(`5.3 #39: only a terminating non-serving ${local ? 'local' : 'remote'} endpoint: no endpoints at all (REJECT)`, () => {
    const c = terminatingCase('Local', [['10.0.1.5', TERMINATING_NOT_SERVING, local]]);
    assert.deepEqual(keys(c.clusterEndpoints), []);
    assert.deepEqual(keys(c.localEndpoints), []);
    assert.equal(c.hasAnyEndpoints, false);
  });
}

test('5.3 #40: eTP Cluster, all serving-terminating: both paths use them', () => {
  const c = terminatingCase('Cluster', [
    ['10.0.1.2', SERVING_TERMINATING, true],
    ['10.0.1.3', SERVING_TERMINATING, true],
    ['10.0.1.4', TERMINATING_NOT_SERVING, true],
    ['10.0.1.5', SERVING_TERMINATING, false],
  ]);
  assert.deepEqual(keys(c.clusterEndpoints), ['10.0.1.2:80', '10.0.1.3:80', '10.0.1.5:80']);
  assert.equal(c.localEndpoints, null);
  assert.deepEqual(keys(c.allReachableEndpoints), ['10.0.1.2:80', '10.0.1.3:80', '10.0.1.5:80']);
});
