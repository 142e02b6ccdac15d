import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import { LOCAL, NODE_IP, service, slice } from '../../../test/cases/fixtures.js';
import { listenerKey, planUserspace } from './plan.js';

const K = (svc: string, port = 'p') => `ns1/${svc}:${port}`;

function plan(services: unknown[], slices: unknown[]) {
  return planUserspace(syncStateFromObjects({ services, slices, family: 'IPv4', nodeIPs: { IPv4: NODE_IP } }));
}

describe('planUserspace', () => {
  it('one cluster listener serves ClusterIP, externalIPs, LB VIPs and the NodePort of a Cluster-policy port', () => {
    const p = plan(
      [
        service(
          'a',
          {
            clusterIP: '172.30.0.41',
            type: 'LoadBalancer',
            externalIPs: ['192.168.99.11'],
            lb: ['1.2.3.4', { ip: '1.2.3.5', ipMode: 'Proxy' }],
          },
          [{ name: 'p', port: 80, nodePort: 30080 }],
        ),
      ],
      [slice('a', [{ name: 'p', port: 8080 }], [{ ip: '10.180.0.1' }, { ip: '10.180.0.2' }])],
    );
    const lk = listenerKey(K('a'), 'TCP', 'cluster');
    assert.deepEqual([...p.listeners.keys()], [lk]);
    assert.deepEqual(
      p.listeners.get(lk)!.endpoints.map((e) => e.key),
      ['10.180.0.1:8080', '10.180.0.2:8080'],
    );
    assert.deepEqual(p.portals, [
      {
        servicePortKey: K('a'),
        protocol: 'TCP',
        port: 80,
        clusterIP: '172.30.0.41',
        internal: { kind: 'listener', listener: lk },
        externalIPs: ['192.168.99.11', '1.2.3.4'],
        nodePort: 30080,
        external: { kind: 'listener', listener: lk },
      },
    ]);
  });

  it('externalTrafficPolicy Local gets its own listener with the local endpoints only', () => {
    const p = plan(
      [
        service('a', { clusterIP: '172.30.0.41', type: 'NodePort', externalTrafficPolicy: 'Local' }, [
          { name: 'p', port: 80, nodePort: 30080 },
        ]),
      ],
      [
        slice(
          'a',
          [{ name: 'p', port: 80 }],
          [
            { ip: '10.180.0.1', node: LOCAL },
            { ip: '10.180.1.1', node: 'other' },
          ],
        ),
      ],
    );
    const local = p.listeners.get(listenerKey(K('a'), 'TCP', 'local'))!;
    const cluster = p.listeners.get(listenerKey(K('a'), 'TCP', 'cluster'))!;
    assert.deepEqual(
      local.endpoints.map((e) => e.key),
      ['10.180.0.1:80'],
    );
    assert.equal(cluster.endpoints.length, 2);
    assert.deepEqual(p.portals[0]!.external, { kind: 'listener', listener: local.key });
    assert.deepEqual(p.portals[0]!.internal, { kind: 'listener', listener: cluster.key });
  });

  it('no endpoints at all: reject everywhere; endpoints only elsewhere under a Local policy: drop', () => {
    const p = plan(
      [
        service('none', { clusterIP: '172.30.0.42', type: 'NodePort' }, [{ name: 'p', port: 80, nodePort: 30081 }]),
        service('itp', { clusterIP: '172.30.0.43', internalTrafficPolicy: 'Local' }, [{ name: 'p', port: 80 }]),
      ],
      [slice('itp', [{ name: 'p', port: 80 }], [{ ip: '10.180.1.1', node: 'other' }])],
    );
    const none = p.portals.find((x) => x.servicePortKey === K('none'))!;
    const itp = p.portals.find((x) => x.servicePortKey === K('itp'))!;
    assert.deepEqual([none.internal, none.external], [{ kind: 'reject' }, { kind: 'reject' }]);
    assert.deepEqual([itp.internal, itp.external], [{ kind: 'drop' }, null]);
    assert.equal(p.listeners.size, 0);
  });

  it('UDP ports get UDP listeners; SCTP ports are skipped with a reason; affinity timeout carried', () => {
    const p = plan(
      [
        service(
          'd',
          {
            clusterIP: '172.30.0.44',
            sessionAffinity: 'ClientIP',
            sessionAffinityConfig: { clientIP: { timeoutSeconds: 30 } },
          },
          [
            { name: 'dns', port: 53, protocol: 'UDP' },
            { name: 's', port: 99, protocol: 'SCTP' },
          ],
        ),
      ],
      [
        slice(
          'd',
          [
            { name: 'dns', port: 53, protocol: 'UDP' },
            { name: 's', port: 99, protocol: 'SCTP' },
          ],
          [{ ip: '10.180.0.1' }],
        ),
      ],
    );
    const l = p.listeners.get(listenerKey(K('d', 'dns'), 'UDP', 'cluster'))!;
    assert.equal(l.protocol, 'UDP');
    assert.equal(l.stickyMs, 30_000);
    assert.deepEqual(
      p.skipped.map((s) => s.servicePortKey),
      [K('d', 's')],
    );
    assert.equal(p.portals.length, 1);
  });
});
