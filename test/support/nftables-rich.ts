// A rich nftables fixture set for the netlink-vs-`nft -f` parity proof: every
// Service feature the renderer writes, in both families, under every config
// knob that changes the static rules. Used by the real-kernel tests
// (test/e2e/nftables-parity and nftables-repair) and by the rule-body check
// (src/platform/nftables/rulebody.test.ts).
//
// One "kitchen sink" SyncState per family holds: ClusterIP over TCP, UDP and
// SCTP; many endpoints (unequal 'maps' intervals); sessionAffinity ClientIP
// (default and custom timeout) with Cluster and Local policies; NodePort;
// externalIPs; LoadBalancer with source ranges, one of them covering the node
// IP (the VIPs are then let through); eTP Local with and without local
// endpoints; iTP Local; no endpoints (reject) and only non-serving terminating
// endpoints (drop); a name long enough to be truncated. No two Services claim
// the same address and port (the renderer keeps one owner's value for such a
// shared element, which is a conflict, not a feature to prove here). The configs vary the
// local-traffic detector (CIDR, several CIDRs, bridge, interface prefix, none),
// masqueradeAll, nodePortAddresses (one IP, all, none matching) and the
// ServiceCIDRs (present, absent).
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig, IPFamily, SyncState } from '../../src/core/types.js';
import { PACKET_FLOW_SCENARIOS } from '../cases/packetflow.js';
import { scenarioConfig, scenarioSyncState } from '../cases/resolve.js';
import {
  endpoint,
  makeNode,
  makeService,
  makeSlice,
  READY,
  SERVING_TERMINATING,
  slicePort,
  svcPort,
  TERMINATING_NOT_SERVING,
  withClusterIP,
  withLoadBalancerIngress,
  type EndpointOpts,
  type TestService,
  type TestSlice,
} from '../support/fixtures.js';
import { LABEL_SERVICE_NAME } from '../../src/core/api.js';

export interface RichCase {
  readonly name: string;
  readonly family: IPFamily;
  readonly config: DataplaneConfig;
  readonly state: SyncState;
}

const A = {
  IPv4: {
    node: '192.168.0.10',
    svc: (n: number) => `172.30.0.${n}`,
    ep: (n: number) => `10.180.${n >> 8}.${n & 255}`,
    ext: '192.168.99.11',
    lb: ['1.2.3.4', '5.6.7.8', '9.10.11.12'],
    ranges: ['203.0.113.0/25', '198.51.100.0/24'],
    nodeRange: '192.168.0.0/16',
    pod: ['10.0.0.0/8'],
    pods: ['10.0.0.0/8', '100.64.0.0/10'],
    serviceCIDRs: ['172.30.0.0/16', '172.31.0.0/24'],
    loopback: '127.0.0.1',
  },
  IPv6: {
    node: '2001:db8::10',
    svc: (n: number) => `fd00:172:30::${n.toString(16)}`,
    ep: (n: number) => `fd00:10:180::${n.toString(16)}`,
    ext: '2001:db8:99::11',
    lb: ['2001:db8:1::4', '2001:db8:1::8', '2001:db8:1::c'],
    ranges: ['2001:db8:ffff::/64', '2001:db8:fffe::/48'],
    nodeRange: '2001:db8::/64',
    pod: ['fd00:10::/64'],
    pods: ['fd00:10::/64', 'fd00:11::/64'],
    serviceCIDRs: ['fd00:172:30::/108', 'fd00:172:31::/112'],
    loopback: '::1',
  },
} as const;

const LOCAL = 'node-a';

function sliceFor(
  family: IPFamily,
  name: string,
  ports: Array<[string, number, 'TCP' | 'UDP' | 'SCTP']>,
  eps: Array<[number, string | undefined, EndpointOpts?]>,
) {
  return makeSlice('ns', name, 1, (s) => {
    s.addressType = family;
    s.endpoints = eps.map(([n, node, opts]) => endpoint(A[family].ep(n), { ...(opts ?? READY), nodeName: node }));
    s.ports = ports.map(([pn, p, proto]) => slicePort(pn, p, proto));
  });
}

function svc(family: IPFamily, name: string, ip: number, mutate: (s: TestService) => void): TestService {
  const s = withClusterIP(makeService('ns', name, mutate), A[family].svc(ip));
  s.spec.ipFamilies = [family];
  return s;
}

/** The kitchen sink's Service and EndpointSlice objects of one family (see the file comment). */
export function kitchenSinkObjects(family: IPFamily): { services: TestService[]; slices: TestSlice[] } {
  const a = A[family];
  const services: TestService[] = [];
  const slices = [];
  services.push(
    svc(family, 'multi', 10, (s) => {
      s.spec.ports = [svcPort('http', 80), svcPort('dns', 53, 'UDP'), svcPort('sig', 9, 'SCTP')];
    }),
  );
  slices.push(
    sliceFor(
      family,
      'multi',
      [
        ['http', 8080, 'TCP'],
        ['dns', 5353, 'UDP'],
        ['sig', 9009, 'SCTP'],
      ],
      [
        [1, LOCAL],
        [2, 'node-b'],
      ],
    ),
  );
  // Many endpoints: 'maps' intervals of unequal size, a long lean cascade.
  services.push(svc(family, 'wide', 11, (s) => (s.spec.ports = [svcPort('p', 443)])));
  slices.push(
    sliceFor(
      family,
      'wide',
      [['p', 8443, 'TCP']],
      Array.from({ length: 19 }, (_, i) => [100 + i, i % 3 === 0 ? LOCAL : 'node-b'] as [number, string]),
    ),
  );
  services.push(
    svc(family, 'sticky', 12, (s) => {
      s.spec.sessionAffinity = 'ClientIP';
      s.spec.ports = [svcPort('p', 80)];
    }),
  );
  slices.push(
    sliceFor(
      family,
      'sticky',
      [['p', 80, 'TCP']],
      [
        [20, LOCAL],
        [21, 'node-b'],
        [22, 'node-b'],
      ],
    ),
  );
  services.push(
    withLoadBalancerIngress(
      svc(family, 'lb-local-sticky', 13, (s) => {
        s.spec.type = 'LoadBalancer';
        s.spec.externalTrafficPolicy = 'Local';
        s.spec.sessionAffinity = 'ClientIP';
        s.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: 300 } };
        s.spec.healthCheckNodePort = 32000;
        s.spec.ports = [svcPort('p', 80, 'TCP', { nodePort: 30013 })];
      }),
      a.lb[2]!,
    ),
  );
  slices.push(
    sliceFor(
      family,
      'lb-local-sticky',
      [['p', 80, 'TCP']],
      [
        [30, LOCAL],
        [31, 'node-b'],
      ],
    ),
  );
  services.push(
    withLoadBalancerIngress(
      svc(family, 'lb-ranges', 14, (s) => {
        s.spec.type = 'LoadBalancer';
        s.spec.loadBalancerSourceRanges = [...a.ranges];
        s.spec.externalIPs = [a.ext];
        s.spec.ports = [svcPort('p', 80, 'TCP', { nodePort: 30014 }), svcPort('u', 53, 'UDP', { nodePort: 30015 })];
      }),
      a.lb[0]!,
      a.lb[1]!,
    ),
  );
  slices.push(
    sliceFor(
      family,
      'lb-ranges',
      [
        ['p', 80, 'TCP'],
        ['u', 53, 'UDP'],
      ],
      [[40, 'node-b']],
    ),
  );
  // A source range covering the node IP: the VIPs are allowed as sources too.
  services.push(
    withLoadBalancerIngress(
      svc(family, 'lb-node-range', 15, (s) => {
        s.spec.type = 'LoadBalancer';
        s.spec.loadBalancerSourceRanges = [a.nodeRange];
        s.spec.ports = [svcPort('p', 8080, 'TCP', { nodePort: 30016 })];
      }),
      a.lb[1]!,
    ),
  );
  slices.push(sliceFor(family, 'lb-node-range', [['p', 8080, 'TCP']], [[50, LOCAL]]));
  // eTP Local without local endpoints (drop for external traffic), iTP Local.
  services.push(
    svc(family, 'np-local', 16, (s) => {
      s.spec.type = 'NodePort';
      s.spec.externalTrafficPolicy = 'Local';
      s.spec.internalTrafficPolicy = 'Local';
      s.spec.externalIPs = [a.ext];
      s.spec.ports = [svcPort('p', 8082, 'TCP', { nodePort: 30017 })];
    }),
  );
  slices.push(sliceFor(family, 'np-local', [['p', 80, 'TCP']], [[60, 'node-b']]));
  // No endpoints at all: reject, on the ClusterIP and the NodePort.
  services.push(
    svc(family, 'empty', 17, (s) => {
      s.spec.type = 'NodePort';
      s.spec.ports = [svcPort('p', 80, 'TCP', { nodePort: 30018 }), svcPort('s', 99, 'SCTP', { nodePort: 30019 })];
    }),
  );
  // Only a non-serving terminating endpoint: no usable endpoint (reject), and a
  // serving-terminating one elsewhere (used as a fallback).
  services.push(svc(family, 'terminating', 18, (s) => (s.spec.ports = [svcPort('p', 80)])));
  slices.push(sliceFor(family, 'terminating', [['p', 80, 'TCP']], [[70, 'node-b', TERMINATING_NOT_SERVING]]));
  services.push(svc(family, 'fallback', 19, (s) => (s.spec.ports = [svcPort('p', 80)])));
  slices.push(sliceFor(family, 'fallback', [['p', 80, 'TCP']], [[71, LOCAL, SERVING_TERMINATING]]));
  // A name long enough for the chain name to be hashed and truncated.
  const long = `long-${'x'.repeat(58)}`;
  services.push(svc(family, long, 20, (s) => (s.spec.ports = [svcPort(`port-${'y'.repeat(40)}`, 80)])));
  slices.push(sliceFor(family, long, [[`port-${'y'.repeat(40)}`, 80, 'TCP']], [[80, 'node-b']]));
  // An open source range (0.0.0.0/0 covers the node IP, so the VIP is added):
  // an interval that reaches the top of the address space.
  services.push(
    withLoadBalancerIngress(
      svc(family, 'lb-open', 21, (s) => {
        s.spec.type = 'LoadBalancer';
        s.spec.loadBalancerSourceRanges = [family === 'IPv4' ? '0.0.0.0/0' : '::/0'];
        s.spec.ports = [svcPort('p', 81, 'TCP', { nodePort: 30021 })];
      }),
      a.lb[1]!,
    ),
  );
  slices.push(sliceFor(family, 'lb-open', [['p', 81, 'TCP']], [[90, 'node-b']]));
  return { services, slices };
}

/** A SyncState of the kitchen sink's objects (all changed, full sync, unless told). */
export function stateOf(
  family: IPFamily,
  objs: { services: readonly TestService[]; slices: readonly TestSlice[] },
  opts: { serviceCIDRs?: boolean | readonly string[]; changed?: readonly string[] } = {},
): SyncState {
  const a = A[family];
  const cidrs = opts.serviceCIDRs ?? true;
  return syncStateFromObjects({
    services: objs.services,
    slices: objs.slices,
    family,
    nodeName: LOCAL,
    node: makeNode(LOCAL, { internalIPs: [a.node] }),
    serviceCIDRs: cidrs === true ? [...a.serviceCIDRs] : cidrs === false ? [] : cidrs,
    fullSync: opts.changed === undefined,
    ...(opts.changed ? { changedServices: opts.changed } : {}),
  });
}

/** The kitchen-sink state of one family (see the file comment). */
export function kitchenSink(family: IPFamily, serviceCIDRs = true): SyncState {
  return stateOf(family, kitchenSinkObjects(family), { serviceCIDRs });
}

export interface Step {
  readonly label: string;
  readonly state: SyncState;
  /** Milliseconds the clock moves before this step (stale chains are deleted >= 1 s after their flush). */
  readonly advanceMs?: number;
  /** Start a new dataplane first (a restart: the next sync reads the table back). */
  readonly restart?: boolean;
}

/**
 * The kitchen sink through a life of changes: endpoints added, removed and
 * replaced (also under affinity), a Service deleted and one added, the first
 * endpoint of an empty Service, stale chains aged out, new ServiceCIDRs (a
 * full sync), and a restart.
 */
export function kitchenSinkSteps(family: IPFamily): Step[] {
  const objs = kitchenSinkObjects(family);
  const steps: Step[] = [{ label: 'cold sync', state: stateOf(family, objs) }];
  const slice = (name: string) => objs.slices.find((s) => s.metadata.labels?.[LABEL_SERVICE_NAME] === name)!;
  const ep = (n: number, node = 'node-b') => endpoint(A[family].ep(n), { ...READY, nodeName: node });
  const partial = (label: string, ...changed: string[]) =>
    steps.push({ label, state: stateOf(family, objs, { changed: changed.map((c) => `ns/${c}`) }) });
  slice('multi').endpoints.push(ep(3, LOCAL));
  partial('one more endpoint (local)', 'multi');
  slice('wide').endpoints.splice(3, 10);
  partial('ten endpoints fewer', 'wide');
  slice('sticky').endpoints.splice(0, 1, ep(23));
  partial('an affinity endpoint replaced', 'sticky');
  objs.services.splice(
    objs.services.findIndex((s) => s.metadata.name === 'lb-ranges'),
    1,
  );
  partial('a LoadBalancer with source ranges deleted', 'lb-ranges');
  objs.services.push(
    svc(family, 'fresh', 30, (s) => {
      s.spec.externalIPs = [A[family].ext];
      s.spec.ports = [svcPort('p', 8081, 'UDP')];
    }),
  );
  objs.slices.push(sliceFor(family, 'fresh', [['p', 8081, 'UDP']], [[95, LOCAL]]));
  partial('a Service added', 'fresh');
  objs.slices.push(sliceFor(family, 'empty', [['p', 80, 'TCP']], [[96, LOCAL]]));
  partial('the first endpoint of an empty Service', 'empty');
  steps.push({ label: 'stale chains aged out', state: stateOf(family, objs, { changed: [] }), advanceMs: 1500 });
  steps.push({
    label: 'new ServiceCIDRs (full sync)',
    state: stateOf(family, objs, { serviceCIDRs: [A[family].serviceCIDRs[0]!] }),
  });
  steps.push({ label: 'restart (read back, full sync)', state: stateOf(family, objs), restart: true });
  return steps;
}

function config(family: IPFamily, over: Partial<DataplaneConfig> = {}): DataplaneConfig {
  const a = A[family];
  return {
    family,
    masqueradeMark: 0x4000,
    masqueradeAll: false,
    localDetector: { kind: 'cidr', cidrs: [...a.pod] },
    nodePortAddresses: [family === 'IPv4' ? `${a.node}/32` : `${a.node}/128`],
    localhostNodePorts: false,
    localIPs: [a.loopback, a.node, a.ext],
    ...over,
  };
}

/** The kitchen sink under each config that changes the static rules, both families. */
export function richCases(): RichCase[] {
  const out: RichCase[] = [];
  for (const family of ['IPv4', 'IPv6'] as const) {
    const a = A[family];
    const variants: Array<[string, Partial<DataplaneConfig>, boolean]> = [
      ['cidr detector', {}, true],
      [
        'several pod CIDRs, nodePortAddresses all',
        { localDetector: { kind: 'cidr', cidrs: [...a.pods] }, nodePortAddresses: null },
        true,
      ],
      ['bridge detector, no ServiceCIDRs', { localDetector: { kind: 'bridge', interfaceName: 'cbr0' } }, false],
      [
        'prefix detector, no nodePort address',
        { localDetector: { kind: 'prefix', interfacePrefix: 'veth' }, nodePortAddresses: [] },
        true,
      ],
      [
        'no detector, masqueradeAll, mark bit 0',
        { localDetector: { kind: 'none' }, masqueradeAll: true, masqueradeMark: 1 },
        true,
      ],
    ];
    for (const [name, over, cidrs] of variants)
      out.push({
        name: `${family} kitchen sink: ${name}`,
        family,
        config: config(family, over),
        state: kitchenSink(family, cidrs),
      });
  }
  return out;
}

/** Every packet-flow scenario as a case (their configs are the nftables mode defaults). */
export function packetFlowCases(): RichCase[] {
  return PACKET_FLOW_SCENARIOS.map((s) => ({
    name: `packet-flow: ${s.name}`,
    family: s.family,
    config: scenarioConfig(s, 'nftables'),
    state: scenarioSyncState(s),
  }));
}
