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

// IPv6 plan, only when a cluster is created with ipv6: true (dual-stack):
// segment fd00:77::/64 (node N = fd00:77::1N, ext = fd00:77::100), pods of
// node N in fd00:10:244:N::/64 (gateway ::1, pods ::10, ::11), Service CIDR
// fd00:10:96::/112 (ext routes it via node1).
export const SEGMENT6_PREFIX = 64;
export const EXTERNAL_IP6 = 'fd00:77::100';
export const CLUSTER_CIDR6 = 'fd00:10:244::/56';
export const SERVICE_CIDR6 = 'fd00:10:96::/112';

export interface PodInfo {
  /** Pod name; also what its echo servers answer with. */
  readonly name: string;
  readonly ns: string;
  readonly ip: string;
  readonly node: string;
  /** Only in dual-stack clusters. */
  readonly ip6?: string;
}

export interface NodeInfo {
  readonly name: string;
  readonly ns: string;
  readonly ip: string;
  readonly podCIDR: string;
  /** Gateway address the pods use; sits on every pod veth of the node. */
  readonly podGateway: string;
  readonly pods: readonly PodInfo[];
  /** Only in dual-stack clusters: the node's IPv6 address, pod /64 and pod gateway. */
  readonly ip6?: string;
  readonly podCIDR6?: string;
  readonly podGateway6?: string;
}

export interface HostInfo {
  readonly ns: string;
  readonly ip: string;
}

export interface Topology {
  readonly prefix: string;
  readonly switchNs: string;
  readonly controlPlane: HostInfo;
  readonly external: HostInfo & { readonly ip2: string; readonly ip6?: string };
  readonly nodes: readonly NodeInfo[];
  readonly pods: readonly PodInfo[];
}

const POD_LETTERS = 'abcdefgh';

/** The plan for a run with this prefix: nodeCount nodes of podsPerNode pods each (plus IPv6 addresses if ipv6). */
export function planTopology(prefix: string, nodeCount = 2, podsPerNode = 2, ipv6 = false): Topology {
  const nodes: NodeInfo[] = [];
  for (let n = 1; n <= nodeCount; n++) {
    const name = `node${n}`;
    const pods: PodInfo[] = [];
    for (let p = 0; p < podsPerNode; p++) {
      const podName = `${name}-${POD_LETTERS[p]}`;
      pods.push({
        name: podName,
        ns: `${prefix}${podName}`,
        ip: `10.244.${n}.${10 + p}`,
        node: name,
        ...(ipv6 ? { ip6: `fd00:10:244:${n}::${10 + p}` } : {}),
      });
    }
    const v6 = ipv6
      ? { ip6: `fd00:77::${10 + n}`, podCIDR6: `fd00:10:244:${n}::/64`, podGateway6: `fd00:10:244:${n}::1` }
      : {};
    nodes.push({
      name,
      ns: `${prefix}${name}`,
      ip: `192.168.77.${10 + n}`,
      podCIDR: `10.244.${n}.0/24`,
      podGateway: `10.244.${n}.1`,
      pods,
      ...v6,
    });
  }
  return {
    prefix,
    switchNs: `${prefix}sw`,
    controlPlane: { ns: `${prefix}cp`, ip: CONTROL_PLANE_IP },
    external: { ns: `${prefix}ext`, ip: EXTERNAL_IP, ip2: EXTERNAL_IP2, ...(ipv6 ? { ip6: EXTERNAL_IP6 } : {}) },
    nodes,
    pods: nodes.flatMap((n) => n.pods),
  };
}

/** Every namespace of the plan, switch first (the order they are created in). */
export function allNamespaces(t: Topology): string[] {
  return [t.switchNs, t.controlPlane.ns, t.external.ns, ...t.nodes.map((n) => n.ns), ...t.pods.map((p) => p.ns)];
}
