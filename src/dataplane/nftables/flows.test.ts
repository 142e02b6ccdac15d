// Packet flows through renderer -> Fake -> tracer with nftables' own fixtures
// (the addresses of docs/packet-flows.md). The shared mode-agnostic table runs in
// test/dataplane/nftables-packetflow.test.ts; these cover nft specifics and the tracer.
import { ENDPOINT_LAYOUTS, type EndpointLayout } from './static.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { DataplaneConfig } from '../../core/types.js';
import { Fake } from './fake.js';
import { NftablesPlanner } from '../../platform/nftables/planner.js';
import { trace, type TracePacket } from './trace.js';
import {
  ALT_NODE_IP,
  EXTERNAL_CLIENT,
  EXTERNAL_IP,
  NODE_IP,
  OUTSIDE_RANGE_CLIENT,
  POD_CLIENT,
  SERVICE_CIDR,
  TEST_NODE,
  endpoint,
  makeNode,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
  withLoadBalancerIngress,
} from '../../../test/support/fixtures.js';

const LOCAL_IPS = ['127.0.0.1', NODE_IP, ALT_NODE_IP, EXTERNAL_IP];
const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8'] },
  nodePortAddresses: [`${NODE_IP}/32`],
  localhostNodePorts: false,
  localIPs: LOCAL_IPS,
};

// Each load renders every endpoint layout (ENDPOINT_LAYOUTS order, the production one first);
// check() traces every flow through each.
function load(services: unknown[], slices: unknown[], config: DataplaneConfig = CONFIG): Fake[] {
  const state = syncStateFromObjects({
    services,
    slices,
    family: 'IPv4',
    node: makeNode(TEST_NODE),
    serviceCIDRs: [SERVICE_CIDR],
  });
  return ENDPOINT_LAYOUTS.map((layout) => {
    const fake = new Fake('ip');
    fake.run(new NftablesPlanner(config, layout).plan(state, 0, null).tx);
    return fake;
  });
}

/** The fake of one layout among load()'s. */
const ofLayout = (fakes: Fake[], layout: EndpointLayout): Fake => fakes[ENDPOINT_LAYOUTS.indexOf(layout)]!;

function check(fakes: Fake[], cases: Array<[string, TracePacket, string, boolean]>): void {
  for (const fake of fakes) {
    for (const [name, pkt, output, masq] of cases) {
      const r = trace(fake, pkt, LOCAL_IPS);
      assert.deepEqual({ output: r.output, masq: r.masq }, { output, masq }, `${name}\n${r.matched.join('\n')}`);
    }
  }
}

const lbService = (mutate: (s: ReturnType<typeof makeService>) => void = () => {}) =>
  withLoadBalancerIngress(
    withClusterIP(
      makeService('ns1', 'svc1', (s) => {
        s.spec.type = 'LoadBalancer';
        s.spec.ports = [svcPort('p80', 80, 'TCP', { nodePort: 3001 })];
        s.spec.externalIPs = [EXTERNAL_IP];
        mutate(s);
      }),
      '172.30.0.41',
    ),
    '1.2.3.4',
  );

test('ClusterIP: DNAT, hairpin masquerade, REJECT for wrong port/protocol, DROP for unallocated', () => {
  const svc = withClusterIP(
    makeService('ns1', 'svc1', (s) => {
      s.spec.ports = [svcPort('p80', 80)];
    }),
    '172.30.0.41',
  );
  const slice = makeSlice('ns1', 'svc1', 1, (s) => {
    s.endpoints = [endpoint('10.180.0.1', { nodeName: TEST_NODE })];
    s.ports = [slicePort('p80', 80)];
  });
  check(load([svc], [slice]), [
    ['pod to clusterIP', { src: '10.180.0.2', dst: '172.30.0.41', port: 80 }, '10.180.0.1:80', false],
    ['hairpin', { src: '10.180.0.1', dst: '172.30.0.41', port: 80 }, '10.180.0.1:80', true],
    [
      'external to clusterIP is masqueraded',
      { src: EXTERNAL_CLIENT, dst: '172.30.0.41', port: 80 },
      '10.180.0.1:80',
      true,
    ],
    ['wrong protocol', { src: '10.180.0.2', dst: '172.30.0.41', port: 80, protocol: 'UDP' }, 'REJECT', false],
    ['undefined port', { src: '10.180.0.2', dst: '172.30.0.41', port: 443 }, 'REJECT', false],
    ['unallocated ServiceCIDR IP', { src: '10.180.0.2', dst: '172.30.0.50', port: 80 }, 'DROP', false],
    ['outside ServiceCIDR', { src: '10.180.0.2', dst: '172.31.0.50', port: 80 }, '', false],
  ]);
});

test('no endpoints: REJECT on every address', () => {
  const fakes = load([lbService()], []);
  for (const [src, dst, port] of [
    [POD_CLIENT, '172.30.0.41', 80],
    [EXTERNAL_CLIENT, EXTERNAL_IP, 80],
    [POD_CLIENT, NODE_IP, 3001],
    [EXTERNAL_CLIENT, NODE_IP, 3001],
    [POD_CLIENT, '1.2.3.4', 80],
    [EXTERNAL_CLIENT, '1.2.3.4', 80],
  ] as const) {
    check(fakes, [[`${src} -> ${dst}:${port}`, { src, dst, port }, 'REJECT', false]]);
  }
});

test('NodePort: primary node IP only (nftables default), masqueraded', () => {
  const svc = lbService();
  const slice = makeSlice('ns1', 'svc1', 1, (s) => {
    s.endpoints = [endpoint('10.180.0.1'), endpoint('10.180.2.1', { nodeName: TEST_NODE })];
    s.ports = [slicePort('p80', 80)];
  });
  check(load([svc], [slice]), [
    ['pod to clusterIP', { src: POD_CLIENT, dst: '172.30.0.41', port: 80 }, '10.180.0.1:80, 10.180.2.1:80', false],
    ['external to NodePort', { src: EXTERNAL_CLIENT, dst: NODE_IP, port: 3001 }, '10.180.0.1:80, 10.180.2.1:80', true],
    ['node to itself', { src: NODE_IP, dst: NODE_IP, port: 3001 }, '10.180.0.1:80, 10.180.2.1:80', true],
    ['alternate node IP not served', { src: EXTERNAL_CLIENT, dst: ALT_NODE_IP, port: 3001 }, '', false],
    ['localhost not served', { src: '127.0.0.1', dst: '127.0.0.1', port: 3001 }, '', false],
  ]);
});

test('LoadBalancer source ranges: firewall drops outsiders and pods, allows node and VIP hairpin', () => {
  const svc = withLoadBalancerIngress(
    lbService((s) => {
      s.spec.externalIPs = [];
      s.spec.loadBalancerSourceRanges = ['192.168.0.0/24', ' 203.0.113.0/25'];
    }),
    '1.2.3.4',
    '5.6.7.8',
  );
  const slice = makeSlice('ns1', 'svc1', 1, (s) => {
    s.endpoints = [endpoint('10.180.0.1')];
    s.ports = [slicePort('p80', 80)];
  });
  check(load([svc], [slice]), [
    ['pod to clusterIP', { src: POD_CLIENT, dst: '172.30.0.41', port: 80 }, '10.180.0.1:80', false],
    [
      'outsider to NodePort ignores ranges',
      { src: OUTSIDE_RANGE_CLIENT, dst: NODE_IP, port: 3001 },
      '10.180.0.1:80',
      true,
    ],
    ['allowed to LB', { src: EXTERNAL_CLIENT, dst: '5.6.7.8', port: 80 }, '10.180.0.1:80', true],
    ['outsider to LB', { src: OUTSIDE_RANGE_CLIENT, dst: '1.2.3.4', port: 80 }, 'DROP', false],
    ['pod to LB', { src: POD_CLIENT, dst: '1.2.3.4', port: 80 }, 'DROP', false],
    ['node to LB', { src: NODE_IP, dst: '1.2.3.4', port: 80 }, '10.180.0.1:80', true],
    ['VIP hairpin', { src: '1.2.3.4', dst: '1.2.3.4', port: 80 }, '10.180.0.1:80', true],
  ]);
});

test('externalTrafficPolicy Local: local endpoints only, client IP kept, pod and node short-circuit', () => {
  const svc = lbService((s) => {
    s.spec.externalTrafficPolicy = 'Local';
    s.spec.healthCheckNodePort = 30000;
  });
  const slice = makeSlice('ns1', 'svc1', 1, (s) => {
    s.endpoints = [endpoint('10.180.0.1', { nodeName: 'node2' }), endpoint('10.180.2.1', { nodeName: TEST_NODE })];
    s.ports = [slicePort('p80', 80)];
  });
  const both = '10.180.0.1:80, 10.180.2.1:80';
  check(load([svc], [slice]), [
    ['pod to clusterIP', { src: POD_CLIENT, dst: '172.30.0.41', port: 80 }, both, false],
    ['pod to externalIP', { src: POD_CLIENT, dst: EXTERNAL_IP, port: 80 }, both, false],
    ['pod to NodePort', { src: POD_CLIENT, dst: NODE_IP, port: 3001 }, both, false],
    ['external to LB', { src: EXTERNAL_CLIENT, dst: '1.2.3.4', port: 80 }, '10.180.2.1:80', false],
    ['external to NodePort', { src: EXTERNAL_CLIENT, dst: NODE_IP, port: 3001 }, '10.180.2.1:80', false],
    ['node to LB', { src: NODE_IP, dst: '1.2.3.4', port: 80 }, both, true],
  ]);
});

test('externalTrafficPolicy Local without local endpoints: external DROP, node short-circuits', () => {
  const svc = lbService((s) => {
    s.spec.externalTrafficPolicy = 'Local';
    s.spec.externalIPs = ['192.168.99.22'];
  });
  const slice = makeSlice('ns1', 'svc1', 1, (s) => {
    s.endpoints = [endpoint('10.180.0.2', { nodeName: 'node2' })];
    s.ports = [slicePort('p80', 80)];
  });
  check(load([svc], [slice]), [
    ['node to externalIP', { src: NODE_IP, dst: '192.168.99.22', port: 80 }, '10.180.0.2:80', true],
    ['external to externalIP', { src: EXTERNAL_CLIENT, dst: '192.168.99.22', port: 80 }, 'DROP', false],
    ['external to NodePort', { src: EXTERNAL_CLIENT, dst: NODE_IP, port: 3001 }, 'DROP', false],
  ]);
});

test('internalTrafficPolicy Local: local endpoints only; none local -> DROP', () => {
  const mk = (eps: ReturnType<typeof endpoint>[]) =>
    [
      withClusterIP(
        makeService('ns1', 'svc1', (s) => {
          s.spec.ports = [svcPort('p80', 80)];
          s.spec.internalTrafficPolicy = 'Local';
        }),
        '172.30.1.1',
      ),
      makeSlice('ns1', 'svc1', 1, (s) => {
        s.endpoints = eps;
        s.ports = [slicePort('p80', 80)];
      }),
    ] as const;
  const [svc, slice] = mk([endpoint('10.0.1.1', { nodeName: TEST_NODE }), endpoint('10.0.1.2', { nodeName: 'node1' })]);
  check(load([svc], [slice]), [['local only', { src: POD_CLIENT, dst: '172.30.1.1', port: 80 }, '10.0.1.1:80', false]]);
  const [svc2, slice2] = mk([endpoint('10.0.1.2', { nodeName: 'node1' })]);
  check(load([svc2], [slice2]), [
    ['no local endpoints', { src: POD_CLIENT, dst: '172.30.1.1', port: 80 }, 'DROP', false],
  ]);
});

test('session affinity: per-endpoint chains and sets, every endpoint reachable', () => {
  const svc = withClusterIP(
    makeService('ns1', 'svc1', (s) => {
      s.spec.ports = [svcPort('p80', 80)];
      s.spec.sessionAffinity = 'ClientIP';
      s.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: 10800 } };
    }),
    '172.30.0.41',
  );
  const slice = makeSlice('ns1', 'svc1', 1, (s) => {
    s.endpoints = [endpoint('10.180.0.1'), endpoint('10.180.0.2')];
    s.ports = [slicePort('p80', 80)];
  });
  const fakes = load([svc], [slice]);
  const dump = ofLayout(fakes, 'upstream').dump();
  assert.match(
    dump,
    /^add set ip kube-proxy affinity-[A-Z0-9]{8}-ns1\/svc1\/tcp\/p80__10\.180\.0\.1\/80 \{ type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; \}$/m,
  );
  assert.match(
    dump,
    /^add rule ip kube-proxy endpoint-[A-Z0-9]{8}-ns1\/svc1\/tcp\/p80__10\.180\.0\.2\/80 meta l4proto tcp dnat to 10\.180\.0\.2:80$/m,
  );
  assert.match(
    ofLayout(fakes, 'lean').dump(),
    /^add rule ip kube-proxy service-[A-Z0-9]{8}-ns1\/svc1\/tcp\/p80 numgen random mod 2 0 goto endpoint-[A-Z0-9]{8}-ns1\/svc1\/tcp\/p80__10\.180\.0\.1\/80$/m,
  );
  check(fakes, [
    ['pod to clusterIP', { src: POD_CLIENT, dst: '172.30.0.41', port: 80 }, '10.180.0.1:80, 10.180.0.2:80', false],
  ]);
});

test('lean layout: a numgen cascade with the same names and elements as upstream', () => {
  const svc = withClusterIP(
    makeService('ns1', 'svc1', (s) => {
      s.spec.ports = [svcPort('p80', 80)];
    }),
    '172.30.0.41',
  );
  const slice = makeSlice('ns1', 'svc1', 1, (s) => {
    s.endpoints = ['10.180.0.1', '10.180.0.2', '10.180.0.3'].map((ip) => endpoint(ip));
    s.ports = [slicePort('p80', 80)];
  });
  const fakes = load([svc], [slice]);
  const up = ofLayout(fakes, 'upstream');
  const lean = ofLayout(fakes, 'lean');
  const chain = 'service-ULMVA6XW-ns1/svc1/tcp/p80';
  assert.deepEqual(
    lean.chains.get(chain)!.rules.map((r) => r.rule),
    [
      'numgen random mod 3 0 meta l4proto tcp dnat to 10.180.0.1:80',
      'numgen random mod 2 0 meta l4proto tcp dnat to 10.180.0.2:80',
      'meta l4proto tcp dnat to 10.180.0.3:80',
    ],
  );
  const withoutRules = (f: Fake) =>
    f
      .dump()
      .split('\n')
      .filter((l) => !l.startsWith(`add rule ip kube-proxy ${chain} `))
      .join('\n');
  assert.equal(withoutRules(lean), withoutRules(up));
});

test('no local detector: no ClusterIP masquerade; masqueradeAll: always', () => {
  const svc = withClusterIP(
    makeService('ns1', 'svc1', (s) => {
      s.spec.ports = [svcPort('p80', 80)];
    }),
    '172.30.0.41',
  );
  const slice = makeSlice('ns1', 'svc1', 1, (s) => {
    s.endpoints = [endpoint('10.180.0.1')];
    s.ports = [slicePort('p80', 80)];
  });
  check(load([svc], [slice], { ...CONFIG, localDetector: { kind: 'none' } }), [
    ['external to clusterIP', { src: EXTERNAL_CLIENT, dst: '172.30.0.41', port: 80 }, '10.180.0.1:80', false],
  ]);
  check(load([svc], [slice], { ...CONFIG, masqueradeAll: true }), [
    ['pod to clusterIP', { src: POD_CLIENT, dst: '172.30.0.41', port: 80 }, '10.180.0.1:80', true],
  ]);
});

test('an element comment over 128 bytes is cut to its first 128, so the transaction loads (upstream PR #139516)', () => {
  // The longest valid names: a 62-byte namespace and a 63-byte Service name give a 131-byte "ns/name:http".
  const ns = 'loft-acme-platform-services-team-dev-v-shared-workloads-ns-001';
  const name = 'my-api-svc-x-my-api-namespace-x-acme-shared-vcluster--a1b2c3d4e';
  const full = `${ns}/${name}:http`;
  assert.equal(full.length, 131);
  const svc = makeService(ns, name, (s) => {
    withClusterIP(s, '172.30.0.77');
    s.spec.ports = [svcPort('http', 80)];
  });
  // No endpoints: the no-endpoint-services element carries the service port name as its comment.
  for (const fake of load([svc], [])) {
    const el = fake.listElements('no-endpoint-services').find((e) => e.key[0] === '172.30.0.77');
    assert.equal(el?.comment, full.slice(0, 128));
  }
});
