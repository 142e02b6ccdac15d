// The event interface between the Kubernetes sources (platform/k8s) and the
// proxier (upstream's OnServiceAdd/... and OnEndpointSlice...). Handlers only
// record changes; they never sync (docs/architecture.md, the data flow). Objects are the raw
// JSON the API server sent; the core validates them.

import type { EndpointSlice, Node, Service, ServiceCIDR } from '../core/api.js';

export interface ServiceHandler {
  onServiceAdd(svc: Service): void;
  onServiceUpdate(oldSvc: Service, svc: Service): void;
  onServiceDelete(svc: Service): void;
  /** The initial list is complete; called once per (re)list. */
  onServiceSynced(): void;
}

export interface EndpointSliceHandler {
  onEndpointSliceAdd(slice: EndpointSlice): void;
  onEndpointSliceUpdate(oldSlice: EndpointSlice, slice: EndpointSlice): void;
  onEndpointSliceDelete(slice: EndpointSlice): void;
  onEndpointSliceSynced(): void;
}

export interface NodeHandler {
  onNodeAdd(node: Node): void;
  onNodeUpdate(oldNode: Node, node: Node): void;
  onNodeDelete(node: Node): void;
  onNodeSynced(): void;
}

export interface ServiceCIDRHandler {
  /** The full current set of ServiceCIDR objects, after any change. */
  onServiceCIDRsChanged(cidrs: readonly ServiceCIDR[]): void;
}
