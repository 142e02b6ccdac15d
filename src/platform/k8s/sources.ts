// The proxy's informers (upstream cmd/kube-proxy/app/server.go): Services,
// EndpointSlices, this node's Node and ServiceCIDRs, each a Reflector feeding
// the engine's handlers. Selectors are applied server-side exactly as upstream:
//   Services:       labelSelector !service.kubernetes.io/service-proxy-name,
//                   fieldSelector spec.clusterIP!=None (headless excluded)
//   EndpointSlices: labelSelector !service.kubernetes.io/headless
//   Node:           fieldSelector metadata.name=<nodeName>
//   ServiceCIDRs:   networking.k8s.io/v1, optional (404 -> carry on without)
// Each keeps only what the proxy reads of its objects (transform.ts) and,
// with resyncMs (configSyncPeriod), re-delivers its copy that often; the
// EndpointSlices' copy keeps less (the EndpointSliceCache holds the rest) and
// is not re-delivered. Each gets its state by a streaming watch-list where the
// server offers it, and by a list where it does not, as client-go's informers
// with WatchListClient.

import type { EndpointSlice, Node, Service, ServiceCIDR } from '../../core/api.js';
import { LABEL_HEADLESS, LABEL_SERVICE_PROXY_NAME } from '../../core/api.js';
import type { Clock } from '../../core/clock.js';
import type { EndpointSliceHandler, NodeHandler, ServiceCIDRHandler, ServiceHandler } from '../../engine/handlers.js';
import { realClock } from '../clock.js';
import type { SourceEvent } from './events.js';
import type { BackoffOptions } from './backoff.js';
import { Reflector, type ReflectorSink } from './reflector.js';
import {
  endpointSliceStub,
  transformEndpointSlice,
  transformNode,
  transformService,
  transformServiceCIDR,
} from './transform.js';
import type { ListWatchTransport } from './transport.js';

export interface SourceHandlers {
  readonly service: ServiceHandler;
  readonly endpointSlice: EndpointSliceHandler;
  readonly node: NodeHandler;
  readonly serviceCIDR: ServiceCIDRHandler;
}

export interface StartSourcesOptions {
  /** The API client (KubeClient) or a scripted fake. */
  readonly client: ListWatchTransport;
  readonly nodeName: string;
  readonly handlers: SourceHandlers;
  readonly signal: AbortSignal;
  readonly onEvent?: (ev: SourceEvent) => void;
  /** Injected time (backoff, stall watchdog); default the real clock. */
  readonly clock?: Clock;
  /** Default DEFAULT_BACKOFF. */
  readonly backoff?: BackoffOptions;
  /** configSyncPeriod: re-deliver every cached object this often; 0 = never. */
  readonly resyncMs?: number;
  /** Server-side watch timeout; default 300 s (client-go: 5-10 min). */
  readonly watchTimeoutSeconds?: number;
  /** Serve only Services labelled service.kubernetes.io/service-proxy-name=<this>; "" or unset = upstream. */
  readonly serviceProxyName?: string;
  /**
   * Get each state as a watch's initial events where the server offers it
   * (client-go's WatchListClient gate, beta and on by default since 1.35);
   * default true.
   */
  readonly watchList?: boolean;
}

/**
 * 200 ms doubling to 30 s, each wait shortened by up to half at random, so
 * the nodes of a cluster do not retry in step. client-go starts at 800 ms; we
 * start lower because an outage of a server that refuses connections is
 * ended early by the client's reachability probe anyway, and the first retry
 * after a dropped watch should be quick.
 */
export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 200, maxMs: 30_000, factor: 2, jitter: 0.5 };

/** Run the four sources until opts.signal aborts; resolves once all have stopped. */
export async function startSources(opts: StartSourcesOptions): Promise<void> {
  const h = opts.handlers;
  const common = {
    transport: opts.client,
    clock: opts.clock ?? realClock,
    backoff: opts.backoff ?? DEFAULT_BACKOFF,
    watchTimeoutSeconds: opts.watchTimeoutSeconds ?? 300,
    onEvent: opts.onEvent,
    resyncMs: opts.resyncMs ?? 0,
    watchList: opts.watchList ?? true,
  };
  const services = new Reflector<Service>({
    ...common,
    resource: 'services',
    path: '/api/v1/services',
    labelSelector: opts.serviceProxyName
      ? `${LABEL_SERVICE_PROXY_NAME}=${opts.serviceProxyName}`
      : `!${LABEL_SERVICE_PROXY_NAME}`,
    fieldSelector: 'spec.clusterIP!=None',
    transform: transformService,
    // The first state reaches the handlers as it streams in, for the proxier's early syncs (earlystart.ts).
    firstStateAsItComes: true,
    sink: {
      add: (s) => h.service.onServiceAdd(s),
      update: (o, s) => h.service.onServiceUpdate(o, s),
      delete: (s) => h.service.onServiceDelete(s),
      synced: () => h.service.onServiceSynced(),
    },
  });
  const slices = new Reflector<EndpointSlice>({
    ...common,
    resource: 'endpointslices',
    path: '/apis/discovery.k8s.io/v1/endpointslices',
    labelSelector: `!${LABEL_HEADLESS}`,
    transform: transformEndpointSlice,
    firstStateAsItComes: true,
    // The EndpointSliceCache keeps each slice's endpoints and ports; the local
    // copy keeps only what names a slice. A resync could not re-deliver such a
    // copy, and would change nothing: the cache drops a slice equal to the one
    // it holds, so a re-delivered slice was never a change.
    keep: endpointSliceStub,
    resyncMs: 0,
    sink: {
      add: (s) => h.endpointSlice.onEndpointSliceAdd(s),
      update: (o, s) => h.endpointSlice.onEndpointSliceUpdate(o, s),
      delete: (s) => h.endpointSlice.onEndpointSliceDelete(s),
      synced: () => h.endpointSlice.onEndpointSliceSynced(),
    },
  });
  const nodes = new Reflector<Node>({
    ...common,
    resource: 'nodes',
    path: '/api/v1/nodes',
    fieldSelector: `metadata.name=${opts.nodeName}`,
    transform: transformNode,
    sink: {
      add: (n) => h.node.onNodeAdd(n),
      update: (o, n) => h.node.onNodeUpdate(o, n),
      delete: (n) => h.node.onNodeDelete(n),
      synced: () => h.node.onNodeSynced(),
    },
  });
  const cidrs: Reflector<ServiceCIDR> = new Reflector<ServiceCIDR>({
    ...common,
    resource: 'servicecidrs',
    path: '/apis/networking.k8s.io/v1/servicecidrs',
    optional: true,
    transform: transformServiceCIDR,
    sink: serviceCIDRSink(h.serviceCIDR, () => cidrs),
  });
  await Promise.all([services, slices, nodes, cidrs].map((r) => r.run(opts.signal)));
}

/**
 * ServiceCIDR handlers take the whole set: publish it after each watch event,
 * and once per list (always after the first, after a relist only if it changed).
 */
function serviceCIDRSink(
  handler: ServiceCIDRHandler,
  reflector: () => Reflector<ServiceCIDR>,
): ReflectorSink<ServiceCIDR> {
  let listed = false;
  let dirty = false;
  const changed = (): void => {
    if (reflector().listing) dirty = true;
    else handler.onServiceCIDRsChanged(reflector().snapshot());
  };
  return {
    add: changed,
    update: changed,
    delete: changed,
    synced: () => {
      if (!listed || dirty) handler.onServiceCIDRsChanged(reflector().snapshot());
      listed = true;
      dirty = false;
    },
  };
}
