// The subset of Kubernetes API objects the proxy reads, as plain JSON shapes.
// Objects arrive from the API server as untrusted JSON: every field may be
// missing or of the wrong type, so the core validates before it trusts
// (see serviceport.ts / endpointslicecache.ts), and never throws on bad input.

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  deletionTimestamp?: string;
  creationTimestamp?: string;
}

export type ProtocolName = 'TCP' | 'UDP' | 'SCTP';

export interface ServicePortSpec {
  name?: string;
  protocol?: ProtocolName;
  port?: number;
  targetPort?: number | string;
  nodePort?: number;
  appProtocol?: string;
}

export interface ServiceSpec {
  type?: 'ClusterIP' | 'NodePort' | 'LoadBalancer' | 'ExternalName';
  clusterIP?: string;
  clusterIPs?: string[];
  ipFamilies?: Array<'IPv4' | 'IPv6'>;
  ipFamilyPolicy?: string;
  ports?: ServicePortSpec[];
  selector?: Record<string, string>;
  externalIPs?: string[];
  externalName?: string;
  loadBalancerIP?: string;
  loadBalancerSourceRanges?: string[];
  sessionAffinity?: 'None' | 'ClientIP';
  sessionAffinityConfig?: { clientIP?: { timeoutSeconds?: number } };
  externalTrafficPolicy?: 'Cluster' | 'Local';
  internalTrafficPolicy?: 'Cluster' | 'Local';
  healthCheckNodePort?: number;
  trafficDistribution?: string;
}

export interface LoadBalancerIngress {
  ip?: string;
  hostname?: string;
  ipMode?: 'VIP' | 'Proxy';
}

export interface Service {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec?: ServiceSpec;
  status?: { loadBalancer?: { ingress?: LoadBalancerIngress[] } };
}

export interface EndpointConditions {
  ready?: boolean | null;
  serving?: boolean | null;
  terminating?: boolean | null;
}

export interface SliceEndpoint {
  addresses?: string[];
  conditions?: EndpointConditions;
  hostname?: string;
  nodeName?: string;
  zone?: string;
  hints?: { forZones?: Array<{ name?: string }>; forNodes?: Array<{ name?: string }> };
  targetRef?: { kind?: string; namespace?: string; name?: string; uid?: string };
}

export interface EndpointPort {
  name?: string | null;
  port?: number | null;
  protocol?: ProtocolName;
  appProtocol?: string;
}

export interface EndpointSlice {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  addressType?: 'IPv4' | 'IPv6' | 'FQDN';
  endpoints?: SliceEndpoint[] | null;
  ports?: EndpointPort[] | null;
}

export interface NodeAddress {
  type?: string;
  address?: string;
}

export interface Node {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec?: {
    podCIDR?: string;
    podCIDRs?: string[];
    taints?: Array<{ key?: string; value?: string; effect?: string }>;
    unschedulable?: boolean;
  };
  status?: { addresses?: NodeAddress[] };
}

export interface ServiceCIDR {
  metadata: ObjectMeta;
  spec?: { cidrs?: string[] };
}

/** Well-known labels the proxy filters on (server-side selectors). */
export const LABEL_SERVICE_PROXY_NAME = 'service.kubernetes.io/service-proxy-name';
export const LABEL_HEADLESS = 'service.kubernetes.io/headless';
export const LABEL_SERVICE_NAME = 'kubernetes.io/service-name';
export const LABEL_TOPOLOGY_ZONE = 'topology.kubernetes.io/zone';
export const ANNOTATION_LAST_CHANGE_TRIGGER_TIME = 'endpoints.kubernetes.io/last-change-trigger-time';
export const TAINT_TO_BE_DELETED = 'ToBeDeletedByClusterAutoscaler';
