// Building the SyncState a datapath renders: service ports + endpoints +
// node -> one snapshot per family, with categorizeEndpoints done once so
// every datapath agrees on which endpoints a port uses. The proxier keeps
// its snapshots live (src/core/livesnapshot.ts); these build one whole, for
// renderers, tools and tests.

import type { EndpointSlice, Node, ServiceCIDR } from './api.js';
import type { EndpointsMap, PortEndpoints } from './endpointslicecache.js';
import { EndpointSliceCache } from './endpointslicecache.js';
import { LiveSnapshot } from './livesnapshot.js';
import { nodeInfoFromNode } from './nodeinfo.js';
import type { SkipReporter } from './serviceport.js';
import { noSkipReporter, serviceToServicePorts } from './serviceport.js';
import { finish } from './steps.js';
import type { IPFamily, NodeInfo, ServicePort, SyncState } from './types.js';

export interface BuildSyncStateInput {
  readonly family: IPFamily;
  /** Keyed by ServicePort.key. */
  readonly services: ReadonlyMap<string, ServicePort>;
  /** Keyed by endpointsKey(ServicePortName) (protocol included). */
  readonly endpoints: EndpointsMap;
  readonly node: NodeInfo;
  readonly changedServices: ReadonlySet<string>;
  readonly fullSync: boolean;
  /** CIDRs of any family; only this family's are kept. */
  readonly serviceCIDRs: readonly string[];
}

/** CIDR strings from ServiceCIDR objects (any family, unvalidated). */
export function cidrsOfServiceCIDRs(objs: readonly ServiceCIDR[]): string[] {
  const out: string[] = [];
  for (const o of objs) {
    const cidrs = o && typeof o === 'object' && o.spec && Array.isArray(o.spec.cidrs) ? o.spec.cidrs : [];
    for (const c of cidrs) if (typeof c === 'string') out.push(c);
  }
  return out;
}

/**
 * The snapshot for one family, built whole (the proxier keeps a LiveSnapshot
 * per family instead, which changes only what changed). Every service port
 * gets an `endpoints` entry (possibly empty) and a `categorized` entry;
 * endpoints of ports a Service does not define (or of the other protocol) are
 * not included.
 */
export function buildSyncState(input: BuildSyncStateInput): SyncState {
  return finish(
    new LiveSnapshot(input.family).updateSteps({ ...input, portKeysOf: () => undefined, extra: new Map() }),
  );
}

/**
 * Upstream TestNoEndpointsMetric semantics: service ports whose Local policy
 * has no local endpoints while the service has endpoints somewhere.
 */
export function countNoLocalEndpoints(state: SyncState): { internal: number; external: number } {
  let internal = 0;
  let external = 0;
  for (const [k, sp] of state.services) {
    const c = state.categorized.get(k);
    if (!c || !c.hasAnyEndpoints) continue;
    const noLocal = (c.localEndpoints?.length ?? 0) === 0;
    if (sp.internalPolicyLocal && noLocal) internal++;
    if (sp.externalPolicyLocal && noLocal) external++;
  }
  return { internal, external };
}

export interface SyncStateFromObjectsInput {
  readonly services: readonly unknown[];
  readonly slices: readonly unknown[];
  readonly family: IPFamily;
  /** Default 'test-node'; endpoints with this nodeName are local. */
  readonly nodeName?: string;
  /** The Node object (labels, addresses, podCIDRs); optional. */
  readonly node?: Node | null;
  /** Primary node IPs that override/complete the Node's addresses. */
  readonly nodeIPs?: Partial<Record<IPFamily, string>>;
  readonly serviceCIDRs?: readonly string[];
  /** Default true. */
  readonly fullSync?: boolean;
  /** Default: every Service key seen. */
  readonly changedServices?: readonly string[];
  readonly onSkip?: SkipReporter;
}

/**
 * Convenience for renderers and their tests: Service / EndpointSlice / Node
 * JSON through the real intake code (serviceport, endpointslicecache,
 * nodeinfo) into a SyncState.
 */
export function syncStateFromObjects(input: SyncStateFromObjectsInput): SyncState {
  const onSkip = input.onSkip ?? noSkipReporter;
  const nodeName = input.nodeName ?? input.node?.metadata?.name ?? 'test-node';
  const services = new Map<string, ServicePort>();
  const svcKeys = new Set<string>();
  for (const svc of input.services) {
    for (const [k, sp] of serviceToServicePorts(svc, input.family, onSkip)) {
      services.set(k, sp);
      svcKeys.add(sp.serviceKey);
    }
  }
  const cache = new EndpointSliceCache(nodeName, input.family, onSkip);
  for (const s of input.slices) cache.updatePending(s as EndpointSlice, false);
  const endpoints = new Map<string, PortEndpoints>();
  for (const change of cache.checkoutChanges().values()) {
    for (const [k, v] of change.current) endpoints.set(k, v);
  }
  return buildSyncState({
    family: input.family,
    services,
    endpoints,
    node: nodeInfoFromNode(nodeName, input.node ?? null, input.nodeIPs ?? {}, onSkip),
    changedServices: new Set(input.changedServices ?? svcKeys),
    fullSync: input.fullSync ?? true,
    serviceCIDRs: input.serviceCIDRs ?? [],
  });
}
