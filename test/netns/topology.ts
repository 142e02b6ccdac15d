// The fixed address plan of a test cluster. Every run uses the same
// addresses; they live only inside the run's own namespaces, so runs cannot
// see each other and nothing touches the root namespace.
//
//   switch ns: bridge br0 (the shared L2 segment 192.168.77.0/24); br0 has
//              192.168.77.1, the nodes' default gateway, which forwards
//              nothing: a packet no rule took care of vanishes there, as it
//              would upstream of a real node, instead of failing the route
//              lookup (which would hide REJECT rules behind ENETUNREACH)
//     |-- cp    192.168.77.2    control plane: the test API server
//     |-- node1 192.168.77.11   pods 10.244.1.0/24 (routed /32s on veths)
//     |-- node2 192.168.77.12   pods 10.244.2.0/24
//     `-- ext   192.168.77.100  external client, + .101 as a second source
//                               address (for loadBalancerSourceRanges deny)
//   cluster CIDR 10.244.0.0/16, Service CIDR 10.96.0.0/16 (ext routes it via node1)

export const SEGMENT_PREFIX = 24;
export const GATEWAY_IP = '192.168.77.1';
export const CONTROL_PLANE_IP = '192.168.77.2';
export const EXTERNAL_IP = '192.168.77.100';
export const EXTERNAL_IP2 = '192.168.77.101';
export const CLUSTER_CIDR = '10.244.0.0/16';
export const SERVICE_CIDR = '10.96.0.0/16';
export const API_PORT = 6443;

export interface PodInfo {
  /** Pod name; also what its echo servers answer with. */
  readonly name: string;
  readonly ns: string;
  readonly ip: string;
  readonly node: string;
}

export interface NodeInfo {
  readonly name: string;
  readonly ns: string;
  readonly ip: string;
  readonly podCIDR: string;
  /** Gateway address the pods use; sits on every pod veth of the node. */
  readonly podGateway: string;
  readonly pods: readonly PodInfo[];
}

export interface HostInfo {
  readonly ns: string;
  readonly ip: string;
}

export interface Topology {
  readonly prefix: string;
  readonly switchNs: string;
  readonly controlPlane: HostInfo;
  readonly external: HostInfo & { readonly ip2: string };
  readonly nodes: readonly NodeInfo[];
  readonly pods: readonly PodInfo[];
}

const POD_LETTERS = 'abcdefgh';

/** The plan for a run with this prefix: nodeCount nodes of podsPerNode pods each. */
export function planTopology(prefix: string, nodeCount = 2, podsPerNode = 2): Topology {
  const nodes: NodeInfo[] = [];
  for (let n = 1; n <= nodeCount; n++) {
    const name = `node${n}`;
    const pods: PodInfo[] = [];
    for (let p = 0; p < podsPerNode; p++) {
      const podName = `${name}-${POD_LETTERS[p]}`;
      pods.push({ name: podName, ns: `${prefix}${podName}`, ip: `10.244.${n}.${10 + p}`, node: name });
    }
    nodes.push({ name, ns: `${prefix}${name}`, ip: `192.168.77.${10 + n}`, podCIDR: `10.244.${n}.0/24`, podGateway: `10.244.${n}.1`, pods });
  }
  return {
    prefix,
    switchNs: `${prefix}sw`,
    controlPlane: { ns: `${prefix}cp`, ip: CONTROL_PLANE_IP },
    external: { ns: `${prefix}ext`, ip: EXTERNAL_IP, ip2: EXTERNAL_IP2 },
    nodes,
    pods: nodes.flatMap((n) => n.pods),
  };
}

/** Every namespace of the plan, switch first (the order they are created in). */
export function allNamespaces(t: Topology): string[] {
  return [t.switchNs, t.controlPlane.ns, t.external.ns, ...t.nodes.map((n) => n.ns), ...t.pods.map((p) => p.ns)];
}
