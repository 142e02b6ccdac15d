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
}

export const NAMESPACE = 'default';

/** The usual two ports of a test Service: tcp 80 -> 8080 and udp 53 -> 5353 (the agents' echo ports). */
export function webPorts(nodePortBase?: number): PortSpec[] {
  return [
    { name: 'tcp', port: 80, targetPort: 8080, protocol: 'TCP', ...(nodePortBase ? { nodePort: nodePortBase } : {}) },
    { name: 'udp', port: 53, targetPort: 5353, protocol: 'UDP', ...(nodePortBase ? { nodePort: nodePortBase + 1 } : {}) },
  ];
}

export function service(s: ServiceSpec): KubeObject {
  const spec: Record<string, unknown> = {
    type: s.type ?? 'ClusterIP',
    clusterIP: s.clusterIP,
    clusterIPs: [s.clusterIP],
    ipFamilies: ['IPv4'],
    ports: s.ports.map((p) => ({ name: p.name, port: p.port, targetPort: p.targetPort, protocol: p.protocol, ...(p.nodePort ? { nodePort: p.nodePort } : {}) })),
    sessionAffinity: s.sessionAffinity ?? 'None',
    internalTrafficPolicy: s.internalTrafficPolicy ?? 'Cluster',
  };
  if (s.type && s.type !== 'ClusterIP') spec['externalTrafficPolicy'] = s.externalTrafficPolicy ?? 'Cluster';
  else if (s.externalIPs) spec['externalTrafficPolicy'] = s.externalTrafficPolicy ?? 'Cluster';
  if (s.externalIPs) spec['externalIPs'] = s.externalIPs;
  if (s.sessionAffinity === 'ClientIP') spec['sessionAffinityConfig'] = { clientIP: { timeoutSeconds: s.affinityTimeoutSeconds ?? 10800 } };
  if (s.healthCheckNodePort) spec['healthCheckNodePort'] = s.healthCheckNodePort;
  if (s.loadBalancerSourceRanges) spec['loadBalancerSourceRanges'] = s.loadBalancerSourceRanges;
  return { apiVersion: 'v1', kind: 'Service', metadata: { name: s.name, namespace: NAMESPACE }, spec };
}

export interface EndpointSpec {
  readonly pod: PodInfo;
  readonly ready?: boolean;
  readonly serving?: boolean;
  readonly terminating?: boolean;
}

/** One EndpointSlice for a Service: its endpoints are harness pods, ports named like the Service's. */
export function endpointSlice(serviceName: string, endpoints: readonly EndpointSpec[], ports: readonly PortSpec[], sliceName = `${serviceName}-1`): KubeObject {
  return {
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
    metadata: { name: sliceName, namespace: NAMESPACE, labels: { 'kubernetes.io/service-name': serviceName, 'endpointslice.kubernetes.io/managed-by': 'kpt-e2e' } },
    addressType: 'IPv4',
    endpoints: endpoints.map((e) => ({
      addresses: [e.pod.ip],
      conditions: { ready: e.ready ?? true, serving: e.serving ?? e.ready ?? true, terminating: e.terminating ?? false },
      nodeName: e.pod.node,
      targetRef: { kind: 'Pod', namespace: NAMESPACE, name: e.pod.name },
    })),
    ports: ports.map((p) => ({ name: p.name, port: p.targetPort, protocol: p.protocol })),
  };
}

export function nodeObject(n: NodeInfo): KubeObject {
  return {
    apiVersion: 'v1', kind: 'Node',
    metadata: { name: n.name, labels: { 'kubernetes.io/hostname': n.name } },
    spec: { podCIDR: n.podCIDR, podCIDRs: [n.podCIDR] },
    status: { addresses: [{ type: 'InternalIP', address: n.ip }, { type: 'Hostname', address: n.name }] },
  };
}
