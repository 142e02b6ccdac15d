// The shared packet-flow table: the same Service behaviours, as data, for
// every mode. Each scenario is Service / EndpointSlice JSON, the node, config
// overrides, and flows with the expected result. Every mode runs the table
// through its own renderer -> Fake -> trace (runtable.ts), and the network
// namespace end-to-end suites reuse the setups. The cases follow upstream's
// packet-flow tests (runPacketFlowTests and its tables in
// pkg/proxy/iptables/proxier_test.go and pkg/proxy/nftables/proxier_test.go);
// scenario names are upstream's test names where there is one.
//
// Conventions:
// - `output` is "" (nothing matched), "REJECT" | "DROP" | "ACCEPT", or a
//   comma-separated endpoint list. Endpoint lists are compared as SETS (use
//   sameOutput()): with probabilistic selection every endpoint is a possible
//   result, and tracers may collect them in different orders.
// - expected.default applies to every mode without its own entry. A mode
//   that does not honour a case lists it, with the reason, in the skips it
//   hands runPacketFlowTable (the table itself stays mode-neutral).
// - config.nodePortAddresses undefined means each mode's own default
//   (iptables: all local IPs; nftables: "primary").
// - `refs` are stable ids of the upstream cases a scenario covers; they
//   appear in the suite names.

import type { EndpointSlice, Service } from '../../src/core/api.js';
import type { IPFamily, Protocol, ProxyMode } from '../../src/core/types.js';
import {
  EXTERNAL_CLIENT as EXT,
  EXTERNAL_CLIENT6 as EXT6,
  EXTERNAL_CLIENT_OUTSIDE_RANGE as EXT_OUT,
  EXTERNAL_IP_NODE,
  LOCAL,
  NODE_IP as NODE,
  NODE_IP6,
  NODE_IP_ALT,
  POD_IP as POD,
  slice,
  service,
} from './fixtures.js';

export interface FlowExpect {
  readonly output: string;
  readonly masq: boolean;
}

export interface PacketFlow {
  readonly name: string;
  readonly src: string;
  readonly dst: string;
  readonly port: number;
  readonly protocol: Protocol;
  /** Per-mode expectations where a mode differs; `default` for all others. */
  readonly expected: Partial<Record<ProxyMode, FlowExpect>> & { readonly default: FlowExpect };
}

export interface ScenarioConfig {
  /** Raw nodePortAddresses (CIDRs or keywords primary/localhost/all); undefined = mode default. */
  readonly nodePortAddresses?: readonly string[];
  readonly localhostNodePorts?: boolean;
  readonly masqueradeAll?: boolean;
  /** false = no local detector; default: cidr 10.0.0.0/8 (fd00:10::/64). */
  readonly detectLocal?: boolean;
}

export interface Scenario {
  readonly name: string;
  /** Ids of the behaviours covered (see the header). */
  readonly refs: readonly number[];
  readonly family: IPFamily;
  readonly setup: {
    readonly services: readonly Service[];
    readonly slices: readonly EndpointSlice[];
    readonly config?: ScenarioConfig;
  };
  readonly flows: readonly PacketFlow[];
}

type Extra = { protocol?: Protocol } & Partial<Record<ProxyMode, FlowExpect>>;

function flow(
  name: string,
  src: string,
  dst: string,
  port: number,
  output: string,
  masq: boolean,
  extra: Extra = {},
): PacketFlow {
  const { protocol, ...modes } = extra;
  return {
    name,
    src,
    dst,
    port,
    protocol: protocol ?? 'TCP',
    expected: { ...modes, default: { output, masq } },
  };
}

/** Compare outputs, endpoint lists as sets. */
export function sameOutput(a: string, b: string): boolean {
  const norm = (s: string) =>
    s
      .split(',')
      .map((x) => x.trim())
      .filter((x) => x !== '')
      .sort()
      .join(', ');
  return norm(a) === norm(b);
}

export function expectedFor(f: PacketFlow, mode: ProxyMode): FlowExpect {
  return f.expected[mode] ?? f.expected.default;
}

const eps = (...xs: string[]) => xs.join(', ');
/** No rule of the mode matches: the packet is routed on untouched. */
const NOMATCH: FlowExpect = { output: '', masq: false };

// ---------------------------------------------------------------- ClusterIP
const svc2Ports = [
  { name: 'http', port: 80 },
  { name: 'https', port: 443, targetPort: 8443 },
  { name: 'dns-udp', port: 53, protocol: 'UDP' as const },
  { name: 'dns-tcp', port: 53, targetPort: 5353 },
  { name: 'dns-sctp', port: 53, protocol: 'SCTP' as const },
];
const clusterIPGeneral: Scenario = {
  name: 'ClusterIPGeneral',
  refs: [1, 2, 3, 4, 5, 6, 7, 8, 9],
  family: 'IPv4',
  setup: {
    services: [
      service('svc1', { clusterIP: '172.30.0.41' }, [{ name: 'p80', port: 80 }]),
      service('svc2', { clusterIP: '172.30.0.42' }, svc2Ports),
    ],
    slices: [
      slice('svc1', [{ name: 'p80', port: 80 }], [{ ip: '10.180.0.1', node: LOCAL }]),
      slice(
        'svc2',
        [
          { name: 'http', port: 80 },
          { name: 'https', port: 8443 },
          { name: 'dns-udp', port: 53, protocol: 'UDP' },
          { name: 'dns-tcp', port: 5353 },
          { name: 'dns-sctp', port: 53, protocol: 'SCTP' },
        ],
        [
          { ip: '10.180.0.1', node: LOCAL },
          { ip: '10.180.2.1', node: 'host2' },
        ],
      ),
    ],
  },
  flows: [
    flow('simple clusterIP', '10.180.0.2', '172.30.0.41', 80, '10.180.0.1:80', false),
    flow('hairpin to cluster IP', '10.180.0.1', '172.30.0.41', 80, '10.180.0.1:80', true),
    flow(
      'clusterIP with multiple endpoints',
      '10.180.0.2',
      '172.30.0.42',
      80,
      eps('10.180.0.1:80', '10.180.2.1:80'),
      false,
    ),
    flow(
      'clusterIP with TargetPort',
      '10.180.0.2',
      '172.30.0.42',
      443,
      eps('10.180.0.1:8443', '10.180.2.1:8443'),
      false,
    ),
    flow(
      'clusterIP with TCP, UDP, SCTP on one port (TCP)',
      '10.180.0.2',
      '172.30.0.42',
      53,
      eps('10.180.0.1:5353', '10.180.2.1:5353'),
      false,
    ),
    flow(
      'clusterIP with TCP, UDP, SCTP on one port (UDP)',
      '10.180.0.2',
      '172.30.0.42',
      53,
      eps('10.180.0.1:53', '10.180.2.1:53'),
      false,
      { protocol: 'UDP' },
    ),
    flow(
      'clusterIP with TCP, UDP, SCTP on one port (SCTP)',
      '10.180.0.2',
      '172.30.0.42',
      53,
      eps('10.180.0.1:53', '10.180.2.1:53'),
      false,
      { protocol: 'SCTP' },
    ),
    flow('TCP-only port does not match UDP traffic', '10.180.0.2', '172.30.0.42', 80, 'REJECT', false, {
      protocol: 'UDP',
      iptables: NOMATCH,
      userspace: NOMATCH,
    }),
    flow('svc1 does not accept svc2 ports', '10.180.0.2', '172.30.0.41', 443, 'REJECT', false, {
      iptables: NOMATCH,
      userspace: NOMATCH,
    }),
    // ipvs: nothing is bound to an unallocated address, so the packet is routed on untouched.
    flow('unallocated IP inside the ServiceCIDR', '10.180.0.2', '172.30.0.50', 80, 'DROP', false, {
      ipvs: NOMATCH,
    }),
  ],
};

// ---------------------------------------------------------------- no endpoints
const noEndpointsReject: Scenario = {
  name: 'NoEndpointsReject',
  refs: [10],
  family: 'IPv4',
  setup: {
    services: [
      service(
        'svc1',
        { type: 'LoadBalancer', clusterIP: '172.30.0.41', externalIPs: [EXTERNAL_IP_NODE], lb: ['1.2.3.4'] },
        [{ name: 'p80', port: 80, nodePort: 3001 }],
      ),
    ],
    slices: [],
  },
  flows: [
    flow('pod to cluster IP with no endpoints', POD, '172.30.0.41', 80, 'REJECT', false),
    flow('external to external IP with no endpoints', EXT, EXTERNAL_IP_NODE, 80, 'REJECT', false),
    flow('pod to NodePort with no endpoints', POD, NODE, 3001, 'REJECT', false),
    flow('external to NodePort with no endpoints', EXT, NODE, 3001, 'REJECT', false),
    flow('pod to LoadBalancer IP with no endpoints', POD, '1.2.3.4', 80, 'REJECT', false),
    flow('external to LoadBalancer IP with no endpoints', EXT, '1.2.3.4', 80, 'REJECT', false),
  ],
};

// ---------------------------------------------------------------- NodePorts
const npService = service('svc1', { type: 'NodePort', clusterIP: '172.30.0.41' }, [
  { name: 'p80', port: 80, nodePort: 3001 },
]);
const npSlice = slice('svc1', [{ name: 'p80', port: 80 }], [{ ip: '10.180.0.1' }, { ip: '10.180.2.1', node: LOCAL }]);
const NP_EPS = eps('10.180.0.1:80', '10.180.2.1:80');
const nodePortsDefault: Scenario = {
  name: 'NodePorts (mode default nodePortAddresses)',
  refs: [11, 12, 13, 14, 15, 16],
  family: 'IPv4',
  setup: { services: [npService], slices: [npSlice] },
  flows: [
    flow('pod to cluster IP', POD, '172.30.0.41', 80, NP_EPS, false),
    flow('external to nodePort', EXT, NODE, 3001, NP_EPS, true),
    flow('node to nodePort', NODE, NODE, 3001, NP_EPS, true),
    // iptables, ipvs and userspace default to every local address, nftables to the primary one.
    flow('external to nodePort on secondary IP', EXT, NODE_IP_ALT, 3001, '', false, {
      iptables: { output: NP_EPS, masq: true },
      userspace: { output: NP_EPS, masq: true },
      ipvs: { output: NP_EPS, masq: true },
    }),
    flow('localhost to nodePort', '127.0.0.1', '127.0.0.1', 3001, '', false, {
      iptables: { output: NP_EPS, masq: true },
    }),
  ],
};
const nodePortsRestricted: Scenario = {
  name: 'NodePorts (nodePortAddresses 192.168.0.0/24 + 127.0.0.1/32)',
  refs: [14, 15],
  family: 'IPv4',
  setup: {
    services: [npService],
    slices: [npSlice],
    config: { nodePortAddresses: ['192.168.0.0/24', '127.0.0.1/32'] },
  },
  flows: [
    flow('external to nodePort', EXT, NODE, 3001, NP_EPS, true),
    flow('external to nodePort on an IP outside nodePortAddresses', EXT, NODE_IP_ALT, 3001, '', false),
    // userspace serves a loopback address listed in nodePortAddresses (its relay needs no route_localnet).
    flow('localhost to nodePort', '127.0.0.1', '127.0.0.1', 3001, '', false, {
      iptables: { output: NP_EPS, masq: true },
      userspace: { output: NP_EPS, masq: true },
    }),
  ],
};
const nodePortsNoLocalhost: Scenario = {
  name: 'NodePorts (localhostNodePorts=false)',
  refs: [16],
  family: 'IPv4',
  setup: { services: [npService], slices: [npSlice], config: { localhostNodePorts: false } },
  flows: [
    flow('external to nodePort', EXT, NODE, 3001, NP_EPS, true),
    flow('localhost to nodePort is not served', '127.0.0.1', '127.0.0.1', 3001, '', false),
  ],
};
const nodePortsIPv6: Scenario = {
  name: 'NodePorts (IPv6)',
  refs: [12, 16],
  family: 'IPv6',
  setup: {
    services: [
      service('svc1', { type: 'NodePort', clusterIP: 'fd00:172:30::41' }, [{ name: 'p80', port: 80, nodePort: 3001 }]),
    ],
    slices: [
      slice('svc1', [{ name: 'p80', port: 80 }], [{ ip: 'fd00:10:180::1' }, { ip: 'fd00:10:180::2:1', node: LOCAL }]),
    ],
  },
  flows: [
    flow('external to nodePort', EXT6, NODE_IP6, 3001, eps('[fd00:10:180::1]:80', '[fd00:10:180::2:1]:80'), true),
    flow('localhost to nodePort is never served on IPv6', '::1', '::1', 3001, '', false),
  ],
};

// ---------------------------------------------------------------- LoadBalancer + source ranges
const lbSourceRanges: Scenario = {
  name: 'LoadBalancer with loadBalancerSourceRanges',
  refs: [17, 18, 19, 20, 21, 22, 23, 24],
  family: 'IPv4',
  setup: {
    services: [
      service(
        'svc1',
        {
          type: 'LoadBalancer',
          clusterIP: '172.30.0.41',
          lb: ['1.2.3.4', '5.6.7.8'],
          loadBalancerSourceRanges: ['192.168.0.0/24', ' 203.0.113.0/25'],
          externalTrafficPolicy: 'Cluster',
        },
        [{ name: 'p80', port: 80, nodePort: 3001 }],
      ),
    ],
    slices: [slice('svc1', [{ name: 'p80', port: 80 }], [{ ip: '10.180.0.1', node: 'host2' }])],
  },
  flows: [
    flow('pod to cluster IP', POD, '172.30.0.41', 80, '10.180.0.1:80', false),
    flow('external to nodePort', EXT, NODE, 3001, '10.180.0.1:80', true),
    flow('nodePort bypasses loadBalancerSourceRanges', EXT_OUT, NODE, 3001, '10.180.0.1:80', true),
    flow('externally-sourced LB traffic to first LB IP', EXT, '1.2.3.4', 80, '10.180.0.1:80', true),
    flow('externally-sourced LB traffic to second LB IP', EXT, '5.6.7.8', 80, '10.180.0.1:80', true),
    flow('LB traffic from outside the ranges is dropped (first IP)', EXT_OUT, '1.2.3.4', 80, 'DROP', false),
    flow('LB traffic from outside the ranges is dropped (second IP)', EXT_OUT, '5.6.7.8', 80, 'DROP', false),
    flow('pod to LB IP is subject to the ranges', POD, '1.2.3.4', 80, 'DROP', false),
    flow('node to LB IP (node inside a range)', NODE, '1.2.3.4', 80, '10.180.0.1:80', true),
    flow('LB IP hairpin (source = LB IP)', '1.2.3.4', '1.2.3.4', 80, '10.180.0.1:80', true),
  ],
};

// ---------------------------------------------------------------- eTP
function etpService(policy: 'Local' | 'Cluster'): Service {
  return service(
    'svc1',
    {
      type: 'LoadBalancer',
      clusterIP: '172.30.0.41',
      externalIPs: [EXTERNAL_IP_NODE],
      lb: ['1.2.3.4'],
      externalTrafficPolicy: policy,
      ...(policy === 'Local' ? { healthCheckNodePort: 30000 } : {}),
    },
    [{ name: 'p80', port: 80, nodePort: 3001 }],
  );
}
const etpSlice = slice(
  'svc1',
  [{ name: 'p80', port: 80 }],
  [
    { ip: '10.180.0.1', node: 'host1' },
    { ip: '10.180.2.1', node: LOCAL },
  ],
);
const ETP_BOTH = eps('10.180.0.1:80', '10.180.2.1:80');
const IPVS_LOCAL_ETP: FlowExpect = { output: '10.180.2.1:80', masq: false };
const etpLocal: Scenario = {
  name: 'ExternalTrafficPolicyLocal',
  refs: [25, 26],
  family: 'IPv4',
  setup: { services: [etpService('Local')], slices: [etpSlice] },
  flows: [
    flow('pod to cluster IP', POD, '172.30.0.41', 80, ETP_BOTH, false),
    // ipvs has no pod short-circuit: the external virtual servers hold the local endpoints only.
    flow('pod to external IP (short-circuit)', POD, EXTERNAL_IP_NODE, 80, ETP_BOTH, false, { ipvs: IPVS_LOCAL_ETP }),
    flow('pod to LB IP (short-circuit)', POD, '1.2.3.4', 80, ETP_BOTH, false, { ipvs: IPVS_LOCAL_ETP }),
    flow('pod to nodePort (short-circuit)', POD, NODE, 3001, ETP_BOTH, false, { ipvs: IPVS_LOCAL_ETP }),
    flow('external to external IP: local endpoint only', EXT, EXTERNAL_IP_NODE, 80, '10.180.2.1:80', false),
    flow('external to LB IP: local endpoint only', EXT, '1.2.3.4', 80, '10.180.2.1:80', false),
    flow('external to nodePort: local endpoint only', EXT, NODE, 3001, '10.180.2.1:80', false),
  ],
};
const etpCluster: Scenario = {
  name: 'ExternalTrafficPolicyCluster',
  refs: [27, 28],
  family: 'IPv4',
  setup: { services: [etpService('Cluster')], slices: [etpSlice] },
  flows: [
    flow('pod to cluster IP', POD, '172.30.0.41', 80, ETP_BOTH, false),
    flow('pod to external IP', POD, EXTERNAL_IP_NODE, 80, ETP_BOTH, true),
    flow('pod to LB IP', POD, '1.2.3.4', 80, ETP_BOTH, true),
    flow('pod to nodePort', POD, NODE, 3001, ETP_BOTH, true),
    flow('external to external IP', EXT, EXTERNAL_IP_NODE, 80, ETP_BOTH, true),
    flow('external to LB IP', EXT, '1.2.3.4', 80, ETP_BOTH, true),
    flow('external to nodePort', EXT, NODE, 3001, ETP_BOTH, true),
  ],
};

// ---------------------------------------------------------------- iTP
function itp(
  name: string,
  refs: number[],
  policy: 'Local' | 'Cluster',
  endpoints: Array<{ ip: string; node: string }> | null,
  output: string,
  extra: Extra = {},
): Scenario {
  return {
    name: `InternalTrafficPolicy: ${name}`,
    refs,
    family: 'IPv4',
    setup: {
      services: [service('svc1', { clusterIP: '172.30.1.1', internalTrafficPolicy: policy }, [{ name: '', port: 80 }])],
      slices: endpoints ? [slice('svc1', [{ name: '', port: 80 }], endpoints)] : [],
    },
    flows: [flow('pod to cluster IP', POD, '172.30.1.1', 80, output, false, extra)],
  };
}
const itpScenarios: Scenario[] = [
  itp(
    'Cluster, all endpoints',
    [29],
    'Cluster',
    [
      { ip: '10.0.1.1', node: LOCAL },
      { ip: '10.0.1.2', node: 'host1' },
      { ip: '10.0.1.3', node: 'host2' },
    ],
    eps('10.0.1.1:80', '10.0.1.2:80', '10.0.1.3:80'),
  ),
  itp(
    'Local, one local endpoint',
    [30],
    'Local',
    [
      { ip: '10.0.1.1', node: LOCAL },
      { ip: '10.0.1.2', node: 'host1' },
      { ip: '10.0.1.3', node: 'host2' },
    ],
    '10.0.1.1:80',
  ),
  itp(
    'Local, two local endpoints',
    [31],
    'Local',
    [
      { ip: '10.0.1.1', node: LOCAL },
      { ip: '10.0.1.2', node: LOCAL },
      { ip: '10.0.1.3', node: 'host2' },
    ],
    eps('10.0.1.1:80', '10.0.1.2:80'),
  ),
  itp(
    'Local, no local endpoints',
    [32],
    'Local',
    [
      { ip: '10.0.1.2', node: 'host1' },
      { ip: '10.0.1.3', node: 'host2' },
    ],
    'DROP',
    // ipvs: the virtual server has no real server, and IPVS answers port unreachable.
    { ipvs: { output: 'REJECT', masq: false } },
  ),
  itp('Local, EndpointSlice deleted', [33], 'Local', null, 'REJECT'),
];

// ---------------------------------------------------------------- terminating endpoints
function termService(policy: 'Local' | 'Cluster'): Service {
  return service(
    'svc1',
    {
      type: 'LoadBalancer',
      clusterIP: '172.30.1.1',
      lb: ['1.2.3.4'],
      externalTrafficPolicy: policy,
      ...(policy === 'Local' ? { healthCheckNodePort: 30000 } : {}),
    },
    [{ name: '', port: 80 }],
  );
}
function term(
  name: string,
  refs: number[],
  policy: 'Local' | 'Cluster',
  endpoints: Parameters<typeof slice>[2],
  cip: string,
  lb: string,
  lbMasq: boolean,
  lbExtra: Extra = {},
): Scenario {
  return {
    name: `TerminatingEndpoints (eTP ${policy}): ${name}`,
    refs,
    family: 'IPv4',
    setup: {
      services: [termService(policy)],
      slices: endpoints.length ? [slice('svc1', [{ name: '', port: 80 }], endpoints)] : [],
    },
    flows: [
      flow('pod to cluster IP', POD, '172.30.1.1', 80, cip, false),
      flow('external to LB IP', EXT, '1.2.3.4', 80, lb, lbMasq, lbExtra),
    ],
  };
}
const T = { ready: false, serving: true, terminating: true };
const TNS = { ready: false, serving: false, terminating: true };
const termScenarios: Scenario[] = [
  term(
    'ready endpoints exist',
    [34, 35],
    'Local',
    [
      { ip: '10.0.1.1', node: LOCAL },
      { ip: '10.0.1.2', node: LOCAL },
      { ip: '10.0.1.3', node: LOCAL, ...T },
      { ip: '10.0.1.4', node: LOCAL, ...TNS },
      { ip: '10.0.1.5', node: 'host1' },
    ],
    eps('10.0.1.1:80', '10.0.1.2:80', '10.0.1.5:80'),
    eps('10.0.1.1:80', '10.0.1.2:80'),
    false,
  ),
  term(
    'only terminating local endpoints',
    [36, 37],
    'Local',
    [
      { ip: '10.0.1.2', node: LOCAL, ...T },
      { ip: '10.0.1.3', node: LOCAL, ...T },
      { ip: '10.0.1.4', node: LOCAL, ...TNS },
      { ip: '10.0.1.5', node: 'host1' },
    ],
    '10.0.1.5:80',
    eps('10.0.1.2:80', '10.0.1.3:80'),
    false,
  ),
  term(
    'only a serving-terminating remote endpoint',
    [38],
    'Local',
    [{ ip: '10.0.1.5', node: 'host1', ...T }],
    '10.0.1.5:80',
    'DROP',
    false,
    // ipvs (upstream #97081): without local endpoints the external virtual
    // server falls back to the cluster ones, unmasqueraded.
    { ipvs: { output: '10.0.1.5:80', masq: false } },
  ),
  term(
    'only a non-serving terminating local endpoint',
    [39],
    'Local',
    [{ ip: '10.0.1.5', node: LOCAL, ...TNS }],
    'REJECT',
    'REJECT',
    false,
  ),
  term(
    'only a non-serving terminating remote endpoint',
    [39],
    'Local',
    [{ ip: '10.0.1.5', node: 'host1', ...TNS }],
    'REJECT',
    'REJECT',
    false,
  ),
  term(
    'serving-terminating fallback',
    [40],
    'Cluster',
    [
      { ip: '10.0.1.2', node: LOCAL, ...T },
      { ip: '10.0.1.3', node: LOCAL, ...T },
      { ip: '10.0.1.4', node: LOCAL, ...TNS },
      { ip: '10.0.1.5', node: 'host1', ...T },
    ],
    eps('10.0.1.2:80', '10.0.1.3:80', '10.0.1.5:80'),
    eps('10.0.1.2:80', '10.0.1.3:80', '10.0.1.5:80'),
    true,
  ),
];

// ---------------------------------------------------------------- internal/external masquerade
const iemServices = [
  service('svc1', { type: 'LoadBalancer', clusterIP: '172.30.0.41', lb: ['1.2.3.4'] }, [
    { name: 'p80', port: 80, nodePort: 3001 },
  ]),
  service(
    'svc2',
    {
      type: 'LoadBalancer',
      clusterIP: '172.30.0.42',
      lb: ['5.6.7.8'],
      externalTrafficPolicy: 'Local',
      healthCheckNodePort: 30002,
    },
    [{ name: 'p80', port: 80, nodePort: 3002 }],
  ),
  service(
    'svc3',
    { type: 'LoadBalancer', clusterIP: '172.30.0.43', lb: ['9.10.11.12'], internalTrafficPolicy: 'Local' },
    [{ name: 'p80', port: 80, nodePort: 3003 }],
  ),
];
const iemSlices = [1, 2, 3].map((n) =>
  slice(
    `svc${n}`,
    [{ name: 'p80', port: 80 }],
    [
      { ip: `10.180.0.${n}`, node: LOCAL },
      { ip: `10.180.1.${n}`, node: 'remote' },
    ],
  ),
);
const both = (n: number) => eps(`10.180.0.${n}:80`, `10.180.1.${n}:80`);
// ipvs: eTP Local virtual servers hold the local endpoint only, for every
// client, and their LOCAL sets skip the masquerade mark.
const IPVS_SVC2_LOCAL: FlowExpect = { output: '10.180.0.2:80', masq: false };
function iemFlows(v: 'detect' | 'noDetector' | 'masqueradeAll'): PacketFlow[] {
  const cipMasq = (fromPod: boolean) => (v === 'masqueradeAll' ? true : v === 'noDetector' ? false : !fromPod);
  return [
    flow('svc1: pod to cluster IP', POD, '172.30.0.41', 80, both(1), cipMasq(true)),
    flow('svc1: pod to nodePort', POD, NODE, 3001, both(1), true),
    flow('svc1: pod to LB', POD, '1.2.3.4', 80, both(1), true),
    flow('svc1: node to cluster IP', NODE, '172.30.0.41', 80, both(1), cipMasq(false)),
    flow('svc1: node to nodePort', NODE, NODE, 3001, both(1), true),
    flow('svc1: node to LB', NODE, '1.2.3.4', 80, both(1), true),
    flow('svc1: external to cluster IP', EXT, '172.30.0.41', 80, both(1), cipMasq(false)),
    flow('svc1: external to nodePort', EXT, NODE, 3001, both(1), true),
    flow('svc1: external to LB', EXT, '1.2.3.4', 80, both(1), true),
    flow('svc2: pod to cluster IP', POD, '172.30.0.42', 80, both(2), cipMasq(true)),
    flow('svc2: pod to nodePort', POD, NODE, 3002, v === 'noDetector' ? '10.180.0.2:80' : both(2), false, {
      ipvs: IPVS_SVC2_LOCAL,
    }),
    flow('svc2: pod to LB', POD, '5.6.7.8', 80, v === 'noDetector' ? '10.180.0.2:80' : both(2), false, {
      ipvs: IPVS_SVC2_LOCAL,
    }),
    flow('svc2: node to cluster IP', NODE, '172.30.0.42', 80, both(2), cipMasq(false)),
    flow('svc2: node to nodePort', NODE, NODE, 3002, both(2), true, { ipvs: IPVS_SVC2_LOCAL }),
    flow('svc2: node to LB', NODE, '5.6.7.8', 80, both(2), true, { ipvs: IPVS_SVC2_LOCAL }),
    flow('svc2: external to cluster IP', EXT, '172.30.0.42', 80, both(2), cipMasq(false)),
    flow('svc2: external to nodePort', EXT, NODE, 3002, '10.180.0.2:80', false),
    flow('svc2: external to LB', EXT, '5.6.7.8', 80, '10.180.0.2:80', false),
    flow('svc3: pod to cluster IP', POD, '172.30.0.43', 80, '10.180.0.3:80', cipMasq(true)),
    flow('svc3: pod to nodePort', POD, NODE, 3003, both(3), true),
    flow('svc3: pod to LB', POD, '9.10.11.12', 80, both(3), true),
    flow('svc3: node to cluster IP', NODE, '172.30.0.43', 80, '10.180.0.3:80', cipMasq(false)),
    flow('svc3: node to nodePort', NODE, NODE, 3003, both(3), true),
    flow('svc3: node to LB', NODE, '9.10.11.12', 80, both(3), true),
    flow('svc3: external to cluster IP', EXT, '172.30.0.43', 80, '10.180.0.3:80', cipMasq(false)),
    flow('svc3: external to nodePort', EXT, NODE, 3003, both(3), true),
    flow('svc3: external to LB', EXT, '9.10.11.12', 80, both(3), true),
  ];
}
const iemScenarios: Scenario[] = [
  {
    name: 'InternalExternalMasquerade',
    refs: [41, 42, 43, 44, 45, 46, 47, 48],
    family: 'IPv4',
    setup: { services: iemServices, slices: iemSlices },
    flows: iemFlows('detect'),
  },
  {
    name: 'InternalExternalMasquerade (no LocalTrafficDetector)',
    refs: [49, 50],
    family: 'IPv4',
    setup: { services: iemServices, slices: iemSlices, config: { detectLocal: false } },
    flows: iemFlows('noDetector'),
  },
  {
    name: 'InternalExternalMasquerade (masqueradeAll)',
    refs: [51],
    family: 'IPv4',
    setup: { services: iemServices, slices: iemSlices, config: { masqueradeAll: true } },
    flows: iemFlows('masqueradeAll'),
  },
];

// ---------------------------------------------------------------- iptables TracePacket / health check
const tracePacketScenario: Scenario = {
  name: 'TracePacket: eTP Local external IP without local endpoints',
  refs: [52, 53],
  family: 'IPv4',
  setup: {
    services: [
      service('svc2', { clusterIP: '172.30.0.42', externalIPs: ['192.168.99.22'], externalTrafficPolicy: 'Local' }, [
        { name: 'p80', port: 80 },
      ]),
    ],
    slices: [slice('svc2', [{ name: 'p80', port: 80 }], [{ ip: '10.180.0.2', node: 'host2' }])],
  },
  flows: [
    flow(
      'node to external IP is short-circuited to the cluster chain',
      NODE,
      '192.168.99.22',
      80,
      '10.180.0.2:80',
      true,
      // ipvs: the node's own traffic to a kube-ipvs0 address is accepted unmarked.
      { ipvs: { output: '10.180.0.2:80', masq: false } },
    ),
    // ipvs (upstream #97081): falls back to the cluster endpoints, unmasqueraded.
    flow('external to external IP without local endpoints', EXT, '192.168.99.22', 80, 'DROP', false, {
      ipvs: { output: '10.180.0.2:80', masq: false },
    }),
  ],
};
function hcScenario(name: string, config?: ScenarioConfig): Scenario {
  return {
    name,
    refs: [54],
    family: 'IPv4',
    setup: { services: [etpService('Local')], slices: [etpSlice], ...(config ? { config } : {}) },
    flows: [flow('health check node port is accepted', '1.2.3.4', NODE, 30000, 'ACCEPT', false)],
  };
}

// ---------------------------------------------------------------- IPv6 LoadBalancer
const lbIPv6: Scenario = {
  name: 'LoadBalancer (IPv6): source ranges and eTP Local',
  refs: [20, 21, 25, 26],
  family: 'IPv6',
  setup: {
    services: [
      service(
        'svc1',
        {
          type: 'LoadBalancer',
          clusterIP: 'fd00:172:30::41',
          lb: ['2001:db8:99::4'],
          loadBalancerSourceRanges: ['2001:db8:ffff::/64'],
        },
        [{ name: 'p80', port: 80, nodePort: 3001 }],
      ),
      service(
        'svc2',
        {
          type: 'LoadBalancer',
          clusterIP: 'fd00:172:30::42',
          lb: ['2001:db8:99::5'],
          externalTrafficPolicy: 'Local',
          healthCheckNodePort: 30002,
        },
        [{ name: 'p80', port: 80, nodePort: 3002 }],
      ),
    ],
    slices: [
      slice('svc1', [{ name: 'p80', port: 80 }], [{ ip: 'fd00:10:180::1', node: 'host2' }]),
      slice(
        'svc2',
        [{ name: 'p80', port: 80 }],
        [
          { ip: 'fd00:10:180::2', node: LOCAL },
          { ip: 'fd00:10:180::3', node: 'host2' },
        ],
      ),
    ],
  },
  flows: [
    flow('pod to cluster IP', 'fd00:10::2', 'fd00:172:30::41', 80, '[fd00:10:180::1]:80', false),
    flow('external inside the range to LB IP', EXT6, '2001:db8:99::4', 80, '[fd00:10:180::1]:80', true),
    flow('external outside the range to LB IP', '2001:db8:eeee::2', '2001:db8:99::4', 80, 'DROP', false),
    flow(
      'eTP Local: external to LB IP reaches the local endpoint only',
      EXT6,
      '2001:db8:99::5',
      80,
      '[fd00:10:180::2]:80',
      false,
    ),
    flow(
      'eTP Local: pod to LB IP is short-circuited',
      'fd00:10::2',
      '2001:db8:99::5',
      80,
      '[fd00:10:180::2]:80, [fd00:10:180::3]:80',
      false,
      { ipvs: { output: '[fd00:10:180::2]:80', masq: false } },
    ),
    flow('eTP Local: external to nodePort', EXT6, NODE_IP6, 3002, '[fd00:10:180::2]:80', false),
  ],
};

// ---------------------------------------------------------------- LB ipMode, sloppy IPs
const lbIPMode: Scenario = {
  name: 'LoadBalancerIngressRouteTypeProxy',
  refs: [55],
  family: 'IPv4',
  setup: {
    services: [
      service('svc1', { type: 'LoadBalancer', clusterIP: '172.30.0.41', lb: [{ ip: '1.2.3.4', ipMode: 'Proxy' }] }, [
        { name: 'p80', port: 80, nodePort: 3001 },
      ]),
      service('svc2', { type: 'LoadBalancer', clusterIP: '172.30.0.42', lb: [{ ip: '5.6.7.8', ipMode: 'VIP' }] }, [
        { name: 'p80', port: 80, nodePort: 3002 },
      ]),
      service('svc3', { type: 'LoadBalancer', clusterIP: '172.30.0.43', lb: ['9.10.11.12'] }, [
        { name: 'p80', port: 80, nodePort: 3003 },
      ]),
    ],
    slices: [1, 2, 3].map((n) =>
      slice(`svc${n}`, [{ name: 'p80', port: 80 }], [{ ip: `10.180.0.${n}`, node: 'host2' }]),
    ),
  },
  flows: [
    flow('ipMode Proxy LB IP is not captured', EXT, '1.2.3.4', 80, '', false),
    flow('ipMode VIP LB IP is captured', EXT, '5.6.7.8', 80, '10.180.0.2:80', true),
    flow('LB IP without ipMode is captured', EXT, '9.10.11.12', 80, '10.180.0.3:80', true),
    flow('the NodePort of an ipMode Proxy service still works', EXT, NODE, 3001, '10.180.0.1:80', true),
  ],
};
const badIPs: Scenario = {
  name: 'BadIPs (leading zeros are parsed sloppily and normalised)',
  refs: [],
  family: 'IPv4',
  setup: {
    services: [
      service(
        'svc1',
        {
          type: 'LoadBalancer',
          clusterIP: '172.30.0.041',
          lb: ['1.2.3.004'],
          loadBalancerSourceRanges: ['203.0.113.000/025'],
        },
        [{ name: 'p80', port: 80, nodePort: 3001 }],
      ),
    ],
    slices: [slice('svc1', [{ name: 'p80', port: 80 }], [{ ip: '10.180.0.1', node: 'host2' }])],
  },
  flows: [
    flow('pod to cluster IP', POD, '172.30.0.41', 80, '10.180.0.1:80', false),
    flow('external inside the range to LB IP', EXT, '1.2.3.4', 80, '10.180.0.1:80', true),
    flow('external outside the range to LB IP', EXT_OUT, '1.2.3.4', 80, 'DROP', false),
  ],
};

export const PACKET_FLOW_SCENARIOS: readonly Scenario[] = [
  clusterIPGeneral,
  noEndpointsReject,
  nodePortsDefault,
  nodePortsRestricted,
  nodePortsNoLocalhost,
  nodePortsIPv6,
  lbSourceRanges,
  etpLocal,
  etpCluster,
  ...itpScenarios,
  ...termScenarios,
  ...iemScenarios,
  tracePacketScenario,
  lbIPv6,
  lbIPMode,
  badIPs,
  hcScenario('HealthCheckNodePort'),
  hcScenario('HealthCheckNodePort (nodePortAddresses 127.0.0.0/8)', { nodePortAddresses: ['127.0.0.0/8'] }),
];
