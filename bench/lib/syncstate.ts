// The SyncState the sync benches feed a dataplane (nftables-sync, userspace-sync):
// N Services x 2 endpoints on other nodes, one TCP port each, every 10th a
// NodePort, and the partial state the engine hands over after one more
// endpoint for one Service.
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import { categorizeEndpoints } from '../../src/core/topology.js';
import type { Endpoint, SyncState } from '../../src/core/types.js';
import {
  endpoint,
  makeNode,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
} from '../../test/support/fixtures.js';

const epIP = (i: number, k: number) => `10.${128 + k * 32 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;

export function buildState(n: number): SyncState {
  const services = [];
  const slices = [];
  for (let i = 0; i < n; i++) {
    services.push(
      withClusterIP(
        makeService('ns', `svc${i}`, (s) => {
          s.spec.ports = [
            svcPort('p80', 80, 'TCP', {
              targetPort: 8080,
              ...(i % 10 === 0 ? { nodePort: 30000 + ((i / 10) % 2700) } : {}),
            }),
          ];
          if (i % 10 === 0) s.spec.type = 'NodePort';
        }),
        `10.96.${i >> 8}.${i & 255}`,
      ),
    );
    slices.push(
      makeSlice('ns', `svc${i}`, 1, (s) => {
        s.endpoints = [endpoint(epIP(i, 0), { nodeName: 'n1' }), endpoint(epIP(i, 1), { nodeName: 'n2' })];
        s.ports = [slicePort('p80', 8080)];
      }),
    );
  }
  return syncStateFromObjects({
    services,
    slices,
    family: 'IPv4',
    nodeName: 'n0',
    node: makeNode('n0', { internalIPs: ['192.168.0.10'] }),
    serviceCIDRs: ['10.96.0.0/12'],
  });
}

/** The state after one more endpoint for service `i` (what the engine would hand over). */
export function withExtraEndpoint(base: SyncState, i: number, round: number): SyncState {
  const key = `ns/svc${i}:p80`;
  const sp = base.services.get(key)!;
  const eps = base.endpoints.get(key)!;
  const extra: Endpoint = {
    ...eps[0]!,
    ip: `10.250.${round}.${i & 255}`,
    key: `10.250.${round}.${i & 255}:8080`,
    nodeName: 'n3',
  };
  const next = [...eps, extra].sort((a, b) => (a.key < b.key ? -1 : 1));
  const endpoints = new Map(base.endpoints).set(key, next);
  const categorized = new Map(base.categorized).set(key, categorizeEndpoints(next, sp, 'n0', {}));
  return { ...base, endpoints, categorized, changedServices: new Set([sp.serviceKey]), fullSync: false };
}
