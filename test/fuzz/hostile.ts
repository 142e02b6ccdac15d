// Hostile API objects for the fuzz tests (fast-check arbitraries), and the
// valid cluster they are mixed into.
//
// A hostile object starts from a plausible Service / EndpointSlice / Node and
// has one to four fields replaced by hostile values: invalid and non-canonical
// IPs (leading zeros, IPv4-mapped IPv6, CIDRs, whitespace, NUL), ports 0,
// 65536, negative and fractional, duplicate ports, 1,000 ports, strings of
// 1 MiB, unicode, nulls, wrong types, missing fields, or any JSON value.
//
// Contract with the properties: nothing hostile may legitimately change how a
// valid Service is served. So every address a hostile object can carry lies
// outside the valid cluster's Service addresses (VALID_ADDRESSES), its ports
// avoid the valid NodePorts, and a hostile EndpointSlice that names a valid
// Service carries no usable address. Hostile objects never reuse a valid
// object's name.
import fc from 'fast-check';
import type { EndpointSlice, Node, Service } from '../../src/core/api.js';
import { LABEL_SERVICE_NAME } from '../../src/core/api.js';
import { endpoint, makeNode, makeService, makeSlice, slicePort, svcPort, withClusterIP } from '../support/fixtures.js';
import { NODE_IP, NODE_IP6, TEST_NODE_NAME } from '../cases/fixtures.js';

type Json = Record<string, unknown>;

// ---- the valid cluster ----

export const VALID_NS = 'valid';
export const OTHER_NODE = 'other-node';
export const LB_IP = '1.2.3.4';
export const EXT_IP = '192.168.99.50';
/** NodePorts of the valid Services (hostile ports never take these). */
export const VALID_NODE_PORTS = [30053, 30080, 30081, 30300] as const;

/** A flow a valid Service serves, traced through every renderer's Fake. */
export interface ValidFlow {
  readonly name: string;
  readonly family: 'IPv4' | 'IPv6';
  readonly src: string;
  readonly dst: string;
  readonly port: number;
  readonly protocol: 'TCP' | 'UDP';
}

const POD = '10.0.0.2';
const POD6 = 'fd00:10::2';
const OUTSIDE = '203.0.113.2';

export const VALID_FLOWS: readonly ValidFlow[] = [
  { name: 'a clusterIP', family: 'IPv4', src: POD, dst: '172.30.1.1', port: 80, protocol: 'TCP' },
  { name: 'b clusterIP udp', family: 'IPv4', src: POD, dst: '172.30.1.2', port: 53, protocol: 'UDP' },
  { name: 'b nodePort udp', family: 'IPv4', src: OUTSIDE, dst: NODE_IP, port: 30053, protocol: 'UDP' },
  { name: 'b nodePort tcp', family: 'IPv4', src: OUTSIDE, dst: NODE_IP, port: 30080, protocol: 'TCP' },
  { name: 'c clusterIP', family: 'IPv4', src: POD, dst: '172.30.1.3', port: 80, protocol: 'TCP' },
  { name: 'c LB (eTP Local)', family: 'IPv4', src: OUTSIDE, dst: LB_IP, port: 80, protocol: 'TCP' },
  { name: 'c nodePort (eTP Local)', family: 'IPv4', src: OUTSIDE, dst: NODE_IP, port: 30081, protocol: 'TCP' },
  { name: 'd externalIP', family: 'IPv4', src: OUTSIDE, dst: EXT_IP, port: 80, protocol: 'TCP' },
  { name: 'd clusterIP (affinity)', family: 'IPv4', src: POD, dst: '172.30.1.4', port: 80, protocol: 'TCP' },
  { name: 'e clusterIP v4', family: 'IPv4', src: POD, dst: '172.30.1.5', port: 80, protocol: 'TCP' },
  { name: 'e clusterIP v6', family: 'IPv6', src: POD6, dst: 'fd00:172:30::5', port: 80, protocol: 'TCP' },
  { name: 'f clusterIP, no endpoints', family: 'IPv4', src: POD, dst: '172.30.1.6', port: 80, protocol: 'TCP' },
];

/** Every address a valid flow goes to (hostile objects stay clear of them). */
export const VALID_ADDRESSES = new Set(VALID_FLOWS.map((f) => f.dst));

export function validServices(): Service[] {
  return [
    makeService(VALID_NS, 'a', (s) => {
      withClusterIP(s, '172.30.1.1');
      s.spec.ports = [svcPort('http', 80, 'TCP', { targetPort: 8080 })];
    }),
    makeService(VALID_NS, 'b', (s) => {
      withClusterIP(s, '172.30.1.2');
      s.spec.type = 'NodePort';
      s.spec.ports = [
        svcPort('dns', 53, 'UDP', { targetPort: 5353, nodePort: 30053 }),
        svcPort('http', 80, 'TCP', { targetPort: 8080, nodePort: 30080 }),
      ];
    }),
    makeService(VALID_NS, 'c', (s) => {
      withClusterIP(s, '172.30.1.3');
      s.spec.type = 'LoadBalancer';
      s.spec.externalTrafficPolicy = 'Local';
      s.spec.healthCheckNodePort = 30300;
      s.spec.ports = [svcPort('http', 80, 'TCP', { targetPort: 8080, nodePort: 30081 })];
      s.status = { loadBalancer: { ingress: [{ ip: LB_IP }] } };
    }),
    makeService(VALID_NS, 'd', (s) => {
      withClusterIP(s, '172.30.1.4');
      s.spec.externalIPs = [EXT_IP];
      s.spec.sessionAffinity = 'ClientIP';
      s.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: 600 } };
      s.spec.ports = [svcPort('http', 80, 'TCP', { targetPort: 8080 })];
    }),
    makeService(VALID_NS, 'e', (s) => {
      s.spec.clusterIP = '172.30.1.5';
      s.spec.clusterIPs = ['172.30.1.5', 'fd00:172:30::5'];
      s.spec.ipFamilies = ['IPv4', 'IPv6'];
      s.spec.ports = [svcPort('http', 80, 'TCP', { targetPort: 8080 })];
    }),
    makeService(VALID_NS, 'f', (s) => {
      withClusterIP(s, '172.30.1.6');
      s.spec.ports = [svcPort('http', 80, 'TCP', { targetPort: 8080 })];
    }),
  ];
}

export function validSlices(): EndpointSlice[] {
  const local = { nodeName: TEST_NODE_NAME, ready: true };
  const remote = { nodeName: OTHER_NODE, ready: true };
  const web = (svc: string, ips: Array<[string, typeof local]>) =>
    makeSlice(VALID_NS, svc, 1, (s) => {
      s.endpoints = ips.map(([ip, o]) => endpoint(ip, o));
      s.ports = [slicePort('http', 8080)];
    });
  return [
    web('a', [
      ['10.0.1.1', local],
      ['10.0.2.1', remote],
    ]),
    makeSlice(VALID_NS, 'b', 1, (s) => {
      s.endpoints = [endpoint('10.0.1.2', local), endpoint('10.0.2.2', remote)];
      s.ports = [slicePort('dns', 5353, 'UDP'), slicePort('http', 8080)];
    }),
    web('c', [
      ['10.0.1.3', local],
      ['10.0.2.3', remote],
    ]),
    web('d', [['10.0.2.4', remote]]),
    web('e', [['10.0.1.5', local]]),
    makeSlice(VALID_NS, 'e', 'v6', (s) => {
      s.addressType = 'IPv6';
      s.endpoints = [endpoint('fd00:10::15', local)];
      s.ports = [slicePort('http', 8080)];
    }),
  ];
}

export function validNode(): Node {
  return makeNode(TEST_NODE_NAME, { internalIPs: [NODE_IP, NODE_IP6], podCIDRs: ['10.0.0.0/24', 'fd00:10::/64'] });
}

// ---- hostile values ----

const MIB = 'x'.repeat(1 << 20);

/** Addresses a hostile object may use (outside VALID_ADDRESSES, also once parsed leniently). */
const hostileGoodIPs = fc.oneof(
  fc.nat(255).map((i) => `172.30.9.${i}`),
  fc.tuple(fc.nat(255), fc.nat(255)).map(([a, b]) => `10.97.${a}.${b}`),
  fc.nat(255).map((i) => `198.51.100.${i}`),
  fc.nat(0xffff).map((i) => `fd00:172:30::9:${i.toString(16)}`),
  fc.constantFrom('0.0.0.0', '255.255.255.255', '127.0.0.1', '224.0.0.1', '::', '::1', 'ff02::1', '169.254.169.254'),
);

/** Strings that are no usable address: each must be reported where an address is required. */
export const INVALID_IPS = [
  '172.30.9.256',
  '172.30.9',
  '172.30.9.1.1',
  '172.30.9.1/24',
  'fd00:172:30::9::1',
  'fd00:172:30::9:1/64',
  ' 172.30.9.1',
  '172.30.9.1 ',
  '172.30.9.1\u0000',
  '0x0a.0x61.0.1',
  'not-an-ip',
  '\u0661\u0667\u0662.30.9.1',
  'fe80::1%eth0',
  '',
];

const nonCanonicalIPs = fc.constantFrom(
  '172.030.009.001',
  '010.097.000.001',
  '::ffff:172.30.9.1',
  '::ffff:ac1e:901',
  'FD00:172:30::9:1',
  'fd00:0172:0030:0000:0000:0000:0009:0001',
  '0:0:0:0:0:ffff:10.97.0.1',
);

const hostileIP = fc.oneof(hostileGoodIPs, fc.constantFrom(...INVALID_IPS), nonCanonicalIPs);

const hostilePort = fc.oneof(
  fc.constantFrom(0, 65536, -1, -80, 1.5, 2 ** 31, 2 ** 53, Number.MAX_SAFE_INTEGER),
  fc.integer({ min: 1, max: 65535 }).filter((p) => !(VALID_NODE_PORTS as readonly number[]).includes(p)),
  fc.constantFrom('80', 'http', '', null),
);

const hostileString = fc.oneof(
  fc.constantFrom('', MIB, '\u0000', 'a\u0000b', '\u{1F4A9}', 'ünïcödé', 'UPPER', '-leading', 'a'.repeat(254)),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
);

const wrongType = fc.oneof(
  fc.constantFrom(null, true, false, 0, -1, 1e308, [], {}, [null], { a: 1 }),
  fc.jsonValue({ maxDepth: 3 }),
);

/** Any hostile value, for a field of unknown meaning. */
const anyHostile = fc.oneof(hostileIP, hostilePort, hostileString, wrongType);

// ---- hostile objects ----

/** A generated object and whether it is certainly invalid (then its intake must report a skip). */
export interface Hostile {
  readonly kind: 'service' | 'endpointslice' | 'node';
  readonly obj: unknown;
  /** A mutation that no intake may accept was applied (the object must be reported). */
  readonly mustReport: boolean;
  readonly mutations: readonly string[];
}

/** A mutation: the path it replaces and the value (undefined removes the field). */
type Mutation = { path: string; value: unknown; invalid: boolean };

function setPath(root: Json, path: string, value: unknown): void {
  const parts = path.split('.');
  let o: unknown = root;
  for (const p of parts.slice(0, -1)) {
    if (o === null || typeof o !== 'object') return;
    const cur = o as Record<string, unknown>;
    if (cur[p] === null || typeof cur[p] !== 'object')
      cur[p] = /^\d+$/.test(parts[parts.indexOf(p) + 1] ?? '') ? [] : {};
    o = cur[p];
  }
  if (o === null || typeof o !== 'object') return;
  const last = parts[parts.length - 1]!;
  if (value === undefined) delete (o as Record<string, unknown>)[last];
  else (o as Record<string, unknown>)[last] = value;
}

const mutation = (path: string, value: fc.Arbitrary<unknown>, invalid = false): fc.Arbitrary<Mutation> =>
  value.map((v) => ({ path, value: v, invalid }));

const serviceMutations: fc.Arbitrary<Mutation> = fc.oneof(
  mutation('metadata.name', fc.oneof(hostileString, wrongType)),
  mutation('metadata.namespace', fc.oneof(hostileString, wrongType)),
  mutation('metadata', wrongType),
  mutation('metadata.labels', fc.oneof(wrongType, fc.dictionary(hostileString, anyHostile, { maxKeys: 3 }))),
  mutation('metadata.annotations', fc.oneof(wrongType, fc.constant({ big: MIB, 'kube-proxy-ts/lb-algorithm': MIB }))),
  mutation('spec', wrongType),
  mutation('spec.type', fc.oneof(hostileString, wrongType, fc.constantFrom('NodePort', 'LoadBalancer'))),
  mutation('spec.clusterIP', fc.constantFrom(...INVALID_IPS.filter((s) => s !== '')), true),
  mutation('spec.clusterIP', fc.oneof(hostileIP, wrongType)),
  mutation('spec.clusterIPs', fc.constantFrom(...INVALID_IPS.filter((s) => s !== '').map((ip) => [ip])), true),
  mutation('spec.clusterIPs', fc.oneof(fc.array(hostileIP, { maxLength: 3 }), wrongType)),
  mutation('spec.ports', wrongType),
  mutation('spec.ports.0.port', fc.constantFrom(0, 65536, -1, 1.5, '80', null, true), true),
  mutation('spec.ports.0.port', hostilePort),
  mutation('spec.ports.0.nodePort', hostilePort),
  mutation('spec.ports.0.targetPort', fc.oneof(hostilePort, hostileString)),
  mutation('spec.ports.0.protocol', fc.constantFrom('tcp', 'ICMP', '', 6, null), true),
  mutation('spec.ports.0.name', fc.oneof(hostileString, wrongType)),
  mutation('spec.ports.1', fc.oneof(wrongType, fc.constant({ name: 'p', port: 80 }))),
  mutation('spec.externalIPs', fc.oneof(fc.array(hostileIP, { maxLength: 4 }), wrongType)),
  mutation(
    'spec.loadBalancerSourceRanges',
    fc.oneof(fc.array(fc.oneof(hostileIP, hostileString), { maxLength: 3 }), wrongType),
  ),
  mutation('spec.sessionAffinity', fc.oneof(hostileString, wrongType, fc.constant('ClientIP'))),
  mutation('spec.sessionAffinityConfig.clientIP.timeoutSeconds', fc.oneof(hostilePort, wrongType)),
  mutation('spec.externalTrafficPolicy', fc.oneof(hostileString, wrongType, fc.constant('Local'))),
  mutation('spec.internalTrafficPolicy', fc.oneof(hostileString, wrongType, fc.constant('Local'))),
  mutation('spec.healthCheckNodePort', hostilePort),
  mutation('spec.trafficDistribution', fc.oneof(hostileString, wrongType)),
  mutation(
    'status.loadBalancer.ingress',
    fc.oneof(fc.array(fc.record({ ip: hostileIP, ipMode: anyHostile }), { maxLength: 3 }), wrongType),
  ),
  mutation('spec.ipFamilies', fc.oneof(wrongType, fc.constant(['IPv6', 'IPv4']))),
);

/** A plausible Service in the hostile address range, then mutated. */
const hostileServiceBase = fc
  .record({
    ns: fc.constantFrom('hostile', VALID_NS),
    name: fc.integer({ min: 0, max: 40 }).map((i) => `bad-${i}`),
    ip: hostileGoodIPs,
    type: fc.constantFrom('ClusterIP', 'NodePort', 'LoadBalancer'),
    ports: fc.oneof(
      {
        weight: 12,
        arbitrary: fc.array(
          fc.record({
            name: fc.constantFrom('a', 'b', 'http', ''),
            port: hostilePort,
            protocol: fc.constantFrom('TCP', 'UDP', 'SCTP'),
          }),
          { maxLength: 4 },
        ),
      },
      // 1,000 ports, some of them duplicates (rare: every mode renders them at every sync).
      {
        weight: 1,
        arbitrary: fc.constant(
          Array.from({ length: 1000 }, (_, i) => ({ name: `p${i % 990}`, port: 1 + (i % 997), protocol: 'TCP' })),
        ),
      },
    ),
  })
  .map(({ ns, name, ip, type, ports }) => {
    const s = makeService(ns, name, (x) => {
      withClusterIP(x, ip);
      x.spec.type = type as 'ClusterIP';
      x.spec.ports = (ports as Json[]).map((p) => ({ ...p, targetPort: 8080 }) as never);
    });
    return s as unknown as Json;
  });

export const hostileService: fc.Arbitrary<Hostile> = fc
  .tuple(hostileServiceBase, fc.array(serviceMutations, { minLength: 1, maxLength: 4 }))
  .map(([base, muts]) => applyMutations('service', base, muts));

const sliceMutations: fc.Arbitrary<Mutation> = fc.oneof(
  mutation('metadata.name', fc.oneof(hostileString, wrongType)),
  mutation('metadata.namespace', fc.oneof(hostileString, wrongType)),
  mutation('metadata.labels', fc.oneof(wrongType, fc.constant({ [LABEL_SERVICE_NAME]: MIB }))),
  mutation(`metadata.labels.${LABEL_SERVICE_NAME}`, fc.oneof(hostileString, wrongType)),
  mutation('addressType', fc.oneof(hostileString, wrongType, fc.constantFrom('IPv6', 'FQDN'))),
  mutation('endpoints', wrongType),
  mutation('endpoints.0.addresses', fc.constantFrom(...INVALID_IPS.map((ip) => [ip])), true),
  mutation('endpoints.0.addresses', fc.oneof(fc.array(hostileIP, { maxLength: 3 }), wrongType)),
  mutation('endpoints.0.conditions', fc.oneof(wrongType, fc.record({ ready: anyHostile, serving: anyHostile }))),
  mutation('endpoints.0.nodeName', fc.oneof(hostileString, wrongType, fc.constant(TEST_NODE_NAME))),
  mutation('endpoints.0.zone', fc.oneof(hostileString, wrongType)),
  mutation('endpoints.0.hints', fc.oneof(wrongType, fc.constant({ forZones: [{ name: MIB }], forNodes: 5 }))),
  mutation('endpoints.1', wrongType),
  mutation('ports', wrongType),
  // Port 0 is ignored without a word, as upstream's endpointslicecache.go does (with nil): not listed here.
  mutation('ports.0.port', fc.constantFrom(65536, -1, 1.5, '8080', true), true),
  mutation('ports.0.port', hostilePort),
  mutation('ports.0.protocol', fc.constantFrom('tcp', 'ICMP', '', 6), true),
  mutation('ports.0.name', fc.oneof(hostileString, wrongType)),
);

/** A plausible slice for a hostile Service, with hostile-range addresses, then mutated. */
const hostileSliceBase = fc
  .record({
    ns: fc.constantFrom('hostile', VALID_NS),
    svc: fc.integer({ min: 0, max: 40 }).map((i) => `bad-${i}`),
    n: fc.nat(5),
    ips: fc.array(hostileIP, { minLength: 1, maxLength: 4 }),
    port: fc.integer({ min: 1, max: 65535 }),
  })
  .map(
    ({ ns, svc, n, ips, port }) =>
      makeSlice(ns, svc, `bad-${n}`, (s) => {
        s.endpoints = ips.map((ip) => endpoint(ip, { nodeName: TEST_NODE_NAME, ready: true }));
        s.ports = [{ name: 'a', port: port as number, protocol: 'TCP' }];
      }) as unknown as Json,
  );

export const hostileSlice: fc.Arbitrary<Hostile> = fc
  .tuple(hostileSliceBase, fc.array(sliceMutations, { minLength: 1, maxLength: 4 }))
  .map(([base, muts]) => applyMutations('endpointslice', base, muts));

/**
 * A garbage slice for a VALID Service: every address unusable (or the
 * endpoints not even a list), so the Service must be served exactly as before.
 */
export const garbageSliceForValid: fc.Arbitrary<Hostile> = fc
  .record({
    svc: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'),
    n: fc.nat(3),
    addresses: fc.array(fc.constantFrom(...INVALID_IPS), { minLength: 1, maxLength: 3 }),
    endpoints: fc.oneof(fc.constant(null), wrongType),
    addressType: fc.constantFrom('IPv4', 'IPv6'),
    port: fc.oneof(fc.constant(8080), hostilePort),
    useAddresses: fc.boolean(),
  })
  .map(({ svc, n, addresses, endpoints, addressType, port, useAddresses }) => {
    const slice = makeSlice(VALID_NS, svc, `garbage-${n}`, (s) => {
      s.addressType = addressType as 'IPv4';
      s.ports = [{ name: 'http', port: port as number, protocol: 'TCP' }];
    }) as unknown as Json;
    slice['endpoints'] = useAddresses
      ? [{ addresses, conditions: { ready: true }, nodeName: TEST_NODE_NAME }]
      : Array.isArray(endpoints)
        ? (endpoints as unknown[]).map(() => ({ addresses: [addresses[0]] }))
        : endpoints;
    return { kind: 'endpointslice' as const, obj: slice, mustReport: useAddresses, mutations: ['garbage slice'] };
  });

const nodeMutations: fc.Arbitrary<Mutation> = fc.oneof(
  mutation('metadata', wrongType),
  mutation('metadata.labels', fc.oneof(wrongType, fc.dictionary(hostileString, anyHostile, { maxKeys: 3 }))),
  mutation(
    'status.addresses',
    fc.oneof(wrongType, fc.array(fc.record({ type: anyHostile, address: hostileIP }), { maxLength: 3 })),
  ),
  mutation('status.addresses.0.address', fc.constantFrom(...INVALID_IPS.filter((s) => s !== '')), true),
  mutation('spec.podCIDRs', fc.oneof(wrongType, fc.array(fc.oneof(hostileIP, hostileString), { maxLength: 3 }))),
  mutation('spec', wrongType),
);

/** Other Nodes (any garbage; the proxy reads only its own). */
export const hostileOtherNode: fc.Arbitrary<Hostile> = fc
  .tuple(fc.oneof(fc.constant(OTHER_NODE), hostileString), fc.array(nodeMutations, { minLength: 1, maxLength: 3 }))
  .map(([name, muts]) => ({ ...applyMutations('node', makeNode(name) as unknown as Json, muts), mustReport: false }));

/** This proxy's own Node with hostile fields (a property of its own: it may change what the node is). */
export const hostileOwnNode: fc.Arbitrary<Hostile> = fc
  .array(
    nodeMutations.filter((m) => m.path !== 'metadata'),
    { minLength: 1, maxLength: 3 },
  )
  .map((muts) => applyMutations('node', validNode() as unknown as Json, muts));

function applyMutations(kind: Hostile['kind'], base: Json, muts: readonly Mutation[]): Hostile {
  // A copy of each value: constants (the same `{}` for every object) must never be written into or nested in themselves.
  for (const m of muts) setPath(base, m.path, structuredClone(m.value));
  // As from the wire: JSON (undefined fields gone), and a fresh copy per object.
  const obj = JSON.parse(JSON.stringify(base)) as Json;
  return {
    kind,
    obj,
    // An invalid value counts only if a later mutation did not overwrite it (or its parent).
    mustReport:
      muts.some((m) => m.invalid && sameJson(getPath(obj, m.path), m.value) && reached(obj, m.path)) &&
      stillNamed(obj, kind),
    mutations: muts.map((m) => `${m.path}=${preview(m.value)}`),
  };
}

/**
 * A mutation marked invalid must be reported only when the intake gets that
 * far: the object still has a usable name, a spec and (for a Service) the
 * mutated port entry, and it is not a Service the proxy skips anyway.
 */
function stillNamed(o: Json, kind: Hostile['kind']): boolean {
  const md = o['metadata'] as Json | undefined;
  if (!md || typeof md['name'] !== 'string' || typeof md['namespace'] !== 'string') return false;
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(md['name']) || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(md['namespace']))
    return false;
  if (md['name'].length > 63 || md['namespace'].length > 63) return false;
  if (kind === 'service') {
    const spec = o['spec'] as Json | undefined;
    if (!spec || typeof spec !== 'object' || Array.isArray(spec)) return false;
    if (spec['type'] === 'ExternalName' || !Array.isArray(spec['ports'])) return false;
    if (typeof spec['clusterIP'] !== 'string' || spec['clusterIP'] === '' || spec['clusterIP'] === 'None') return false;
    const labels = md['labels'];
    if (labels && typeof labels === 'object' && 'service.kubernetes.io/service-proxy-name' in labels) return false;
  }
  if (kind === 'endpointslice') {
    const labels = md['labels'] as Json | undefined;
    if (!labels || typeof labels[LABEL_SERVICE_NAME] !== 'string') return false;
    if (o['addressType'] !== 'IPv4' && o['addressType'] !== 'IPv6') return false;
    if (!Array.isArray(o['endpoints']) || !Array.isArray(o['ports'])) return false;
  }
  return true;
}

/** An endpoint port without a name or port is passed over silently (upstream: nil), so its other fields are never read. */
function reached(o: Json, path: string): boolean {
  if (path.startsWith('ports.0.')) {
    const port = getPath(o, 'ports.0.port');
    return typeof getPath(o, 'ports.0.name') === 'string' && port !== undefined && port !== null;
  }
  // spec.clusterIP is read only when spec.clusterIPs is empty (upstream reads ClusterIPs).
  if (path === 'spec.clusterIP') {
    const ips = getPath(o, 'spec.clusterIPs');
    return !Array.isArray(ips) || ips.length === 0;
  }
  return true;
}

function getPath(root: unknown, path: string): unknown {
  let o = root;
  for (const p of path.split('.')) {
    if (o === null || typeof o !== 'object') return undefined;
    o = (o as Record<string, unknown>)[p];
  }
  return o;
}

function sameJson(a: unknown, b: unknown): boolean {
  return a !== undefined && JSON.stringify(a) === JSON.stringify(b);
}

function preview(v: unknown): string {
  const s = JSON.stringify(v) ?? 'undefined';
  return s.length > 40 ? `${s.slice(0, 37)}...(${s.length})` : s;
}

export const hostileAny: fc.Arbitrary<Hostile> = fc.oneof(
  { arbitrary: hostileService, weight: 4 },
  { arbitrary: hostileSlice, weight: 3 },
  { arbitrary: garbageSliceForValid, weight: 2 },
  { arbitrary: hostileOtherNode, weight: 1 },
);

/** A short description of a hostile object for failure messages. */
export function describeHostile(h: Hostile): string {
  return `${h.kind} [${h.mutations.join(', ')}]`;
}

export { NODE_IP, NODE_IP6 };
export type { Json };
