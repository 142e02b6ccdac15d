// Building the SyncState a datapath renders: service ports + endpoints +
// node -> one immutable snapshot per family, with categorizeEndpoints done
// once here so every datapath agrees on which endpoints a port uses.

import type { EndpointSlice, Node, ServiceCIDR } from './api.js';
import type { EndpointsMap, PortEndpoints } from './endpointslicecache.js';
import { EndpointSliceCache, endpointsKey } from './endpointslicecache.js';
import { parseCIDR } from './ip.js';
import { nodeInfoFromNode } from './nodeinfo.js';
import type { SkipReporter } from './serviceport.js';
import { noSkipReporter, serviceToServicePorts } from './serviceport.js';
import { finish, type Steps } from './steps.js';
import { categorizeEndpoints } from './topology.js';
import type { CategorizedEndpoints, Endpoint, IPFamily, NodeInfo, ServicePort, SyncState } from './types.js';

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
  /**
   * The previous snapshot of this family. A service port whose ServicePort,
   * endpoint list and node are the very same objects (===) as in it keeps its
   * categorization instead of recomputing it.
   */
  readonly previous?: SyncState | null;
}

const EMPTY: readonly Endpoint[] = Object.freeze([]);

/** Normalised CIDRs of `family`, de-duplicated and sorted; invalid ones dropped. */
export function serviceCIDRsForFamily(cidrs: readonly unknown[], family: IPFamily): string[] {
  const out = new Set<string>();
  for (const c of cidrs) {
    const p = parseCIDR(c);
    if (p && p.family === family) out.add(p.text);
  }
  return [...out].sort();
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
 * The snapshot for one family. Every service port gets an `endpoints` entry
 * (possibly empty) and a `categorized` entry; endpoints of ports a Service
 * does not define (or of the other protocol) are not included.
 */
export function buildSyncState(input: BuildSyncStateInput): SyncState {
  return finish(buildSyncStateSteps(input));
}

/** Service ports categorized per step of buildSyncStateSteps. */
const BUILD_STEP = 500;

/**
 * buildSyncState as steps, for a sync of 10k Services that must not hold the
 * event loop. The input maps must not change until it is done (the family's
 * maps change only in a checkout, and a sync runs alone).
 */
export function* buildSyncStateSteps(input: BuildSyncStateInput): Steps<SyncState> {
  const services = new Map<string, ServicePort>();
  const endpoints = new Map<string, readonly Endpoint[]>();
  const categorized = new Map<string, CategorizedEndpoints>();
  const prev = input.previous && input.previous.node === input.node ? input.previous : null;
  const changed = new Set(input.changedServices);
  const changedPorts = new Set<string>();
  const keys = [...input.services.keys()].sort();
  let n = 0;
  for (const k of keys) {
    if (++n % BUILD_STEP === 0) yield;
    const sp = input.services.get(k)!;
    if (sp.family !== input.family) continue;
    if (changed.has(sp.serviceKey)) changedPorts.add(k);
    const eps = input.endpoints.get(endpointsKey(sp.name))?.endpoints ?? EMPTY;
    services.set(k, sp);
    endpoints.set(k, eps);
    const reuse =
      prev && prev.services.get(k) === sp && prev.endpoints.get(k) === eps ? prev.categorized.get(k) : undefined;
    categorized.set(k, reuse ?? categorizeEndpoints(eps, sp, input.node.name, input.node.labels));
  }
  return {
    family: input.family,
    services,
    endpoints,
    categorized,
    changedServices: changed,
    changedServicePorts: changedPorts,
    fullSync: input.fullSync,
    node: input.node,
    serviceCIDRs: serviceCIDRsForFamily(input.serviceCIDRs, input.family),
  };
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
