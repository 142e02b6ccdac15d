// Fixed addresses of the shared packet-flow scenarios (docs/packet-flows.md) and the
// JSON builders the scenarios use. Mode-agnostic: no datapath imports here.

import type { EndpointSlice, LoadBalancerIngress, Service, ServiceSpec } from '../../src/core/api.js';
import type { Protocol } from '../../src/core/types.js';

export const TEST_NODE_NAME = 'test-node';
export const NODE_IP = '192.168.0.2';
export const NODE_IP_ALT = '192.168.1.2';
/** An externalIP that is also a node address. */
export const EXTERNAL_IP_NODE = '192.168.99.11';
export const POD_CIDR = '10.0.0.0/8';
export const POD_IP = '10.0.0.2';
export const SERVICE_CIDR = '172.30.0.0/16';
export const EXTERNAL_CLIENT = '203.0.113.2';
export const EXTERNAL_CLIENT_OUTSIDE_RANGE = '203.0.113.130';

export const NODE_IP6 = '2001:db8::1';
export const NODE_IP6_ALT = '2001:db8:1::2';
export const POD_CIDR6 = 'fd00:10::/64';
export const POD_IP6 = 'fd00:10::2';
export const SERVICE_CIDR6 = 'fd00:172:30::/108';
export const EXTERNAL_CLIENT6 = '2001:db8:ffff::2';

/** The node's interface addresses (upstream fake network: lo + eth0). */
export const LOCAL_IPS_V4 = ['127.0.0.1', NODE_IP, NODE_IP_ALT, EXTERNAL_IP_NODE];
export const LOCAL_IPS_V6 = ['::1', NODE_IP6, NODE_IP6_ALT];

export interface PortDef {
  readonly name?: string;
  readonly port: number;
  readonly protocol?: Protocol;
  readonly targetPort?: number;
  readonly nodePort?: number;
}

/** A Service in namespace ns1. `lb` are status ingress entries (a string is an IP without ipMode). */
export function service(
  name: string,
  spec: ServiceSpec & { lb?: Array<string | LoadBalancerIngress> },
  ports: PortDef[],
): Service {
  const { lb, ...rest } = spec;
  const fam = rest.clusterIP?.includes(':') ? 'IPv6' : 'IPv4';
  const svc: Service = {
    metadata: { namespace: 'ns1', name },
    spec: {
      type: 'ClusterIP',
      clusterIPs: rest.clusterIP ? [rest.clusterIP] : [],
      ipFamilies: [fam],
      ...rest,
      ports: ports.map((p) => ({
        name: p.name ?? '',
        port: p.port,
        protocol: p.protocol ?? 'TCP',
        targetPort: p.targetPort ?? p.port,
        ...(p.nodePort ? { nodePort: p.nodePort } : {}),
      })),
    },
  };
  if (lb) svc.status = { loadBalancer: { ingress: lb.map((x) => (typeof x === 'string' ? { ip: x } : x)) } };
  return svc;
}

export interface EpDef {
  readonly ip: string;
  /** nodeName; 'local' is shorthand for the test node; undefined = no nodeName. */
  readonly node?: string;
  readonly ready?: boolean;
  readonly serving?: boolean;
  readonly terminating?: boolean;
}

export const LOCAL = TEST_NODE_NAME;

/** An EndpointSlice for ns1/<svc>. Ports are {name, port, protocol} of the endpoints. */
export function slice(
  svcName: string,
  ports: Array<{ name?: string; port: number; protocol?: Protocol }>,
  eps: EpDef[],
  sliceName = `${svcName}-1`,
): EndpointSlice {
  return {
    metadata: { namespace: 'ns1', name: sliceName, labels: { 'kubernetes.io/service-name': svcName } },
    addressType: eps[0]?.ip.includes(':') ? 'IPv6' : 'IPv4',
    ports: ports.map((p) => ({ name: p.name ?? '', port: p.port, protocol: p.protocol ?? 'TCP' })),
    endpoints: eps.map((e) => {
      const ready = e.ready ?? true;
      return {
        addresses: [e.ip],
        conditions: { ready, serving: e.serving ?? ready, terminating: e.terminating ?? false },
        ...(e.node !== undefined ? { nodeName: e.node } : {}),
      };
    }),
  };
}
