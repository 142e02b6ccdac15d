// The ebpf benchmarks' Services: N bulk ClusterIP Services and the measured
// one on the path of ebpfpath.ts, and the one-endpoint change a partial sync
// is timed with (bench/ebpf.ts against the kernel, bench/ebpf-sync.ts the
// proxy's own work).
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import { categorizeEndpoints } from '../../src/core/topology.js';
import type { Endpoint, SyncState } from '../../src/core/types.js';
import { endpoint, makeService, makeSlice, slicePort, svcPort, withClusterIP } from '../../test/support/fixtures.js';
import { BACKEND, NODE_PORT_BASE, VIP } from './ebpfpath.js';

/** Only the measured Service, bench/web:http on VIP -> BACKEND:8080 (the per-packet benches). */
export function pathServiceState(): SyncState {
  return syncStateFromObjects({
    services: [
      withClusterIP(
        makeService('bench', 'web', (s) => {
          s.spec.ports = [svcPort('http', 80, 'TCP', { targetPort: 8080 })];
        }),
        VIP,
      ),
    ],
    slices: [
      makeSlice('bench', 'web', 1, (s) => {
        s.endpoints = [endpoint(BACKEND, { nodeName: 'node', ready: true })];
        s.ports = [slicePort('http', 8080)];
      }),
    ],
    family: 'IPv4',
    nodeName: 'node',
    serviceCIDRs: ['10.96.0.0/12'],
  });
}

/**
 * n bulk Services (172.30/16, one endpoint each) and the measured one, last
 * in name order; with `nodePorts` the measured one is a NodePort Service
 * (NODE_PORT_BASE + 0, 1, 2 for its ports 80, 81, 82); with `etpLocal` too,
 * externalTrafficPolicy: Local, its endpoint on this node (n0).
 */
export function buildState(n: number, opts: { nodePorts?: boolean; etpLocal?: boolean } = {}): SyncState {
  const services = [];
  const slices = [];
  for (let i = 0; i < n; i++) {
    services.push(
      withClusterIP(
        makeService('bulk', `svc${i}`, (s) => {
          s.spec.ports = [svcPort('p80', 80, 'TCP', { targetPort: 8080 })];
        }),
        `172.30.${i >> 8}.${i & 255}`,
      ),
    );
    slices.push(
      makeSlice('bulk', `svc${i}`, 1, (s) => {
        s.endpoints = [endpoint(`10.${128 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`, { nodeName: 'n1', ready: true })];
        s.ports = [slicePort('p80', 8080)];
      }),
    );
  }
  const ports = [80, 81, 82];
  services.push(
    withClusterIP(
      makeService('zz', 'measured', (s) => {
        s.spec.ports = ports.map((p, i) =>
          svcPort(`p${p}`, p, 'TCP', {
            targetPort: p + 8000,
            ...(opts.nodePorts ? { nodePort: NODE_PORT_BASE + i } : {}),
          }),
        );
        if (opts.nodePorts) s.spec.type = 'NodePort';
        if (opts.nodePorts && opts.etpLocal) s.spec.externalTrafficPolicy = 'Local';
      }),
      VIP,
    ),
  );
  slices.push(
    makeSlice('zz', 'measured', 1, (s) => {
      s.endpoints = [endpoint(BACKEND, { nodeName: opts.etpLocal ? 'n0' : 'n1', ready: true })];
      s.ports = ports.map((p) => slicePort(`p${p}`, p + 8000));
    }),
  );
  return syncStateFromObjects({
    services,
    slices,
    family: 'IPv4',
    nodeName: 'n0',
    serviceCIDRs: ['10.96.0.0/16', '172.30.0.0/16'],
  });
}

/** The state after one more endpoint for bulk service i (what the engine would hand over). */
export function withExtraEndpoint(base: SyncState, i: number, round: number): SyncState {
  const key = `bulk/svc${i}:p80`;
  const sp = base.services.get(key)!;
  const eps = base.endpoints.get(key)!;
  const ip = `10.250.${round & 255}.${i & 255}`;
  const extra: Endpoint = { ...eps[0]!, ip, key: `${ip}:8080`, nodeName: 'n3' };
  const next = [...eps, extra].sort((a, b) => (a.key < b.key ? -1 : 1));
  const endpoints = new Map(base.endpoints).set(key, next);
  const categorized = new Map(base.categorized).set(key, categorizeEndpoints(next, sp, 'n0', {}));
  return {
    ...base,
    endpoints,
    categorized,
    changedServices: new Set([sp.serviceKey]),
    changedServicePorts: new Set([key]),
    fullSync: false,
  };
}
