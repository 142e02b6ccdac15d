// Service and EndpointSlice objects shaped as a real API server returns them
// for a kubectl-applied Deployment + Service: labels, the last-applied
// annotation, managedFields, ownerReferences, targetRefs, zones. The proxy
// reads a fraction of this; benchmarks use these so that what it keeps (and
// what it drops) costs what it costs in a real cluster.

export const BENCH_NODE = 'bench-node';
export const BENCH_NODE_IP = '192.168.50.2';
const NODES = 20;

/** ClusterIP of Service i: 172.30.0.10 upwards, on into 172.31.0.0/16 and beyond past 65k Services. */
export function clusterIP(i: number): string {
  const n = i + 10;
  return `172.${30 + (n >> 16)}.${(n >> 8) & 255}.${n & 255}`;
}

/** The j-th original endpoint of Service i: 10.128.0.0/10, unique per (i, j) for j < 8. */
export function podIP(i: number, j: number): string {
  const n = i * 8 + j + 1;
  return `10.${128 + ((n >> 16) & 63)}.${(n >> 8) & 255}.${n & 255}`;
}

/** Fresh addresses for endpoint changes: 10.64.0.0/10, the k-th one. */
export function churnIP(k: number): string {
  const n = k + 1;
  return `10.${64 + ((n >> 16) & 63)}.${(n >> 8) & 255}.${n & 255}`;
}

const nsOf = (i: number): string => `team-${i % 50}`;
const nameOf = (i: number): string => `svc-${i}`;
const time = '2026-11-30T12:00:00Z';
const uid = (kind: string, i: number, j = 0): string => {
  const h = (i * 7919 + j * 104729 + kind.length * 31).toString(16).padStart(12, '0');
  return `5f1c2a3b-${kind.slice(0, 4).padEnd(4, '0')}-4c5d-8e9f-${h.slice(-12)}`;
};

export function serviceKey(i: number): { namespace: string; name: string } {
  return { namespace: nsOf(i), name: nameOf(i) };
}

export function sliceName(i: number): string {
  return `${nameOf(i)}-x7k2p`;
}

export function service(i: number): Record<string, unknown> {
  const name = nameOf(i);
  const labels = { app: name, 'app.kubernetes.io/name': name, 'app.kubernetes.io/part-of': 'bench' };
  const applied = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { annotations: {}, labels, name, namespace: nsOf(i) },
    spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }], selector: { app: name } },
  };
  return {
    metadata: {
      name,
      namespace: nsOf(i),
      labels,
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify(applied) + '\n' },
      managedFields: [
        {
          manager: 'kubectl-client-side-apply',
          operation: 'Update',
          apiVersion: 'v1',
          time,
          fieldsType: 'FieldsV1',
          fieldsV1: {
            'f:metadata': {
              'f:annotations': { '.': {}, 'f:kubectl.kubernetes.io/last-applied-configuration': {} },
              'f:labels': { '.': {}, 'f:app': {}, 'f:app.kubernetes.io/name': {}, 'f:app.kubernetes.io/part-of': {} },
            },
            'f:spec': {
              'f:internalTrafficPolicy': {},
              'f:ports': {
                '.': {},
                'k:{"port":80,"protocol":"TCP"}': {
                  '.': {},
                  'f:name': {},
                  'f:port': {},
                  'f:protocol': {},
                  'f:targetPort': {},
                },
              },
              'f:selector': {},
              'f:sessionAffinity': {},
              'f:type': {},
            },
          },
        },
      ],
    },
    spec: {
      ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
      selector: { app: name },
      clusterIP: clusterIP(i),
      clusterIPs: [clusterIP(i)],
      type: 'ClusterIP',
      sessionAffinity: 'None',
      ipFamilies: ['IPv4'],
      ipFamilyPolicy: 'SingleStack',
      internalTrafficPolicy: 'Cluster',
    },
    status: { loadBalancer: {} },
  };
}

export function sliceEndpoint(i: number, j: number, ip: string): Record<string, unknown> {
  const node = j === 0 && i % 20 === 0 ? BENCH_NODE : `node-${(i + j) % NODES}`;
  return {
    addresses: [ip],
    conditions: { ready: true, serving: true, terminating: false },
    nodeName: node,
    targetRef: {
      kind: 'Pod',
      namespace: nsOf(i),
      name: `${nameOf(i)}-6d8f9c7b5-${j}q${i % 97}z`,
      uid: uid('pod', i, j),
    },
    zone: `zone-${(i + j) % 3}`,
  };
}

export function endpointSlice(i: number, endpoints: number, triggerTime = time): Record<string, unknown> {
  const name = nameOf(i);
  return {
    metadata: {
      name: sliceName(i),
      generateName: `${name}-`,
      namespace: nsOf(i),
      generation: 1,
      labels: {
        app: name,
        'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io',
        'kubernetes.io/service-name': name,
      },
      annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': triggerTime },
      ownerReferences: [
        { apiVersion: 'v1', kind: 'Service', name, uid: uid('service', i), controller: true, blockOwnerDeletion: true },
      ],
      managedFields: [
        {
          manager: 'kube-controller-manager',
          operation: 'Update',
          apiVersion: 'discovery.k8s.io/v1',
          time,
          fieldsType: 'FieldsV1',
          fieldsV1: {
            'f:addressType': {},
            'f:endpoints': {},
            'f:metadata': {
              'f:annotations': { '.': {}, 'f:endpoints.kubernetes.io/last-change-trigger-time': {} },
              'f:generateName': {},
              'f:labels': {
                '.': {},
                'f:app': {},
                'f:endpointslice.kubernetes.io/managed-by': {},
                'f:kubernetes.io/service-name': {},
              },
              'f:ownerReferences': { '.': {}, [`k:{"uid":"${uid('service', i)}"}`]: {} },
            },
            'f:ports': {},
          },
        },
      ],
    },
    addressType: 'IPv4',
    endpoints: Array.from({ length: endpoints }, (_, j) => sliceEndpoint(i, j, podIP(i, j))),
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
  };
}

export function benchNode(): Record<string, unknown> {
  return {
    metadata: {
      name: BENCH_NODE,
      labels: {
        'kubernetes.io/hostname': BENCH_NODE,
        'kubernetes.io/os': 'linux',
        'topology.kubernetes.io/zone': 'zone-0',
      },
    },
    spec: { podCIDR: '10.244.0.0/24', podCIDRs: ['10.244.0.0/24'] },
    status: { addresses: [{ type: 'InternalIP', address: BENCH_NODE_IP }] },
  };
}
