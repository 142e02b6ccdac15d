// The configuration and SyncState both IPVS benchmarks sync (ipvs-sync.ts in
// the QEMU guest, ipvs-fake-sync.ts on this machine): n ClusterIP Services x
// 5 endpoints on another node, so the two measure the same work.
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../src/core/types.js';

/** The node is 10.1.0.1 (client side) and 10.2.0.1 (server side); NodePorts only on the first. */
export const IPVS_BENCH_CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.244.0.0/16'] },
  nodePortAddresses: ['10.1.0.1/32'],
  localhostNodePorts: false,
  localIPs: ['10.1.0.1', '10.2.0.1'],
};

export interface IpvsBenchState {
  readonly full: boolean;
  /** Service 0's endpoints instead of its five (ipvs-sync.ts points it at a real server). */
  readonly first?: readonly string[];
  /** Service n/2's first endpoint replaced by this address, and that Service marked changed. */
  readonly change?: string;
}

export function ipvsBenchState(n: number, o: IpvsBenchState): SyncState {
  const services = [];
  const slices = [];
  for (let i = 0; i < n; i++) {
    const name = `s${i}`;
    services.push({
      metadata: { namespace: 'bench', name },
      spec: {
        clusterIP: `10.96.${(i >> 8) & 255}.${i & 255}`,
        ports: [{ name: 'p', port: 80, protocol: 'TCP', targetPort: 8080 }],
      },
    });
    const eps =
      i === 0 && o.first
        ? [...o.first]
        : Array.from({ length: 5 }, (_, e) => `10.${100 + e}.${(i >> 8) & 255}.${i & 255}`);
    if (o.change !== undefined && i === n >> 1) eps[0] = o.change;
    slices.push({
      metadata: { namespace: 'bench', name: `${name}-1`, labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4',
      endpoints: eps.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: 'other' })),
      ports: [{ name: 'p', port: 8080, protocol: 'TCP' }],
    });
  }
  return syncStateFromObjects({
    services: services as never,
    slices: slices as never,
    family: 'IPv4',
    nodeName: 'node',
    nodeIPs: { IPv4: '10.1.0.1' },
    fullSync: o.full,
    changedServices: o.change !== undefined ? [`bench/s${n >> 1}`] : undefined,
  });
}
