// The transform keeps everything the proxy reads: the SyncState built from
// transformed objects equals the one built from the objects as received, for
// every packet-flow scenario (each Service feature), and the Node fields that
// health and topology read survive. What a real server adds (managedFields,
// last-applied, selector, targetRefs, Node images and conditions) is dropped.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EndpointSlice, Node, Service } from '../../core/api.js';
import { nodeInfoFromNode } from '../../core/nodeinfo.js';
import { syncStateFromObjects } from '../../core/snapshot.js';
import { PACKET_FLOW_SCENARIOS } from '../../../test/cases/packetflow.js';
import { EndpointSliceCache, endpointSliceKeys } from '../../core/endpointslicecache.js';
import {
  endpointSliceStub,
  transformEndpointSlice,
  transformNode,
  transformService,
  transformServiceCIDR,
} from './transform.js';

const ts = (s: Service): Service => transformService(s as never) as never;
const te = (s: EndpointSlice): EndpointSlice => transformEndpointSlice(s as never) as never;

describe('transform', () => {
  it('yields the same SyncState as the objects as received, for every packet-flow scenario', () => {
    for (const sc of PACKET_FLOW_SCENARIOS) {
      for (const nodeName of ['test-node', 'host2']) {
        const input = { family: sc.family, nodeName, serviceCIDRs: ['172.30.0.0/16'] };
        const raw = syncStateFromObjects({ ...input, services: sc.setup.services, slices: sc.setup.slices });
        const lean = syncStateFromObjects({
          ...input,
          services: sc.setup.services.map(ts),
          slices: sc.setup.slices.map(te),
        });
        assert.deepEqual(lean, raw, sc.name);
      }
    }
  });

  it('keeps in a slice stub what an update or delete needs of the old slice, and no endpoints', () => {
    for (const sc of PACKET_FLOW_SCENARIOS) {
      const cache = new EndpointSliceCache('test-node', sc.family);
      for (const slice of sc.setup.slices) cache.updatePending(te(slice), false);
      cache.checkoutChanges();
      for (const slice of sc.setup.slices) {
        const stub = endpointSliceStub(te(slice));
        assert.deepEqual(endpointSliceKeys(stub), endpointSliceKeys(slice), sc.name);
        assert.equal(stub.addressType, slice.addressType, sc.name);
        assert.equal(stub.metadata.resourceVersion, slice.metadata.resourceVersion, sc.name);
        assert.equal((stub as { endpoints?: unknown }).endpoints, undefined, sc.name);
        cache.updatePending(stub, true);
      }
      for (const ch of cache.checkoutChanges().values()) assert.equal(ch.current.size, 0, sc.name);
    }
  });

  it("drops what the proxy never reads from a real server's objects", () => {
    const svc = transformService({
      metadata: {
        name: 'web',
        namespace: 'team-1',
        uid: 'u1',
        resourceVersion: '7',
        labels: { app: 'web' },
        annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{...}' },
        managedFields: [{ manager: 'kubectl' }],
        creationTimestamp: '2026-01-01T00:00:00Z',
      },
      spec: {
        type: 'LoadBalancer',
        selector: { app: 'web' },
        clusterIP: '172.30.0.5',
        clusterIPs: ['172.30.0.5'],
        ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080, protocol: 'TCP', appProtocol: 'http' }],
        externalTrafficPolicy: 'Local',
        healthCheckNodePort: 31000,
        ipFamilies: ['IPv4'],
      },
      status: { loadBalancer: { ingress: [{ ip: '1.2.3.4', ipMode: 'VIP', ports: [{ port: 80 }] }] }, conditions: [] },
    });
    assert.deepEqual(svc, {
      metadata: { name: 'web', namespace: 'team-1', resourceVersion: '7' },
      spec: {
        type: 'LoadBalancer',
        clusterIP: '172.30.0.5',
        clusterIPs: ['172.30.0.5'],
        ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30080 }],
        externalTrafficPolicy: 'Local',
        healthCheckNodePort: 31000,
      },
      status: { loadBalancer: { ingress: [{ ip: '1.2.3.4', ipMode: 'VIP' }] } },
    });
    const slice = transformEndpointSlice({
      metadata: {
        name: 'web-x',
        namespace: 'team-1',
        resourceVersion: '8',
        labels: { 'kubernetes.io/service-name': 'web', app: 'web' },
        annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': '2026-01-01T00:00:00Z', other: 'x' },
        ownerReferences: [{ kind: 'Service' }],
      },
      addressType: 'IPv4',
      endpoints: [
        {
          addresses: ['10.1.0.1'],
          conditions: { ready: true },
          nodeName: 'n1',
          zone: 'z1',
          hints: { forZones: [{ name: 'z1' }] },
          targetRef: { kind: 'Pod', name: 'web-1' },
        },
      ],
      ports: [{ name: 'http', port: 8080, protocol: 'TCP', appProtocol: 'http' }],
    });
    assert.deepEqual(slice, {
      metadata: {
        name: 'web-x',
        namespace: 'team-1',
        resourceVersion: '8',
        labels: { 'kubernetes.io/service-name': 'web' },
        annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': '2026-01-01T00:00:00Z' },
      },
      addressType: 'IPv4',
      endpoints: [
        {
          addresses: ['10.1.0.1'],
          conditions: { ready: true },
          nodeName: 'n1',
          zone: 'z1',
          hints: { forZones: [{ name: 'z1' }] },
        },
      ],
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    });
    assert.deepEqual(
      transformServiceCIDR({
        metadata: { name: 'k', resourceVersion: '1' },
        spec: { cidrs: ['172.30.0.0/16'] },
        status: { conditions: [] },
      }),
      {
        metadata: { name: 'k', resourceVersion: '1' },
        spec: { cidrs: ['172.30.0.0/16'] },
      },
    );
  });

  it('shares one frozen conditions object per combination, and copies unusual ones as received', () => {
    const mk = (conditions: unknown) =>
      transformEndpointSlice({ metadata: {}, endpoints: [{ addresses: ['10.0.0.1'], conditions }] }) as {
        endpoints: Array<{ conditions: unknown }>;
      };
    const a = mk({ ready: true, serving: true, terminating: false }).endpoints[0]!.conditions;
    const b = mk({ ready: true, serving: true, terminating: false }).endpoints[0]!.conditions;
    assert.equal(a, b);
    assert.ok(Object.isFrozen(a));
    assert.notEqual(a, mk({ ready: false, serving: true, terminating: true }).endpoints[0]!.conditions);
    const odd = { ready: 'yes' };
    assert.equal(mk(odd).endpoints[0]!.conditions, odd);
  });

  it("keeps the Node's labels, addresses, podCIDRs, taints and deletion mark", () => {
    const node: Node = {
      metadata: {
        name: 'n1',
        resourceVersion: '3',
        labels: { 'topology.kubernetes.io/zone': 'z1', 'kubernetes.io/hostname': 'n1' },
        deletionTimestamp: '2026-01-01T00:00:00Z',
      },
      spec: {
        podCIDR: '10.0.1.0/24',
        podCIDRs: ['10.0.1.0/24'],
        taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }],
      },
      status: { addresses: [{ type: 'InternalIP', address: '192.0.2.1' }] },
    };
    const withNoise = {
      ...node,
      status: { ...node.status, images: [{ names: ['x'], sizeBytes: 1 }], conditions: [{ type: 'Ready' }] },
    };
    const lean = transformNode(withNoise as never) as unknown as Node;
    assert.deepEqual(lean, node);
    assert.deepEqual(nodeInfoFromNode('n1', lean), nodeInfoFromNode('n1', node));
  });

  it('passes garbage through for the core to report, and never throws', () => {
    for (const bad of [
      { metadata: null },
      { metadata: { name: 5 }, spec: 'x' },
      { metadata: {}, endpoints: 'x', ports: [null] },
    ]) {
      assert.doesNotThrow(() => transformService(bad as never));
      assert.doesNotThrow(() => transformEndpointSlice(bad as never));
      assert.doesNotThrow(() => transformNode(bad as never));
    }
    assert.deepEqual(transformEndpointSlice({ metadata: {}, endpoints: 'x', ports: [null] } as never), {
      metadata: {},
      endpoints: 'x',
      ports: [null],
    });
  });
});
