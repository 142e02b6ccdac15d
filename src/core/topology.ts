// Upstream topology.go CategorizeEndpoints: which endpoints a service port may
// use for cluster-policy and local-policy traffic (topology hints and the
// terminating-endpoint fallback).
//
// Cluster endpoints: ready endpoints filtered by the topology mode; if none,
// serving-and-terminating endpoints (same topology filter). Local endpoints,
// decided independently: local & ready; if none, local & serving & terminating.
// The topology mode is chosen from the READY endpoints only: PreferSameNode
// when every one has node hints and one is hinted for this node, else
// PreferSameZone when every one has zone hints and one is hinted for this
// node's zone, else no filtering. There is no per-endpoint fallback.

import { LABEL_TOPOLOGY_ZONE } from './api.js';
import type { CategorizedEndpoints, Endpoint, ServicePort } from './types.js';

export type TopologyMode = '' | 'PreferSameNode' | 'PreferSameZone';

/** The service-port flags categorizeEndpoints reads. */
export type TopologyServicePort = Pick<ServicePort, 'usesClusterEndpoints' | 'usesLocalEndpoints'>;

export function topologyModeFromHints(endpoints: readonly Endpoint[], nodeName: string, zone: string): TopologyMode {
  let hasEndpointForNode = false;
  let allHaveNodeHints = true;
  let hasEndpointForZone = false;
  let allHaveZoneHints = true;
  for (const ep of endpoints) {
    if (!ep.ready) continue;
    if (!ep.nodeHints || ep.nodeHints.size === 0) allHaveNodeHints = false;
    else if (ep.nodeHints.has(nodeName)) hasEndpointForNode = true;
    if (!ep.zoneHints || ep.zoneHints.size === 0) allHaveZoneHints = false;
    else if (zone !== '' && ep.zoneHints.has(zone)) hasEndpointForZone = true;
  }
  if (allHaveNodeHints && hasEndpointForNode) return 'PreferSameNode';
  if (allHaveZoneHints && hasEndpointForZone) return 'PreferSameZone';
  return '';
}

function availableForTopology(ep: Endpoint, mode: TopologyMode, nodeName: string, zone: string): boolean {
  switch (mode) {
    case '':
      return true;
    case 'PreferSameNode':
      return ep.nodeHints?.has(nodeName) ?? false;
    case 'PreferSameZone':
      return ep.zoneHints?.has(zone) ?? false;
  }
}

const servingTerminating = (ep: Endpoint) => ep.serving && ep.terminating;

function byKey(a: Endpoint, b: Endpoint): number {
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

const NONE: readonly Endpoint[] = Object.freeze([]);
const noEndpoints = (cluster: boolean, local: boolean): CategorizedEndpoints =>
  Object.freeze({
    clusterEndpoints: cluster ? NONE : null,
    localEndpoints: local ? NONE : null,
    allReachableEndpoints: NONE,
    hasAnyEndpoints: false,
  });
// The categories of a port without endpoints, by [usesClusterEndpoints][usesLocalEndpoints]. Shared: a
// cluster can hold many such ports (a 1,000-port Service before its pods run), and each would otherwise
// carry its own object and empty lists for as long as it lives.
const NO_ENDPOINTS = [
  [noEndpoints(false, false), noEndpoints(false, true)],
  [noEndpoints(true, false), noEndpoints(true, true)],
] as const;

/** The shared categories of a port without endpoints that uses cluster and/or local endpoints. */
export function noEndpointCategories(usesCluster: boolean, usesLocal: boolean): CategorizedEndpoints {
  return NO_ENDPOINTS[usesCluster ? 1 : 0][usesLocal ? 1 : 0];
}

/** Endpoints in, categories out; input order is kept (callers pass lists sorted by key). */
export function categorizeEndpoints(
  endpoints: readonly Endpoint[],
  svcPort: TopologyServicePort,
  nodeName: string,
  nodeLabels: Readonly<Record<string, string>>,
): CategorizedEndpoints {
  if (endpoints.length === 0) return noEndpointCategories(svcPort.usesClusterEndpoints, svcPort.usesLocalEndpoints);
  let clusterEndpoints: Endpoint[] | null = null;
  let hasAnyEndpoints = false;
  let useTopology = false;

  if (svcPort.usesClusterEndpoints) {
    const zone = nodeLabels[LABEL_TOPOLOGY_ZONE] ?? '';
    const mode = topologyModeFromHints(endpoints, nodeName, zone);
    useTopology = mode !== '';
    const avail = (ep: Endpoint) => availableForTopology(ep, mode, nodeName, zone);
    clusterEndpoints = endpoints.filter((ep) => ep.ready && avail(ep));
    // With no ready endpoint anywhere the mode is '' (it is chosen from ready
    // ones), so the fallback is effectively unfiltered.
    if (clusterEndpoints.length === 0) clusterEndpoints = endpoints.filter((ep) => servingTerminating(ep) && avail(ep));
    if (clusterEndpoints.length > 0) hasAnyEndpoints = true;
  }

  if (!svcPort.usesLocalEndpoints) {
    return { clusterEndpoints, localEndpoints: null, allReachableEndpoints: clusterEndpoints ?? [], hasAnyEndpoints };
  }

  let hasLocalReady = false;
  let hasLocalServingTerminating = false;
  for (const ep of endpoints) {
    if (ep.ready) {
      hasAnyEndpoints = true;
      if (ep.isLocal) hasLocalReady = true;
    } else if (servingTerminating(ep)) {
      hasAnyEndpoints = true;
      if (ep.isLocal) hasLocalServingTerminating = true;
    }
  }
  let localEndpoints: Endpoint[] = [];
  let useServingTerminating = false;
  if (hasLocalReady) {
    localEndpoints = endpoints.filter((ep) => ep.isLocal && ep.ready);
  } else if (hasLocalServingTerminating) {
    useServingTerminating = true;
    localEndpoints = endpoints.filter((ep) => ep.isLocal && servingTerminating(ep));
  }

  if (clusterEndpoints === null) {
    return { clusterEndpoints, localEndpoints, allReachableEndpoints: localEndpoints, hasAnyEndpoints };
  }
  if (!useTopology && !useServingTerminating) {
    // clusterEndpoints holds every ready endpoint, a superset of localEndpoints.
    return { clusterEndpoints, localEndpoints, allReachableEndpoints: clusterEndpoints, hasAnyEndpoints };
  }
  const merged = new Map<string, Endpoint>();
  for (const ep of clusterEndpoints) merged.set(ep.key, ep);
  for (const ep of localEndpoints) merged.set(ep.key, ep);
  return { clusterEndpoints, localEndpoints, allReachableEndpoints: [...merged.values()].sort(byKey), hasAnyEndpoints };
}
