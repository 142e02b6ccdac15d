// IpvsPlanner (the IPVS driver on the one reconciler), beyond the
// packet-flow table: partial syncs touch only what changed, shared members
// stay while any owner needs them, options and bad input. What a sync wants
// is read from the planner (wanted); what it changes, from the reconciler's
// ops; each plan is also applied to a Fake.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { ObjectOp } from '../../core/objects.js';
import type { DataplaneConfig, SyncState } from '../../core/types.js';
import { IpvsFakeLoader } from '../../../test/support/ipvsload.js';
import {
  Fake,
  isSetKind,
  virtualServerKey,
  type IpsetName,
  type IpvsKind,
  type IpvsOptions,
  type IpvsValue,
  type VirtualServer,
} from '../../dataplane/ipvs/index.js';

const config: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8'] },
  nodePortAddresses: null,
  localhostNodePorts: true,
  localIPs: ['127.0.0.1', '192.168.0.2', '192.168.1.2'],
};

interface SvcOpts {
  ip: string;
  ports?: Array<{ name: string; port: number; nodePort?: number; protocol?: string }>;
  type?: string;
  extra?: Record<string, unknown>;
  lb?: string[];
}
function svc(name: string, o: SvcOpts) {
  return {
    metadata: { namespace: 'ns', name },
    spec: {
      type: o.type ?? 'ClusterIP',
      clusterIP: o.ip,
      ports: (o.ports ?? [{ name: 'p', port: 80 }]).map((p) => ({ protocol: 'TCP', targetPort: p.port, ...p })),
      ...o.extra,
    },
    ...(o.lb ? { status: { loadBalancer: { ingress: o.lb.map((ip) => ({ ip })) } } } : {}),
  };
}
function slice(name: string, ips: string[], ports = [{ name: 'p', port: 80 }], node = 'test-node') {
  return {
    metadata: { namespace: 'ns', name: `${name}-1`, labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: node })),
    ports: ports.map((p) => ({ protocol: 'TCP', ...p })),
  };
}
/** A planner, loading a Fake as the dataplane loads the kernel. */
function harness(options?: IpvsOptions) {
  const loader = new IpvsFakeLoader(new Fake({ nodeAddresses: config.localIPs }), config, options);
  const wanted = (kind: IpvsKind) => [...loader.planner.wanted(kind)];
  return {
    loader,
    sync: (st: SyncState, nodeAddresses?: readonly string[]) => loader.sync(st, nodeAddresses),
    /** The wanted virtual servers, by key. */
    vss: () => new Map(wanted('vs').map((o) => [o.key, (o.value as { vs: VirtualServer }).vs])),
    /** The wanted real servers' addresses of one virtual server. */
    realServers: (vsKey: string) =>
      wanted('rs')
        .filter((o) => o.key.startsWith(`${vsKey}/`))
        .map((o) => (o.value as { rs: { address: string } }).rs.address),
    members: (set: IpsetName) => wanted(set).map((o) => o.key),
    binds: () => wanted('bind').map((o) => o.key),
    rules: () => loader.planner.rules(),
  };
}

type Op = ObjectOp<IpvsKind, IpvsValue>;
/** The virtual servers an op list changes (itself or one of its real servers). */
const touchedVS = (ops: readonly Op[]) => [
  ...new Set(
    ops.flatMap((op) => {
      const v = op.op === 'put' ? op.value : op.before;
      return v?.t === 'vs' || v?.t === 'rs' ? [virtualServerKey(v.vs)] : [];
    }),
  ),
];
/** Set name -> members an op list adds or removes. */
function touchedEntries(ops: readonly Op[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const op of ops) if (isSetKind(op.kind)) out.set(op.kind, [...(out.get(op.kind) ?? []), op.key]);
  return out;
}
const touchedAddresses = (ops: readonly Op[]) => ops.filter((op) => op.kind === 'bind').map((op) => op.key);

function state(services: unknown[], slices: unknown[], opts: { full?: boolean; changed?: string[] } = {}): SyncState {
  return syncStateFromObjects({
    services: services as never,
    slices: slices as never,
    family: 'IPv4',
    nodeName: 'test-node',
    nodeIPs: { IPv4: '192.168.0.2' },
    fullSync: opts.full ?? true,
    ...(opts.changed ? { changedServices: opts.changed } : {}),
  });
}

test('a partial sync re-renders only the changed Service and touches only its virtual server and members', () => {
  const h = harness();
  const services = Array.from({ length: 50 }, (_, i) => svc(`s${i}`, { ip: `172.30.0.${i + 1}` }));
  const slices = services.map((_, i) => slice(`s${i}`, [`10.180.0.${i + 1}`]));
  const full = h.sync(state(services, slices));
  assert.equal(full.full, true);
  assert.notEqual(full.rules, null, 'a full sync writes the rules too');
  assert.equal(h.loader.planner.count('vs'), 50);
  assert.equal(h.members('KUBE-CLUSTER-IP').length, 50);
  assert.equal(h.members('KUBE-IPVS-IPS').length, 50);

  slices[7] = slice('s7', ['10.180.0.8', '10.180.9.9']);
  const p = h.sync(state(services, slices, { full: false, changed: ['ns/s7'] }));
  assert.equal(p.full, false);
  assert.deepEqual(touchedVS(p.ops), ['TCP/172.30.0.8:80']);
  assert.deepEqual(h.realServers('TCP/172.30.0.8:80').sort(), ['10.180.0.8', '10.180.9.9']);
  // The new local endpoint joins the hairpin set; nothing else moved.
  assert.deepEqual([...touchedEntries(p.ops).keys()], ['KUBE-LOOP-BACK']);
  assert.deepEqual(touchedEntries(p.ops).get('KUBE-LOOP-BACK'), ['10.180.9.9,tcp:80,10.180.9.9']);
  assert.equal(touchedAddresses(p.ops).length, 0);
});

test('deleting one port of a Service keeps the shared ClusterIP bound; deleting the Service unbinds it', () => {
  const h = harness();
  const two = svc('web', {
    ip: '172.30.0.9',
    ports: [
      { name: 'a', port: 80 },
      { name: 'b', port: 443 },
    ],
  });
  h.sync(state([two], []));
  const one = svc('web', { ip: '172.30.0.9', ports: [{ name: 'a', port: 80 }] });
  const p1 = h.sync(state([one], [], { full: false, changed: ['ns/web'] }));
  assert.deepEqual(touchedVS(p1.ops), ['TCP/172.30.0.9:443'], 'port 80 re-rendered unchanged');
  assert.equal(h.vss().has('TCP/172.30.0.9:443'), false);
  assert.equal(touchedAddresses(p1.ops).length, 0, 'still bound for port 80');
  assert.deepEqual(h.binds(), ['172.30.0.9']);
  const p2 = h.sync(state([], [], { full: false, changed: ['ns/web'] }));
  assert.deepEqual(touchedAddresses(p2.ops), ['172.30.0.9']);
  assert.equal(h.binds().length, 0);
  assert.equal(h.members('KUBE-IPVS-IPS').length, 0);
  assert.doesNotMatch(h.rules(), /KUBE-CLUSTER-IP dst,dst ! -s/, 'empty sets get no set rules');
});

test('NodePorts get a virtual server per node address (not loopback); an address change renders everything', () => {
  const h = harness();
  const np = svc('np', { ip: '172.30.0.5', type: 'NodePort', ports: [{ name: 'p', port: 80, nodePort: 30080 }] });
  h.sync(state([np], []));
  assert.deepEqual([...h.vss().keys()].sort(), ['TCP/172.30.0.5:80', 'TCP/192.168.0.2:30080', 'TCP/192.168.1.2:30080']);
  assert.deepEqual(h.members('KUBE-NODE-PORT-TCP'), ['30080']);
  const b = h.sync(state([np], [], { full: false, changed: [] }), ['192.168.0.2', '127.0.0.1']);
  assert.equal(b.full, true, 'node addresses changed: full render');
  assert.deepEqual([...h.vss().keys()].sort(), ['TCP/172.30.0.5:80', 'TCP/192.168.0.2:30080']);
  // Another nodePortAddresses: a driver of that configuration over the same kernel (its first sync is full).
  const cl = new IpvsFakeLoader(h.loader.fake, { ...config, nodePortAddresses: ['192.168.1.0/24'] });
  cl.sync(state([np], [], { full: false, changed: [] }), ['192.168.0.2', '192.168.1.2']);
  assert.deepEqual([...cl.planner.wanted('vs')].map((o) => o.key).sort(), [
    'TCP/172.30.0.5:80',
    'TCP/192.168.1.2:30080',
  ]);
});

test('scheduler, persistence and SCTP NodePorts', () => {
  const h = harness({ scheduler: 'mh', randomFully: false });
  const s = svc('sticky', {
    ip: '172.30.0.6',
    type: 'NodePort',
    ports: [{ name: 'p', port: 80, nodePort: 30090, protocol: 'SCTP' }],
    extra: { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } } },
  });
  h.sync(state([s], []));
  const v = h.vss().get('SCTP/172.30.0.6:80')!;
  assert.equal(v.scheduler, 'mh');
  assert.equal(v.flags, 0x1 | 0x10, 'persistent, and mh hashes the source port');
  assert.equal(v.timeout, 600);
  assert.deepEqual(h.members('KUBE-NODE-PORT-SCTP-HASH').sort(), ['192.168.0.2,sctp:30090', '192.168.1.2,sctp:30090']);
  assert.match(
    h.rules(),
    /-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE\n/,
  );
});

test('source ranges: members per range; a node outside every range may not use the LB address itself', () => {
  const h = harness();
  const lb = (name: string, ip: string, ranges: string[]) =>
    svc(name, {
      ip,
      type: 'LoadBalancer',
      lb: [ip === '172.30.0.7' ? '1.2.3.4' : '5.6.7.8'],
      extra: { loadBalancerSourceRanges: ranges },
    });
  h.sync(
    state([lb('in', '172.30.0.7', ['192.168.0.0/24']), lb('out', '172.30.0.8', ['203.0.113.0/25', '10.1.1.1/32'])], []),
  );
  assert.deepEqual(h.members('KUBE-LOAD-BALANCER-SOURCE-CIDR').sort(), [
    '1.2.3.4,tcp:80,192.168.0.0/24',
    '5.6.7.8,tcp:80,10.1.1.1',
    '5.6.7.8,tcp:80,203.0.113.0/25',
  ]);
  assert.deepEqual(h.members('KUBE-LOAD-BALANCER-SOURCE-IP'), ['1.2.3.4,tcp:80,1.2.3.4']);
  assert.match(
    h.rules(),
    /-A KUBE-IPVS-OUT-FILTER -s 5\.6\.7\.8 -m ipvs --vaddr 5\.6\.7\.8 --vproto tcp --vport 80 -j DROP/,
  );
  assert.doesNotMatch(h.rules(), /--vaddr 1\.2\.3\.4/);
});

test('a service port it cannot render is skipped and reported; the others are rendered', () => {
  const h = harness();
  const st = state([svc('ok', { ip: '172.30.0.1' })], []);
  const bad = { ...st.services.get('ns/ok:p')!, key: 'ns/bad:p', serviceKey: 'ns/bad', clusterIP: 'fd00::1' };
  const services = new Map(st.services);
  services.set('ns/bad:p', bad);
  const out = h.sync({ ...st, services });
  assert.deepEqual(out.skipped, [{ key: 'ns/bad:p', reason: 'bad clusterIP fd00::1' }]);
  assert.equal(h.loader.planner.count('vs'), 1);
});

test("an endpoint change leaves the rules' text as it was (no restore), whichever Service changed", () => {
  const h = harness();
  // LoadBalancers with source ranges: each adds KUBE-IPVS-OUT-FILTER rules, in a fixed order.
  const lb = (i: number) =>
    svc(`s${i}`, {
      ip: `172.30.0.${i + 1}`,
      type: 'LoadBalancer',
      ports: [{ name: 'p', port: 80, nodePort: 30000 + i }],
      lb: [`198.51.100.${i + 1}`],
      extra: { loadBalancerSourceRanges: ['203.0.113.0/25'] },
    });
  const services = [lb(0), lb(1), lb(2)];
  const slices = services.map((_, i) => slice(`s${i}`, [`10.180.0.${i + 1}`]));
  const full = h.sync(state(services, slices));
  assert.match(full.rules!, /KUBE-IPVS-OUT-FILTER -s 198\.51\.100\.1 /);
  slices[0] = slice('s0', ['10.180.0.1', '10.180.9.9']);
  const p = h.sync(state(services, slices, { full: false, changed: ['ns/s0'] }));
  assert.equal(p.full, false);
  assert.equal(p.rules, null, 'no rule came or went: no restore');
  assert.equal(h.rules(), full.rules);
});
