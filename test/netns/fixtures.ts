// Builders for the API objects the e2e tests create: Services, their
// EndpointSlices pointing at harness pods (nodeName set from the pod's
// node), and Node objects for the harness nodes.
import type { KubeObject } from './kube.js';
import type { NodeInfo, PodInfo } from './topology.js';

export type Proto = 'TCP' | 'UDP';

export interface PortSpec {
  readonly name: string;
  readonly port: number;
  readonly targetPort: number;
  readonly protocol: Proto;
  readonly nodePort?: number;
}

export interface ServiceSpec {
  readonly name: string;
  readonly clusterIP: string;
  readonly ports: readonly PortSpec[];
  readonly type?: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
  readonly externalIPs?: string[];
  readonly externalTrafficPolicy?: 'Cluster' | 'Local';
  readonly internalTrafficPolicy?: 'Cluster' | 'Local';
  readonly sessionAffinity?: 'ClientIP' | 'None';
  readonly affinityTimeoutSeconds?: number;
  readonly healthCheckNodePort?: number;
  readonly loadBalancerSourceRanges?: string[];
  /** Dual-stack: every ClusterIP, primary first (the first must equal clusterIP); families follow the addresses. */
  readonly clusterIPs?: string[];
  readonly trafficDistribution?: string;
}

export const NAMESPACE = 'default';

/** The usual two ports of a test Service: tcp 80 -> 8080 and udp 53 -> 5353 (the agents' echo ports). */
export function webPorts(nodePortBase?: number): PortSpec[] {
  return [
    { name: 'tcp', port: 80, targetPort: 8080, protocol: 'TCP', ...(nodePortBase ? { nodePort: nodePortBase } : {}) },
    {
      name: 'udp',
      port: 53,
      targetPort: 5353,
      protocol: 'UDP',
      ...(nodePortBase ? { nodePort: nodePortBase + 1 } : {}),
    },
  ];
}

export function service(s: ServiceSpec): KubeObject {
  const spec: Record<string, unknown> = {
    type: s.type ?? 'ClusterIP',
    clusterIP: s.clusterIP,
    clusterIPs: s.clusterIPs ?? [s.clusterIP],
    ipFamilies: (s.clusterIPs ?? [s.clusterIP]).map((a) => (a.includes(':') ? 'IPv6' : 'IPv4')),
    ...(s.clusterIPs && s.clusterIPs.length > 1 ? { ipFamilyPolicy: 'RequireDualStack' } : {}),
    ports: s.ports.map((p) => ({
      name: p.name,
      port: p.port,
      targetPort: p.targetPort,
      protocol: p.protocol,
      ...(p.nodePort ? { nodePort: p.nodePort } : {}),
    })),
    sessionAffinity: s.sessionAffinity ?? 'None',
    internalTrafficPolicy: s.internalTrafficPolicy ?? 'Cluster',
  };
  if (s.type && s.type !== 'ClusterIP') spec['externalTrafficPolicy'] = s.externalTrafficPolicy ?? 'Cluster';
  else if (s.externalIPs) spec['externalTrafficPolicy'] = s.externalTrafficPolicy ?? 'Cluster';
  if (s.externalIPs) spec['externalIPs'] = s.externalIPs;
  if (s.sessionAffinity === 'ClientIP')
    spec['sessionAffinityConfig'] = { clientIP: { timeoutSeconds: s.affinityTimeoutSeconds ?? 10800 } };
  if (s.healthCheckNodePort) spec['healthCheckNodePort'] = s.healthCheckNodePort;
  if (s.loadBalancerSourceRanges) spec['loadBalancerSourceRanges'] = s.loadBalancerSourceRanges;
  if (s.trafficDistribution) spec['trafficDistribution'] = s.trafficDistribution;
  return { apiVersion: 'v1', kind: 'Service', metadata: { name: s.name, namespace: NAMESPACE }, spec };
}

export interface EndpointSpec {
  readonly pod: PodInfo;
  readonly ready?: boolean;
  readonly serving?: boolean;
  readonly terminating?: boolean;
  /** Topology hints (hints.forZones / hints.forNodes) and the endpoint's zone. */
  readonly forZones?: string[];
  readonly forNodes?: string[];
  readonly zone?: string;
}

/** One EndpointSlice for a Service: its endpoints are harness pods, ports named like the Service's. */
export function endpointSlice(
  serviceName: string,
  endpoints: readonly EndpointSpec[],
  ports: readonly PortSpec[],
  sliceName = `${serviceName}-1`,
  addressType: 'IPv4' | 'IPv6' = 'IPv4',
): KubeObject {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: sliceName,
      namespace: NAMESPACE,
      labels: { 'kubernetes.io/service-name': serviceName, 'endpointslice.kubernetes.io/managed-by': 'kpt-e2e' },
    },
    addressType,
    endpoints: endpoints.map((e) => ({
      addresses: [addressType === 'IPv6' ? podIP6(e.pod) : e.pod.ip],
      conditions: {
        ready: e.ready ?? true,
        serving: e.serving ?? e.ready ?? true,
        terminating: e.terminating ?? false,
      },
      nodeName: e.pod.node,
      targetRef: { kind: 'Pod', namespace: NAMESPACE, name: e.pod.name },
      ...(e.zone ? { zone: e.zone } : {}),
      ...(e.forZones || e.forNodes
        ? {
            hints: {
              ...(e.forZones ? { forZones: e.forZones.map((name) => ({ name })) } : {}),
              ...(e.forNodes ? { forNodes: e.forNodes.map((name) => ({ name })) } : {}),
            },
          }
        : {}),
    })),
    ports: ports.map((p) => ({ name: p.name, port: p.targetPort, protocol: p.protocol })),
  };
}

function podIP6(p: PodInfo): string {
  if (!p.ip6) throw new Error(`pod ${p.name} has no IPv6 address (cluster not dual-stack)`);
  return p.ip6;
}

/** The Node object of a harness node (dual-stack: both InternalIPs and podCIDRs); labels are added to the hostname label. */
export function nodeObject(n: NodeInfo, labels: Record<string, string> = {}): KubeObject {
  const ips = [{ type: 'InternalIP', address: n.ip }, ...(n.ip6 ? [{ type: 'InternalIP', address: n.ip6 }] : [])];
  const cidrs = [n.podCIDR, ...(n.podCIDR6 ? [n.podCIDR6] : [])];
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: n.name, labels: { 'kubernetes.io/hostname': n.name, ...labels } },
    spec: { podCIDR: n.podCIDR, podCIDRs: cidrs },
    status: { addresses: [...ips, { type: 'Hostname', address: n.name }] },
  };
}
