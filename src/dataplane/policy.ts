// Which endpoints a service port's internal and external traffic may use,
// decided once for every mode that writes per-service chains (iptables and
// nftables today). The rules each mode then writes differ; the decision
// does not. Names follow upstream's syncProxyRules locals
// (pkg/proxy/iptables/proxier.go, pkg/proxy/nftables/proxier.go).
//
// Internal traffic (to the ClusterIP) follows internalTrafficPolicy,
// external traffic (externalIPs, load-balancer IPs, NodePorts) follows
// externalTrafficPolicy. Under a Local policy, a port with endpoints but none
// on this node has no usable endpoints for that kind of traffic: the modes
// then drop it, and reject only when the port has no endpoints at all.

import type { CategorizedEndpoints, Endpoint, ServicePort } from '../core/types.js';

export interface ServicePortPolicy {
  /** categorizeEndpoints' clusterEndpoints, [] when null. */
  readonly clusterEndpoints: readonly Endpoint[];
  /** categorizeEndpoints' localEndpoints, [] when null. */
  readonly localEndpoints: readonly Endpoint[];
  /** The port has any usable endpoint at all (else: reject). */
  readonly hasEndpoints: boolean;
  /** Internal traffic has an endpoint under its policy. */
  readonly hasInternalEndpoints: boolean;
  /** External traffic has an endpoint under its policy. */
  readonly hasExternalEndpoints: boolean;
  /** Internal traffic goes to the local policy chain (else the cluster one). */
  readonly internalUsesLocal: boolean;
  /** External traffic, once past the external chain, goes to the local policy chain. */
  readonly externalUsesLocal: boolean;
  /** The cluster-wide policy chain is needed. */
  readonly usesClusterPolicyChain: boolean;
  /** The node-local policy chain is needed. */
  readonly usesLocalPolicyChain: boolean;
  /**
   * The external chain is needed. Based on hasEndpoints, not
   * hasExternalEndpoints: its short-circuit rules for pod and node traffic
   * apply even when external clients have no endpoint to reach.
   */
  readonly usesExternalTrafficChain: boolean;
}

const NO_ENDPOINTS: readonly Endpoint[] = Object.freeze([]);

/** The decision for one service port; `cat` undefined means "no endpoints". */
export function servicePortPolicy(svc: ServicePort, cat: CategorizedEndpoints | undefined): ServicePortPolicy {
  const clusterEndpoints = cat?.clusterEndpoints ?? NO_ENDPOINTS;
  const localEndpoints = cat?.localEndpoints ?? NO_ENDPOINTS;
  const hasEndpoints = cat?.hasAnyEndpoints ?? false;
  const hasLocal = localEndpoints.length > 0;
  return {
    clusterEndpoints,
    localEndpoints,
    hasEndpoints,
    hasInternalEndpoints: hasEndpoints && (!svc.internalPolicyLocal || hasLocal),
    hasExternalEndpoints: hasEndpoints && (!svc.externalPolicyLocal || hasLocal),
    internalUsesLocal: svc.internalPolicyLocal,
    externalUsesLocal: svc.externalPolicyLocal,
    usesClusterPolicyChain: clusterEndpoints.length > 0 && svc.usesClusterEndpoints,
    usesLocalPolicyChain: hasLocal && svc.usesLocalEndpoints,
    usesExternalTrafficChain: hasEndpoints && svc.externallyAccessible,
  };
}
