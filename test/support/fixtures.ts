// Builders of Service / EndpointSlice / Node JSON for tests, in the style of
// upstream's makeTestService / makeTestEndpointSlice. Each returns a fresh
// plain object; `mutate` edits it in place before it is returned.
//
//   const svc = makeService('ns1', 'svc1', (s) => {
//     s.spec.clusterIP = '172.30.0.41';
//     s.spec.ports = [svcPort('p80', 80)];
//   });
//   const slice = makeSlice('ns1', 'svc1', 1, (s) => {
//     s.endpoints = [endpoint('10.180.0.1', { nodeName: TEST_NODE })];
//     s.ports = [slicePort('p80', 80)];
//   });
//   const state = syncStateFromObjects({ services: [svc], slices: [slice], family: 'IPv4' });
//
// Addresses follow the packet-flow cases (docs/packet-flows.md; constants below).

import type {
  EndpointPort,
  EndpointSlice,
  Node,
  ProtocolName,
  Service,
  ServicePortSpec,
  ServiceSpec,
  SliceEndpoint,
} from '../../src/core/api.js';
import { LABEL_SERVICE_NAME, LABEL_TOPOLOGY_ZONE } from '../../src/core/api.js';
import type { DataplaneConfig } from '../../src/core/types.js';

export const TEST_NODE = 'test-node';
export const NODE_IP = '192.168.0.2';
export const ALT_NODE_IP = '192.168.1.2';
export const NODE_IPV6 = 'fd00:10::2';
export const POD_CIDR = '10.0.0.0/8';
export const POD_CLIENT = '10.0.0.2';
export const SERVICE_CIDR = '172.30.0.0/16';
export const SERVICE_CIDR_V6 = 'fd00:172:30::/108';
export const EXTERNAL_IP = '192.168.99.11';
export const LB_IPS = ['1.2.3.4', '5.6.7.8', '9.10.11.12'] as const;
export const EXTERNAL_CLIENT = '203.0.113.2';
export const OUTSIDE_RANGE_CLIENT = '203.0.113.130';

/** The node's IPv4 datapath settings most unit tests of the renderers use (pods in POD_CIDR, NodePorts on NODE_IP). */
export const NODE_CONFIG4: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: [POD_CIDR] },
  nodePortAddresses: [`${NODE_IP}/32`],
  localhostNodePorts: false,
  localIPs: ['127.0.0.1', NODE_IP],
};

/** A Service whose spec is always present (so `s.spec.x = ...` type-checks). */
export type TestService = Service & { spec: ServiceSpec };
export type TestSlice = EndpointSlice & { endpoints: SliceEndpoint[]; ports: EndpointPort[] };

/** Default: type ClusterIP, no clusterIP (set one), no ports. */
export function makeService(namespace: string, name: string, mutate?: (svc: TestService) => void): TestService {
  const svc: TestService = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { namespace, name, uid: `uid-${namespace}-${name}`, resourceVersion: '1' },
    spec: { type: 'ClusterIP', ports: [] },
  };
  mutate?.(svc);
  return svc;
}

export function svcPort(
  name: string,
  port: number,
  protocol: ProtocolName = 'TCP',
  extra: Partial<ServicePortSpec> = {},
): ServicePortSpec {
  return { name, port, protocol, targetPort: port, ...extra };
}

/** Sets clusterIP and clusterIPs together (single-stack). */
export function withClusterIP(svc: TestService, ip: string): TestService {
  svc.spec.clusterIP = ip;
  svc.spec.clusterIPs = [ip];
  svc.spec.ipFamilies = [ip.includes(':') ? 'IPv6' : 'IPv4'];
  return svc;
}

/** LB status ingress entries; ipMode as given (undefined = unset). */
export function withLoadBalancerIngress(
  svc: TestService,
  ...ips: Array<string | { ip: string; ipMode?: 'VIP' | 'Proxy' }>
): TestService {
  svc.status = { loadBalancer: { ingress: ips.map((x) => (typeof x === 'string' ? { ip: x } : { ...x })) } };
  return svc;
}

/**
 * Slice `${serviceName}-${sliceNum}` labelled for `serviceName`.
 * Default: addressType IPv4, no endpoints, no ports.
 */
export function makeSlice(
  namespace: string,
  serviceName: string,
  sliceNum: number | string,
  mutate?: (slice: TestSlice) => void,
): TestSlice {
  const slice: TestSlice = {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      namespace,
      name: `${serviceName}-${sliceNum}`,
      labels: { [LABEL_SERVICE_NAME]: serviceName },
      resourceVersion: '1',
    },
    addressType: 'IPv4',
    endpoints: [],
    ports: [],
  };
  mutate?.(slice);
  return slice;
}

export interface EndpointOpts {
  nodeName?: string;
  zone?: string;
  /** undefined leaves the condition unset (nil), which intake reads as its default. */
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
  forZones?: string[];
  forNodes?: string[];
}

export function endpoint(ip: string, opts: EndpointOpts = {}): SliceEndpoint {
  const ep: SliceEndpoint = { addresses: [ip] };
  const cond: SliceEndpoint['conditions'] = {};
  if (opts.ready !== undefined) cond.ready = opts.ready;
  if (opts.serving !== undefined) cond.serving = opts.serving;
  if (opts.terminating !== undefined) cond.terminating = opts.terminating;
  ep.conditions = cond;
  if (opts.nodeName !== undefined) ep.nodeName = opts.nodeName;
  if (opts.zone !== undefined) ep.zone = opts.zone;
  if (opts.forZones || opts.forNodes) {
    ep.hints = {};
    if (opts.forZones) ep.hints.forZones = opts.forZones.map((name) => ({ name }));
    if (opts.forNodes) ep.hints.forNodes = opts.forNodes.map((name) => ({ name }));
  }
  return ep;
}

/** Shorthands for the condition triples of packet-flow cases #34-40 (docs/packet-flows.md). */
export const READY = { ready: true, serving: true, terminating: false } as const;
export const SERVING_TERMINATING = { ready: false, serving: true, terminating: true } as const;
export const TERMINATING_NOT_SERVING = { ready: false, serving: false, terminating: true } as const;

export function slicePort(name: string, port: number, protocol: ProtocolName = 'TCP'): EndpointPort {
  return { name, port, protocol };
}

export interface NodeOpts {
  labels?: Record<string, string>;
  zone?: string;
  internalIPs?: string[];
  podCIDRs?: string[];
}

/** Default: InternalIP 192.168.0.2, no labels, no podCIDRs. */
export function makeNode(name: string = TEST_NODE, opts: NodeOpts = {}): Node {
  const labels: Record<string, string> = { ...(opts.labels ?? {}) };
  if (opts.zone !== undefined) labels[LABEL_TOPOLOGY_ZONE] = opts.zone;
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels, resourceVersion: '1' },
    spec: { podCIDRs: opts.podCIDRs ?? [], ...(opts.podCIDRs?.[0] ? { podCIDR: opts.podCIDRs[0] } : {}) },
    status: { addresses: (opts.internalIPs ?? [NODE_IP]).map((address) => ({ type: 'InternalIP', address })) },
  };
}
