// The proxy's own canary Service: one TCP service port the engine adds to
// every sync of a family, so each mode programs it exactly as it programs a
// user's Service, and a connection to it tests what was really written.
//
// Its ClusterIP sits in 169.254.255.0/24, a link-local block RFC 3927 keeps
// back from address autoconfiguration; the intake refuses link-local
// ClusterIPs (serviceport.ts), so no user's Service can ever take it. Its
// namespace holds a dot, which no Kubernetes namespace may, so its keys never
// meet a user's either.

import { endpointsKey } from './endpointslicecache.js';
import { categorizeEndpoints } from './topology.js';
import type { Endpoint, IPFamily, ServicePort, ServicePortName, SyncState } from './types.js';
import { namespacedName, servicePortNameString } from './types.js';

export const CANARY_NAMESPACE = 'kube-proxy-ts.canary';
export const CANARY_NAME = 'datapath';
export const CANARY_SERVICE_KEY = namespacedName(CANARY_NAMESPACE, CANARY_NAME);
/** Its one port is unnamed, so the service port's key is the Service's. */
export const CANARY_SERVICE_PORT_KEY = CANARY_SERVICE_KEY;
/** The canary's ClusterIP (IPv4 only: an IPv6 link-local address needs a zone, which a ClusterIP cannot carry). */
export const CANARY_VIP4 = '169.254.255.253';
/** Port of the canary's ClusterIP; the endpoint's port is whatever the listener got. */
export const CANARY_PORT = 10257;

/** What the canary service port points at: the proxy's own listener. */
export interface CanaryTarget {
  readonly servicePort: ServicePort;
  readonly endpoint: Endpoint;
  /** endpointsKey of the service port (the key of the endpoints map a sync reads). */
  readonly endpointsKey: string;
}

export function isCanaryServiceKey(serviceKey: string): boolean {
  return serviceKey === CANARY_SERVICE_KEY;
}

/** The canary Service port and its one local endpoint, ip:port of the listener. */
export function canaryTarget(family: IPFamily, nodeName: string, ip: string, port: number): CanaryTarget {
  const name: ServicePortName = { namespace: CANARY_NAMESPACE, name: CANARY_NAME, port: '', protocol: 'TCP' };
  const servicePort: ServicePort = {
    name,
    key: servicePortNameString(name),
    serviceKey: CANARY_SERVICE_KEY,
    family,
    clusterIP: CANARY_VIP4,
    port: CANARY_PORT,
    protocol: 'TCP',
    nodePort: 0,
    externalIPs: [],
    loadBalancerVIPs: [],
    loadBalancerSourceRanges: [],
    stickyMaxAgeSeconds: 0,
    externalPolicyLocal: false,
    internalPolicyLocal: false,
    healthCheckNodePort: 0,
    trafficDistribution: '',
    externallyAccessible: false,
    usesClusterEndpoints: true,
    usesLocalEndpoints: false,
  };
  const endpoint: Endpoint = {
    ip,
    port,
    key: `${ip}:${port}`,
    isLocal: true,
    ready: true,
    serving: true,
    terminating: false,
    zoneHints: null,
    nodeHints: null,
    nodeName,
    zone: '',
  };
  return { servicePort, endpoint, endpointsKey: endpointsKey(name) };
}

/**
 * A state with the canary added, as the running proxy syncs it: what `diff`
 * renders, so the canary the proxy wrote is not reported as a change.
 */
export function withCanaryState(state: SyncState, c: CanaryTarget): SyncState {
  const k = c.servicePort.key;
  const eps = [c.endpoint];
  return {
    ...state,
    services: new Map(state.services).set(k, c.servicePort),
    endpoints: new Map(state.endpoints).set(k, eps),
    categorized: new Map(state.categorized).set(
      k,
      categorizeEndpoints(eps, c.servicePort, state.node.name, state.node.labels),
    ),
  };
}
