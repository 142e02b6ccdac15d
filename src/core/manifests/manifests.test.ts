// Standalone-mode manifests: parsing as `kubectl apply -f` takes files,
// validation errors that name the field, defaults, and the folder rule that
// a bad edit never takes away what was working.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseManifest } from './parse.js';
import { ManifestSet } from './store.js';

const SVC = `apiVersion: v1
kind: Service
metadata: { name: web }
spec:
  clusterIP: 10.96.0.10
  ports: [{ port: 80, targetPort: 8080 }]
`;
const SLICE = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: default
  labels: { kubernetes.io/service-name: web }
addressType: IPv4
endpoints:
  - addresses: [10.244.1.10]
    nodeName: node1
ports: [{ port: 8080 }]
`;

test('multi-document YAML, a JSON List and other kinds; defaults as the API server applies them', () => {
  const y = parseManifest(
    `${SVC}---\n${SLICE}---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\n`,
  );
  assert.equal(y.parseError, null);
  assert.deepEqual(
    y.objects.map((o) => [o.key, o.where]),
    [
      ['Service/default/web', 'document 1'],
      ['EndpointSlice/default/web-1', 'document 2'],
    ],
  );
  assert.deepEqual(y.ignored, ['document 3: apps/v1 Deployment web']);
  const svc = y.objects[0]!.obj as { metadata: { namespace: string }; spec: Record<string, unknown> };
  assert.equal(svc.metadata.namespace, 'default');
  assert.equal(svc.spec['type'], 'ClusterIP');
  assert.deepEqual(svc.spec['clusterIPs'], ['10.96.0.10']);
  assert.deepEqual(svc.spec['ports'], [{ port: 80, targetPort: 8080, protocol: 'TCP' }]);

  const list = JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: [
      {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name: 'node1' },
        status: { addresses: [{ type: 'InternalIP', address: '192.168.77.11' }] },
      },
      {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'ServiceCIDR',
        metadata: { name: 'kubernetes' },
        spec: { cidrs: ['10.96.0.0/16'] },
      },
    ],
  });
  const j = parseManifest(list);
  assert.deepEqual(
    j.objects.map((o) => [o.key, o.where]),
    [
      ['Node//node1', 'document 1, items[0]'],
      ['ServiceCIDR//kubernetes', 'document 1, items[1]'],
    ],
  );
});

test('invalid fields are named by path in upstream words; the object is rejected whole', () => {
  const bad = parseManifest(`apiVersion: v1
kind: Service
metadata: { name: Web_1, namespace: shop }
spec:
  type: NodePort
  clusterIP: 10.96.0.300
  externalTrafficPolicy: Locale
  ports:
    - { name: http, port: 70000 }
    - { name: http, port: 81, protocol: ICMP, nodePort: 30081 }
  externalIPs: [1.2.3]
  loadBalancerSourceRanges: [10.0.0.0/33]
`);
  assert.equal(bad.objects.length, 0);
  assert.equal(bad.invalid.length, 1);
  assert.equal(bad.invalid[0]!.label, 'Service shop/Web_1');
  assert.deepEqual(bad.invalid[0]!.errors, [
    'metadata.name: Invalid value: "Web_1": a lowercase RFC 1123 label that starts with a letter',
    'spec.clusterIP: Invalid value: "10.96.0.300": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)',
    'spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive',
    'spec.ports[0].nodePort: Required value: a NodePort Service needs one; standalone mode has no allocator',
    'spec.ports[1].name: Invalid value: "http": duplicate port name',
    'spec.ports[1].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP"',
    'spec.externalIPs[0]: Invalid value: "1.2.3": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)',
    'spec.loadBalancerSourceRanges[0]: Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)',
    'spec.externalTrafficPolicy: Unsupported value: "Locale": supported values: "Cluster", "Local"',
  ]);
  const slice = parseManifest(
    SLICE.replace('[10.244.1.10]', '[fd00::1]').replace('{ port: 8080 }', '{ port: "8080" }'),
  );
  assert.deepEqual(slice.invalid[0]!.errors, [
    'endpoints[0].addresses[0]: Invalid value: "fd00::1": must be an IPv4 address',
    'ports[0].port: Invalid value: "8080": must be between 1 and 65535, inclusive',
  ]);
  const noLabel = parseManifest(SLICE.replace('labels: { kubernetes.io/service-name: web }', 'labels: {}'));
  assert.deepEqual(noLabel.invalid[0]!.errors, [
    'metadata.labels[kubernetes.io/service-name]: Required value: names the Service these endpoints belong to',
  ]);
  const noIP = parseManifest(SVC.replace('  clusterIP: 10.96.0.10\n', ''));
  assert.deepEqual(noIP.invalid[0]!.errors, [
    'spec.clusterIP: Required value: standalone mode has no API server to allocate one; give the address',
  ]);
  const version = parseManifest(SLICE.replace('discovery.k8s.io/v1', 'discovery.k8s.io/v1beta1'));
  assert.deepEqual(version.invalid[0]!.errors, [
    'apiVersion: Unsupported value: "discovery.k8s.io/v1beta1": supported values: "discovery.k8s.io/v1"',
  ]);
});

test('syntax errors name the line; duplicate keys are errors', () => {
  assert.match(parseManifest('a: [1,\n---\n').parseError ?? '', /^line \d+, column \d+: /);
  assert.match(
    parseManifest('kind: Service\nkind: Node\n').parseError ?? '',
    /^line 2, column 1: Map keys must be unique/,
  );
});

test('the folder: bad edits keep what worked, removals delete, duplicates across files are reported', () => {
  const set = new ManifestSet();
  let ch = set.update('a.yaml', `${SVC}---\n${SLICE}`);
  assert.deepEqual(
    ch.added.map((o) => o.key),
    ['Service/default/web', 'EndpointSlice/default/web-1'],
  );
  assert.deepEqual(set.problems(), []);

  // A syntax error: nothing changes, the error names the file and the line.
  ch = set.update('a.yaml', `${SVC}---\n${SLICE}  broken: [\n`);
  assert.deepEqual(
    [ch.added, ch.updated, ch.deleted].map((l) => l.length),
    [0, 0, 0],
  );
  assert.match(
    set.problems()[0]!.message,
    /^a\.yaml: not valid YAML or JSON: line \d+, column \d+: .*; its previous 2 object\(s\) stay in effect$/,
  );

  // An invalid Service: its previous version stays; the valid slice change goes through.
  ch = set.update(
    'a.yaml',
    `${SVC.replace('port: 80,', 'port: 0,')}---\n${SLICE.replace('10.244.1.10', '10.244.1.11')}`,
  );
  assert.deepEqual(
    ch.updated.map((u) => u.after.key),
    ['EndpointSlice/default/web-1'],
  );
  assert.equal(set.objects().get('Service/default/web')?.obj['spec'] !== undefined, true);
  assert.deepEqual(
    set.problems().map((p) => p.message),
    [
      'a.yaml: document 1 (Service default/web): spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive (its previous version stays in effect)',
    ],
  );

  // The same Service in another file: reported, the first file by name wins.
  ch = set.update('b.yaml', SVC.replace('10.96.0.10', '10.96.0.99'));
  assert.deepEqual(
    [ch.added, ch.updated, ch.deleted].map((l) => l.length),
    [0, 0, 0],
  );
  assert.match(
    set.problems().at(-1)!.message,
    /^b\.yaml: document 1 \(Service default\/web\): also defined in a\.yaml, which wins$/,
  );

  // Fixing a.yaml and removing it: b.yaml's definition takes over, then deleting b removes the Service.
  ch = set.update('a.yaml', null);
  assert.deepEqual(
    ch.deleted.map((o) => o.key),
    ['EndpointSlice/default/web-1'],
  );
  assert.deepEqual(
    ch.updated.map((u) => (u.after.obj['spec'] as { clusterIP: string }).clusterIP),
    ['10.96.0.99'],
  );
  ch = set.update('b.yaml', null);
  assert.deepEqual(
    ch.deleted.map((o) => o.key),
    ['Service/default/web'],
  );
  assert.deepEqual(set.problems(), []);
});
