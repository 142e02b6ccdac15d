// The migration check's analysis: Services (through the real intake, as
// SyncStates) and node facts in, findings out, one behaviour per test.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { EndpointSlice, Node, Service } from '../core/api.js';
import { defaultV1Alpha1, v1alpha1ToResolved, type ResolvedConfig } from '../core/config/index.js';
import { syncStateFromObjects } from '../core/snapshot.js';
import type { ProxyMode } from '../core/types.js';
import { MODE_TRAITS, migrationFindings, type Finding, type MigrateTarget, type NodeFacts } from './migrate.js';

const NODE_IP = '192.168.0.10';
const OTHER_IP = '10.1.0.10';

function svc(name: string, spec: Record<string, unknown>, annotations?: Record<string, string>): Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: 'ns', ...(annotations ? { annotations } : {}) },
    spec: {
      type: 'ClusterIP',
      ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }],
      ...spec,
    },
  } as unknown as Service;
}

function slice(service: string, nodeName: string, port = 8080, protocol = 'TCP'): EndpointSlice {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${service}-1`, namespace: 'ns', labels: { 'kubernetes.io/service-name': service } },
    addressType: 'IPv4',
    endpoints: [{ addresses: ['10.244.1.5'], conditions: { ready: true }, nodeName }],
    ports: [{ name: 'http', port, protocol }],
  } as unknown as EndpointSlice;
}

const node: Node = {
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name: 'node1' },
  status: { addresses: [{ type: 'InternalIP', address: NODE_IP }] },
} as unknown as Node;

const FACTS: NodeFacts = {
  addresses: [NODE_IP, OTHER_IP, '127.0.0.1'],
  ipvsAddresses: null,
  virtualServers: null,
  listeners: [],
  arpIgnore: 0,
  arpAnnounce: 0,
};

function config(patch: (c: ResolvedConfig) => void = () => {}): ResolvedConfig {
  const c = v1alpha1ToResolved(defaultV1Alpha1());
  patch(c);
  return c;
}

function findings(
  from: ProxyMode,
  to: MigrateTarget,
  services: Service[],
  o: { slices?: EndpointSlice[]; facts?: Partial<NodeFacts>; config?: ResolvedConfig; ebpfAlgorithm?: string } = {},
): Finding[] {
  const state = syncStateFromObjects({
    services,
    slices: o.slices ?? [],
    family: 'IPv4',
    nodeName: 'node1',
    node,
    nodeIPs: { IPv4: NODE_IP },
  });
  const annotations = new Map<string, string>();
  for (const s of services) {
    const a = (s.metadata as { annotations?: Record<string, string> }).annotations?.['kube-proxy-ts/lb-algorithm'];
    if (a !== undefined) annotations.set(`ns/${s.metadata.name}`, a);
  }
  return migrationFindings({
    from,
    to,
    states: [state],
    annotations,
    config: o.config ?? config(),
    ebpfAlgorithm: o.ebpfAlgorithm ?? 'random',
    node: { ...FACTS, ...o.facts },
  });
}

const kinds = (fs: readonly Finding[], service?: string | null) =>
  fs.filter((f) => service === undefined || f.service === service).map((f) => f.kind);

describe('migrate findings', () => {
  it('no move, no findings', () => {
    assert.deepEqual(findings('nftables', 'nftables', [svc('a', { clusterIP: '10.96.0.1' })]), []);
  });

  it('scheduler: rr names the round-robin annotation; wrr has no equivalent; an annotated Service is fine', () => {
    const s = [
      svc('plain', { clusterIP: '10.96.0.1' }),
      svc('kept', { clusterIP: '10.96.0.2' }, { 'kube-proxy-ts/lb-algorithm': 'round-robin' }),
    ];
    const rr = findings('ipvs', 'nftables', s).filter((f) => f.kind === 'scheduler');
    assert.deepEqual(
      rr.map((f) => f.service),
      ['ns/plain'],
    );
    assert.match(rr[0]!.action, /kube-proxy-ts\/lb-algorithm=round-robin/);
    assert.equal(rr[0]!.changes, true);
    const wrr = findings('ipvs', 'nftables', s, { config: config((c) => (c.ipvs.scheduler = 'wrr')) }).find(
      (f) => f.kind === 'scheduler',
    )!;
    assert.match(wrr.action, /no equivalent of wrr/);
    const sh = findings('ipvs', 'nftables', s, { config: config((c) => (c.ipvs.scheduler = 'sh')) }).find(
      (f) => f.kind === 'scheduler',
    )!;
    assert.match(sh.action, /lb-algorithm=source-hash/);
  });

  it("scheduler: the live table's scheduler wins over the configuration; mh into ebpf with maglev needs nothing", () => {
    const s = [svc('a', { clusterIP: '10.96.0.1' })];
    const live = { virtualServers: [{ protocol: 'TCP' as const, address: '10.96.0.1', port: 80, scheduler: 'mh' }] };
    const f = findings('ipvs', 'nftables', s, { facts: live }).find((x) => x.kind === 'scheduler')!;
    assert.match(f.change, /IPVS scheduler mh/);
    assert.match(f.action, /lb-algorithm=maglev/);
    assert.deepEqual(
      kinds(findings('ipvs', 'ebpf', s, { facts: live, ebpfAlgorithm: 'maglev' })).includes('scheduler'),
      false,
    );
    // iptables mode takes no annotation.
    const ipt = findings('ipvs', 'iptables', s).find((x) => x.kind === 'scheduler')!;
    assert.match(ipt.action, /iptables mode has no equivalent of rr/);
  });

  it('kube-ipvs0: every Service address stops being local; listeners on one, or on a wildcard at a Service port', () => {
    const s = [
      svc('web', { clusterIP: '10.96.0.10', externalIPs: ['203.0.113.5'] }),
      svc('dns', { clusterIP: '10.96.0.53', ports: [{ name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 }] }),
    ];
    const fs = findings('ipvs', 'nftables', s, {
      facts: {
        listeners: [
          { protocol: 'TCP', address: '10.96.0.10', port: 9000 },
          { protocol: 'UDP', address: '0.0.0.0', port: 53 },
          { protocol: 'TCP', address: '0.0.0.0', port: 53 },
          { protocol: 'TCP', address: NODE_IP, port: 80 },
        ],
        ipvsAddresses: ['10.96.0.10', '10.96.0.53', '203.0.113.5'],
      },
    });
    const web = fs.filter((f) => f.service === 'ns/web');
    assert.match(
      web.find((f) => f.kind === 'kube-ipvs0')!.change,
      /^10\.96\.0\.10, 203\.0\.113\.5 stop being an address/,
    );
    assert.deepEqual(
      web.filter((f) => f.kind === 'listener').map((f) => /listens on (\S+)/.exec(f.change)![1]),
      ['10.96.0.10:9000/TCP,'],
    );
    const dns = fs.filter((f) => f.service === 'ns/dns' && f.kind === 'listener');
    assert.equal(dns.length, 1, 'the UDP wildcard at 53; not the TCP one, not a node address');
    assert.match(dns[0]!.change, /0\.0\.0\.0:53\/UDP, the port of ns\/dns:dns/);
    assert.equal(dns[0]!.changes, false, 'IPVS takes the port before the process, today as after');
    assert.equal(web.find((f) => f.kind === 'listener')!.changes, true);
    const dummy = fs.find((f) => f.kind === 'kube-ipvs0' && f.service === null)!;
    assert.equal(dummy.changes, false);
    assert.match(dummy.change, /3 address/);
  });

  it('strict ARP: a change when ipvs.strictARP is set, a note when the sysctls are set by someone else', () => {
    const s = [svc('a', { clusterIP: '10.96.0.1' })];
    const on = findings('ipvs', 'nftables', s, { config: config((c) => (c.ipvs.strictARP = true)) });
    assert.equal(on.find((f) => f.kind === 'strict-arp')!.changes, true);
    const other = findings('ipvs', 'nftables', s, { facts: { arpIgnore: 1, arpAnnounce: 2 } });
    assert.equal(other.find((f) => f.kind === 'strict-arp')!.changes, false);
    assert.deepEqual(kinds(findings('ipvs', 'nftables', s)).includes('strict-arp'), false);
  });

  it('externalTrafficPolicy Local: pod traffic always; dropped external traffic when this node has no local endpoint', () => {
    const lb = (name: string) =>
      svc(name, {
        clusterIP: '10.96.0.20',
        type: 'NodePort',
        externalTrafficPolicy: 'Local',
        ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, nodePort: 30080 }],
      });
    const here = findings('ipvs', 'nftables', [lb('here')], { slices: [slice('here', 'node1')] });
    assert.equal(here.filter((f) => f.kind === 'external-traffic-policy').length, 1);
    const away = findings('ipvs', 'nftables', [lb('away')], { slices: [slice('away', 'node2')] });
    const etp = away.filter((f) => f.kind === 'external-traffic-policy');
    assert.equal(etp.length, 2);
    assert.match(etp[1]!.change, /no local endpoint.*drops it/);
    // iptables to nftables: the same traffic policy behaviour.
    assert.deepEqual(
      kinds(findings('iptables', 'nftables', [lb('away')], { slices: [slice('away', 'node2')] })).filter((k) =>
        k.endsWith('traffic-policy'),
      ),
      [],
    );
  });

  it('internalTrafficPolicy Local without a local endpoint: refused becomes dropped', () => {
    const s = svc('itp', { clusterIP: '10.96.0.30', internalTrafficPolicy: 'Local' });
    const away = findings('ipvs', 'nftables', [s], { slices: [slice('itp', 'node2')] });
    assert.match(away.find((f) => f.kind === 'internal-traffic-policy')!.change, /refused in IPVS mode and dropped/);
    const here = findings('ipvs', 'nftables', [s], { slices: [slice('itp', 'node1')] });
    assert.equal(kinds(here).includes('internal-traffic-policy'), false);
  });

  it('NodePorts: every address (and 127.0.0.1 in iptables mode) before, the primary address in nftables mode', () => {
    const np = svc('np', {
      clusterIP: '10.96.0.40',
      type: 'NodePort',
      ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, nodePort: 30400 }],
    });
    const fromIpt = findings('iptables', 'nftables', [np]);
    assert.deepEqual(kinds(fromIpt), ['nodeport-addresses']);
    assert.match(fromIpt[0]!.change, /30400\/TCP on 10\.1\.0\.10, 127\.0\.0\.1$/);
    const fromIpvs = findings('ipvs', 'nftables', [np]).find((f) => f.kind === 'nodeport-addresses')!;
    assert.match(fromIpvs.change, /30400\/TCP on 10\.1\.0\.10$/, 'IPVS serves no loopback NodePorts');
    // nodePortAddresses set explicitly: the same addresses in both modes.
    const pinned = config((c) => (c.nodePortAddresses = ['192.168.0.0/24']));
    assert.deepEqual(findings('iptables', 'nftables', [np], { config: pinned }), []);
    // The other way round: more addresses.
    const back = findings('nftables', 'iptables', [np]);
    assert.match(back[0]!.change, /newly served .*10\.1\.0\.10, 127\.0\.0\.1/);
  });

  it('to ebpf: SCTP ports are not served; a health-check node port loses its accept rule (from iptables, not nftables)', () => {
    const s = [
      svc('sctp', { clusterIP: '10.96.0.50', ports: [{ name: 's', port: 9, protocol: 'SCTP', targetPort: 9 }] }),
      svc('lb', {
        clusterIP: '10.96.0.51',
        type: 'LoadBalancer',
        externalTrafficPolicy: 'Local',
        healthCheckNodePort: 32000,
        ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, nodePort: 30500 }],
      }),
    ];
    const pinned = config((c) => (c.nodePortAddresses = ['primary']));
    const fs = findings('iptables', 'ebpf', s, { config: pinned });
    assert.deepEqual(kinds(fs, 'ns/sctp'), ['sctp']);
    assert.deepEqual(kinds(fs, 'ns/lb'), ['health-check-node-port']);
    assert.match(fs.find((f) => f.kind === 'health-check-node-port')!.change, /32000\/TCP/);
    assert.deepEqual(kinds(findings('nftables', 'ebpf', s, { config: pinned }), 'ns/lb'), []);
  });

  it('the endpoint choice of modes other than IPVS: userspace round-robin, ebpf maglev', () => {
    const s = [svc('a', { clusterIP: '10.96.0.1' })];
    const us = findings('userspace', 'nftables', s).find((f) => f.kind === 'scheduler')!;
    assert.match(us.change, /userspace mode's round-robin/);
    assert.match(us.action, /lb-algorithm=round-robin/);
    const eb = findings('ebpf', 'nftables', s, { ebpfAlgorithm: 'maglev' }).find((f) => f.kind === 'scheduler')!;
    assert.match(eb.action, /lb-algorithm=maglev/);
    assert.deepEqual(kinds(findings('ebpf', 'nftables', s)), [], 'random to random');
    assert.deepEqual(kinds(findings('iptables', 'nftables', s)), []);
  });

  it('every mode has its traits, and a move between two modes with the same traits finds nothing', () => {
    assert.deepEqual(Object.keys(MODE_TRAITS).sort(), ['ebpf', 'iptables', 'ipvs', 'nftables', 'userspace']);
    const np = svc('np', {
      clusterIP: '10.96.0.40',
      type: 'NodePort',
      ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, nodePort: 30400 }],
    });
    const pinned = config((c) => (c.nodePortAddresses = ['primary']));
    assert.deepEqual(findings('nftables', 'ebpf', [np], { config: pinned }), []);
  });
});
