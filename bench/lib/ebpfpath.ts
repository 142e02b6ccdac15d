// The ebpf benchmarks' node: the addresses of the measured path
// (cli 10.0.1.2 -- node 10.0.1.1 | 10.0.2.1 -- srv 10.0.2.2) and the
// datapath settings that make it a DNAT-only path (the client counts as a
// local pod, so nothing is masqueraded). The NodePort path comes from
// outside the cluster (ext 10.0.3.2 -- node 10.0.3.1), so it is DNATed and
// masqueraded. bench/ebpf.ts builds the path with
// real namespaces; bench/ebpf-traffic.ts runs the program on frames of it.
import type { DataplaneConfig } from '../../src/core/types.js';

export const VIP = '10.96.0.10';
export const CLIENT = '10.0.1.2';
export const BACKEND = '10.0.2.2';
/** The node's address towards the external client, and that client. */
export const NODE_EXT = '10.0.3.1';
export const EXT_CLIENT = '10.0.3.2';
/** The measured Service's NodePorts (with buildState's nodePorts), for its ports 80, 81, 82. */
export const NODE_PORT_BASE = 30080;

export const PATH_CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.1.0/24'] },
  nodePortAddresses: null,
  localhostNodePorts: false,
  localIPs: ['127.0.0.1', '10.0.1.1', '10.0.2.1', NODE_EXT],
};
