// The proxy's own canary Service: one TCP service port the engine adds to
// every sync of a family, so each mode programs it exactly as it programs a
// user's Service, and a connection to it tests what was really written.
//
// Its ClusterIP is one no user's Service can ever hold, per family:
//  - IPv4: 169.254.255.253, in the link-local block (169.254.255.0/24 is kept
//    back from address autoconfiguration by RFC 3927). The intake refuses
//    link-local ClusterIPs (serviceport.ts).
//  - IPv6: 100::a9fe:fffd (the IPv4 canary's address in the low 32 bits) in
//    100::/64, the block RFC 6666 sets aside for traffic that is to be
//    discarded. An IPv6 link-local address will not do: it needs a zone, which
//    a ClusterIP cannot carry. The deprecated site-local fec0::/10 was the
//    other candidate, but networks numbered from it before RFC 3879 may still
//    exist, and the kernel gives it a scope of its own in source address
//    selection; nobody numbers hosts from 100::/64, and it has global scope,
//    so a connection to it needs nothing but a route. The intake refuses the
//    whole /64 (specialIPReason in ip.ts), which the API server does not.
// Both are routed like any unicast address: the probe's connect() looks up a
// route before the proxy's DNAT (nat OUTPUT, or the ebpf tc program) sees the
// packet, so the node needs a route covering them, which its default route
// is; without one, connect() fails at once with ENETUNREACH, and the probe
// does not count (src/engine/canary.ts). Should the DNAT be missing, the
// packet follows the default route away: 100::/64 is discarded by routers
// that follow RFC 6666, and RFC 3927 forbids routers to forward 169.254/16.
//
// Its namespace holds a dot, which no Kubernetes namespace may, so its keys
// never meet a user's either.

import { endpointsKey } from './endpointslicecache.js';
import { joinHostPort } from './ip.js';
import { categorizeEndpoints } from './topology.js';
import type { Endpoint, IPFamily, ServicePort, ServicePortName, SyncState } from './types.js';
import { namespacedName, servicePortNameString } from './types.js';

export const CANARY_NAMESPACE = 'kube-proxy-ts.canary';
export const CANARY_NAME = 'datapath';
export const CANARY_SERVICE_KEY = namespacedName(CANARY_NAMESPACE, CANARY_NAME);
/** Its one port is unnamed, so the service port's key is the Service's. */
export const CANARY_SERVICE_PORT_KEY = CANARY_SERVICE_KEY;
/** The canary's IPv4 ClusterIP. */
export const CANARY_VIP4 = '169.254.255.253';
/** The canary's IPv6 ClusterIP. */
export const CANARY_VIP6 = '100::a9fe:fffd';

/** The canary's ClusterIP of a family. */
export function canaryVIP(family: IPFamily): string {
  return family === 'IPv4' ? CANARY_VIP4 : CANARY_VIP6;
}
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
    clusterIP: canaryVIP(family),
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
    key: joinHostPort(ip, port),
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
