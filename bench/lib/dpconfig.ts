// The datapath configuration the iptables benches render with: a node at
// 192.168.0.2 in a 10.0.0.0/8 cluster, masquerade mark 0x4000, NodePorts on
// every address. One definition, so that their figures describe one setup.
import type { DataplaneConfig } from '../../src/core/types.js';

export const BENCH_IPTABLES_CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8'] },
  nodePortAddresses: null,
  localhostNodePorts: false,
  localIPs: ['127.0.0.1', '192.168.0.2'],
};
