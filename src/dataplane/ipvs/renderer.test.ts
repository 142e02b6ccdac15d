// IpvsRenderer behaviours beyond the packet-flow table: partial renders touch
// only what changed, shared members stay while any owner needs them, options
// and bad input.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../core/types.js';
import { IpvsRenderer } from './renderer.js';

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

test('a partial render re-renders only the changed Service and touches only its virtual server and members', () => {
  const r = new IpvsRenderer();
  const services = Array.from({ length: 50 }, (_, i) => svc(`s${i}`, { ip: `172.30.0.${i + 1}` }));
  const slices = services.map((_, i) => slice(`s${i}`, [`10.180.0.${i + 1}`]));
  const full = r.render({ state: state(services, slices), config });
  assert.equal(full.partial, false);
  assert.equal(full.touched, null);
  assert.equal(full.virtualServers.size, 50);
  assert.equal(full.ipsets.get('KUBE-CLUSTER-IP')!.size, 50);
  assert.equal(full.ipsets.get('KUBE-IPVS-IPS')!.size, 50);

  slices[7] = slice('s7', ['10.180.0.8', '10.180.9.9']);
  const p = r.render({ state: state(services, slices, { full: false, changed: ['ns/s7'] }), config });
  assert.equal(p.partial, true);
  assert.deepEqual([...p.touched!.virtualServers], ['TCP/172.30.0.8:80']);
  assert.deepEqual(
    p.virtualServers.get('TCP/172.30.0.8:80')!.realServers.map((x) => x.address),
    ['10.180.0.8', '10.180.9.9'],
  );
  // The new local endpoint joins the hairpin set; nothing else moved.
  assert.deepEqual([...p.touched!.entries.keys()], ['KUBE-LOOP-BACK']);
  assert.deepEqual([...p.touched!.entries.get('KUBE-LOOP-BACK')!], ['10.180.9.9,tcp:80,10.180.9.9']);
  assert.equal(p.touched!.addresses.size, 0);
});

test('deleting one port of a Service keeps the shared ClusterIP bound; deleting the Service unbinds it', () => {
  const r = new IpvsRenderer();
  const two = svc('web', {
    ip: '172.30.0.9',
    ports: [
      { name: 'a', port: 80 },
      { name: 'b', port: 443 },
    ],
  });
  r.render({ state: state([two], []), config });
  const one = svc('web', { ip: '172.30.0.9', ports: [{ name: 'a', port: 80 }] });
  const p1 = r.render({ state: state([one], [], { full: false, changed: ['ns/web'] }), config });
  assert.deepEqual([...p1.touched!.virtualServers], ['TCP/172.30.0.9:443'], 'port 80 re-rendered unchanged');
  assert.equal(p1.virtualServers.has('TCP/172.30.0.9:443'), false);
  assert.equal(p1.touched!.addresses.size, 0, 'still bound for port 80');
  assert.deepEqual([...p1.bindAddresses], ['172.30.0.9']);
  const p2 = r.render({ state: state([], [], { full: false, changed: ['ns/web'] }), config });
  assert.deepEqual([...p2.touched!.addresses], ['172.30.0.9']);
  assert.equal(p2.bindAddresses.size, 0);
  assert.equal(p2.ipsets.get('KUBE-IPVS-IPS')!.size, 0);
  assert.doesNotMatch(p2.iptables, /KUBE-CLUSTER-IP dst,dst ! -s/, 'empty sets get no set rules');
});

test('NodePorts get a virtual server per node address (not loopback); an address change renders everything', () => {
  const r = new IpvsRenderer();
  const np = svc('np', { ip: '172.30.0.5', type: 'NodePort', ports: [{ name: 'p', port: 80, nodePort: 30080 }] });
  const a = r.render({ state: state([np], []), config });
  assert.deepEqual([...a.virtualServers.keys()].sort(), [
    'TCP/172.30.0.5:80',
    'TCP/192.168.0.2:30080',
    'TCP/192.168.1.2:30080',
  ]);
  assert.deepEqual([...a.ipsets.get('KUBE-NODE-PORT-TCP')!], ['30080']);
  const b = r.render({
    state: state([np], [], { full: false, changed: [] }),
    config,
    nodeAddresses: ['192.168.0.2', '127.0.0.1'],
  });
  assert.equal(b.partial, false, 'node addresses changed: full render');
  assert.deepEqual([...b.virtualServers.keys()].sort(), ['TCP/172.30.0.5:80', 'TCP/192.168.0.2:30080']);
  const c = r.render({
    state: state([np], [], { full: false, changed: [] }),
    config: { ...config, nodePortAddresses: ['192.168.1.0/24'] },
    nodeAddresses: ['192.168.0.2', '192.168.1.2'],
  });
  assert.deepEqual([...c.virtualServers.keys()].sort(), ['TCP/172.30.0.5:80', 'TCP/192.168.1.2:30080']);
});

test('scheduler, persistence and SCTP NodePorts', () => {
  const r = new IpvsRenderer({ scheduler: 'mh', randomFully: false });
  const s = svc('sticky', {
    ip: '172.30.0.6',
    type: 'NodePort',
    ports: [{ name: 'p', port: 80, nodePort: 30090, protocol: 'SCTP' }],
    extra: { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } } },
  });
  const out = r.render({ state: state([s], []), config });
  const v = out.virtualServers.get('SCTP/172.30.0.6:80')!.vs;
  assert.equal(v.scheduler, 'mh');
  assert.equal(v.flags, 0x1 | 0x10, 'persistent, and mh hashes the source port');
  assert.equal(v.timeout, 600);
  assert.deepEqual([...out.ipsets.get('KUBE-NODE-PORT-SCTP-HASH')!].sort(), [
    '192.168.0.2,sctp:30090',
    '192.168.1.2,sctp:30090',
  ]);
  assert.match(
    out.iptables,
    /-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE\n/,
  );
});

test('source ranges: members per range; a node outside every range may not use the LB address itself', () => {
  const r = new IpvsRenderer();
  const lb = (name: string, ip: string, ranges: string[]) =>
    svc(name, {
      ip,
      type: 'LoadBalancer',
      lb: [ip === '172.30.0.7' ? '1.2.3.4' : '5.6.7.8'],
      extra: { loadBalancerSourceRanges: ranges },
    });
  const out = r.render({
    state: state(
      [lb('in', '172.30.0.7', ['192.168.0.0/24']), lb('out', '172.30.0.8', ['203.0.113.0/25', '10.1.1.1/32'])],
      [],
    ),
    config,
  });
  assert.deepEqual([...out.ipsets.get('KUBE-LOAD-BALANCER-SOURCE-CIDR')!].sort(), [
    '1.2.3.4,tcp:80,192.168.0.0/24',
    '5.6.7.8,tcp:80,10.1.1.1',
    '5.6.7.8,tcp:80,203.0.113.0/25',
  ]);
  assert.deepEqual([...out.ipsets.get('KUBE-LOAD-BALANCER-SOURCE-IP')!], ['1.2.3.4,tcp:80,1.2.3.4']);
  assert.match(
    out.iptables,
    /-A KUBE-IPVS-OUT-FILTER -s 5\.6\.7\.8 -m ipvs --vaddr 5\.6\.7\.8 --vproto tcp --vport 80 -j DROP/,
  );
  assert.doesNotMatch(out.iptables, /--vaddr 1\.2\.3\.4/);
});

test('a service port it cannot render is skipped and reported; the others are rendered', () => {
  const r = new IpvsRenderer();
  const st = state([svc('ok', { ip: '172.30.0.1' })], []);
  const bad = { ...st.services.get('ns/ok:p')!, key: 'ns/bad:p', serviceKey: 'ns/bad', clusterIP: 'fd00::1' };
  const services = new Map(st.services);
  services.set('ns/bad:p', bad);
  const out = r.render({ state: { ...st, services }, config });
  assert.deepEqual(out.skipped, [{ key: 'ns/bad:p', reason: 'bad clusterIP fd00::1' }]);
  assert.equal(out.virtualServers.size, 1);
});

test("an endpoint change leaves the rules' text as it was (no restore), whichever Service changed", () => {
  const r = new IpvsRenderer();
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
  const full = r.render({ state: state(services, slices), config });
  assert.match(full.iptables, /KUBE-IPVS-OUT-FILTER -s 198\.51\.100\.1 /);
  slices[0] = slice('s0', ['10.180.0.1', '10.180.9.9']);
  const p = r.render({ state: state(services, slices, { full: false, changed: ['ns/s0'] }), config });
  assert.equal(p.partial, true);
  assert.equal(p.iptables, full.iptables);
});
