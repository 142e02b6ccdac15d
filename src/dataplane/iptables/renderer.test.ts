// Targeted renderer behaviours not covered by the golden dumps.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { DataplaneConfig, ServicePort, SyncState } from '../../core/types.js';
import { Fake } from './fake.js';
import { localChainName, serviceChainName } from './names.js';
import { IptablesPlanner } from '../../platform/iptables/planner.js';
import { DEFAULT_IPTABLES_OPTIONS, renderRestore } from './renderer.js';
import type { RenderedServicePort } from './servicerules.js';
import { probability } from './restore.js';

/** One planner for the file, as one dataplane keeps one (its memo spans the renders). */
const planner = new IptablesPlanner();

const config: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8'] },
  nodePortAddresses: null,
  localhostNodePorts: true,
  localIPs: ['127.0.0.1', '192.168.0.2'],
};

function svcJSON(name: string, spec: Record<string, unknown>, lb?: string[]) {
  return {
    metadata: { namespace: 'ns1', name },
    spec: { clusterIP: '172.30.0.41', ports: [{ name: 'p80', port: 80, protocol: 'TCP', targetPort: 80 }], ...spec },
    ...(lb ? { status: { loadBalancer: { ingress: lb.map((ip) => ({ ip })) } } } : {}),
  };
}
function sliceJSON(name: string, eps: Array<{ ip: string; node?: string }>) {
  return {
    metadata: { namespace: 'ns1', name: `${name}-1`, labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    ports: [{ name: 'p80', port: 80, protocol: 'TCP' }],
    endpoints: eps.map((e) => ({
      addresses: [e.ip],
      conditions: { ready: true },
      ...(e.node ? { nodeName: e.node } : {}),
    })),
  };
}
const state = (services: unknown[], slices: unknown[]) =>
  syncStateFromObjects({ services, slices, family: 'IPv4', nodeIPs: { IPv4: '192.168.0.2' } });
const render = (s: SyncState, opts = DEFAULT_IPTABLES_OPTIONS) => {
  const r = planner.plan({ state: s, config, options: opts }, true, []);
  new Fake().restore(r.restoreText); // always valid restore input
  return r;
};

test('probabilities are upstream %0.10f of 1/(n-i)', () => {
  assert.deepEqual([3, 2, 7].map(probability), ['0.3333333333', '0.5000000000', '0.1428571429']);
  const eps = Array.from({ length: 3 }, (_, i) => ({ ip: `10.180.0.${i + 1}` }));
  const t = render(state([svcJSON('svc1', {})], [sliceJSON('svc1', eps)])).restoreText;
  assert.match(
    t,
    /--probability 0\.3333333333 -j KUBE-SEP-\w+\n.*--probability 0\.5000000000 -j KUBE-SEP-\w+\n-A KUBE-SVC-\w+ -m comment --comment "ns1\/svc1:p80 -> 10\.180\.0\.3:80" -j KUBE-SEP-/,
  );
});

test('large-cluster mode drops comments from SEP and probability rules only', () => {
  const eps = Array.from({ length: 3 }, (_, i) => ({ ip: `10.180.0.${i + 1}` }));
  const s = state(
    [svcJSON('svc1', { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } } })],
    [sliceJSON('svc1', eps)],
  );
  const r = render(s, { ...DEFAULT_IPTABLES_OPTIONS, largeClusterThreshold: 2 });
  assert.equal(r.largeClusterMode, true);
  assert.doesNotMatch(r.restoreText, /-> 10\.180/);
  assert.match(r.restoreText, /-A KUBE-SEP-\w+ -s 10\.180\.0\.1 -j KUBE-MARK-MASQ\n/);
  assert.match(r.restoreText, /-A KUBE-SVC-\w+ -m recent --name (KUBE-SEP-\w+) --rcheck --seconds 60 --reap -j \1\n/);
  assert.match(r.restoreText, /"ns1\/svc1:p80 cluster IP"/, 'service-level comments stay');
  assert.equal(render(s, { ...DEFAULT_IPTABLES_OPTIONS, largeClusterThreshold: 3 }).largeClusterMode, false);
});

test('eTP Local: KUBE-SVL chain of local endpoints, EXT jumps to it; iTP Local: clusterIP goes to KUBE-SVL', () => {
  const svl = localChainName('ns1/svc1:p80', 'TCP');
  const svc = serviceChainName('ns1/svc1:p80', 'TCP');
  const eps = [
    { ip: '10.180.0.1', node: 'test-node' },
    { ip: '10.180.0.2', node: 'other' },
  ];
  const etp = render(
    state(
      [
        svcJSON('svc1', {
          type: 'NodePort',
          externalTrafficPolicy: 'Local',
          ports: [{ name: 'p80', port: 80, protocol: 'TCP', nodePort: 3001 }],
        }),
      ],
      [sliceJSON('svc1', eps)],
    ),
  ).restoreText;
  assert.match(etp, new RegExp(`-A KUBE-EXT-\\w+ -j ${svl}\n`));
  assert.match(etp, new RegExp(`-A ${svl} -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-`));
  assert.match(etp, new RegExp(`-d 172.30.0.41 --dport 80 -j ${svc}\n`));
  const itp = render(
    state([svcJSON('svc1', { internalTrafficPolicy: 'Local' })], [sliceJSON('svc1', eps)]),
  ).restoreText;
  assert.match(itp, new RegExp(`"ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j ${svl}\n`));
  assert.ok(!itp.includes(`:${svc} `), 'no cluster chain when nothing uses it');
  const itpNone = render(
    state(
      [svcJSON('svc1', { internalTrafficPolicy: 'Local' })],
      [sliceJSON('svc1', [{ ip: '10.180.0.2', node: 'other' }])],
    ),
  );
  assert.match(
    itpNone.restoreText,
    /-A KUBE-SERVICES -m comment --comment "ns1\/svc1:p80 has no local endpoints" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j DROP\n/,
  );
  assert.deepEqual(itpNone.noLocalEndpoints, { internal: 1, external: 0 });
});

test('LB source ranges: node IP inside a range allows the LB IPs as sources', () => {
  const s = state(
    [
      svcJSON(
        'svc1',
        {
          type: 'LoadBalancer',
          loadBalancerSourceRanges: ['192.168.0.0/24'],
          ports: [{ name: 'p80', port: 80, protocol: 'TCP', nodePort: 3001 }],
        },
        ['1.2.3.4'],
      ),
    ],
    [sliceJSON('svc1', [{ ip: '10.180.0.1' }])],
  );
  const t = render(s).restoreText;
  assert.match(
    t,
    /-A KUBE-FW-(\w+) -m comment --comment "ns1\/svc1:p80 loadbalancer IP" -s 192\.168\.0\.0\/24 -j KUBE-EXT-\1\n-A KUBE-FW-\1 -m comment --comment "ns1\/svc1:p80 loadbalancer IP" -s 1\.2\.3\.4 -j KUBE-EXT-\1\n-A KUBE-FW-\1 -m comment --comment "other traffic/,
  );
  assert.match(
    t,
    /-A KUBE-PROXY-FIREWALL -m comment --comment "ns1\/svc1:p80 traffic not accepted by KUBE-FW-\w+" -m tcp -p tcp -d 1\.2\.3\.4 --dport 80 -j DROP\n/,
  );
});

test('UDP and SCTP use their own match modules', () => {
  const s = state(
    [
      svcJSON('svc1', {
        ports: [
          { name: 'd', port: 53, protocol: 'UDP' },
          { name: 's', port: 99, protocol: 'SCTP' },
        ],
      }),
    ],
    [],
  );
  const t = render(s).restoreText;
  assert.match(t, /"ns1\/svc1:d has no endpoints" -m udp -p udp -d 172\.30\.0\.41 --dport 53 -j REJECT/);
  assert.match(t, /"ns1\/svc1:s has no endpoints" -m sctp -p sctp -d 172\.30\.0\.41 --dport 99 -j REJECT/);
});

test('bad service ports are skipped and reported, never thrown', () => {
  const s = state([svcJSON('svc1', {})], [sliceJSON('svc1', [{ ip: '10.180.0.1' }])]);
  const good = [...s.services.values()][0]!;
  const bad: ServicePort = { ...good, key: 'ns1/bad:p80', serviceKey: 'ns1/bad', clusterIP: 'fd00::1' };
  const services = new Map(s.services).set(bad.key, bad);
  const r = render({ ...s, services });
  assert.deepEqual(r.skipped, [{ key: 'ns1/bad:p80', reason: 'bad clusterIP fd00::1' }]);
  assert.match(r.restoreText, /ns1\/svc1:p80 cluster IP/);
});

test('TestNoEndpointsMetric: Local policies without local endpoints are counted, services without endpoints are not', () => {
  const cases: Array<{
    name: string;
    itp?: boolean;
    etp?: boolean;
    eps: Array<[string, string]>;
    internal: number;
    external: number;
  }> = [
    {
      name: 'iTP Local with local endpoints',
      itp: true,
      eps: [
        ['10.0.1.1', 'test-node'],
        ['10.0.1.2', 'host1'],
        ['10.0.1.3', 'host2'],
      ],
      internal: 0,
      external: 0,
    },
    {
      name: 'eTP Local with local endpoints',
      etp: true,
      eps: [
        ['10.0.1.1', 'test-node'],
        ['10.0.1.2', 'host1'],
        ['10.0.1.3', 'host2'],
      ],
      internal: 0,
      external: 0,
    },
    {
      name: 'both with local endpoints',
      itp: true,
      etp: true,
      eps: [
        ['10.0.1.1', 'test-node'],
        ['10.0.1.2', 'host1'],
      ],
      internal: 0,
      external: 0,
    },
    {
      name: 'iTP Local without local endpoints',
      itp: true,
      eps: [
        ['10.0.1.1', 'host0'],
        ['10.0.1.2', 'host1'],
      ],
      internal: 1,
      external: 0,
    },
    {
      name: 'eTP Local without local endpoints',
      etp: true,
      eps: [
        ['10.0.1.1', 'host0'],
        ['10.0.1.2', 'host1'],
      ],
      internal: 0,
      external: 1,
    },
    {
      name: 'both without local endpoints',
      itp: true,
      etp: true,
      eps: [
        ['10.0.1.1', 'host0'],
        ['10.0.1.2', 'host1'],
      ],
      internal: 1,
      external: 1,
    },
    { name: 'both without any endpoints', itp: true, etp: true, eps: [], internal: 0, external: 0 },
  ];
  for (const c of cases) {
    const spec: Record<string, unknown> = {
      clusterIP: '172.30.1.1',
      ports: [{ name: '', port: 80, protocol: 'TCP', nodePort: 123 }],
    };
    if (c.itp) spec.internalTrafficPolicy = 'Local';
    if (c.etp) Object.assign(spec, { type: 'NodePort', externalTrafficPolicy: 'Local' });
    const slice = {
      metadata: { namespace: 'ns1', name: 'svc1-1', labels: { 'kubernetes.io/service-name': 'svc1' } },
      addressType: 'IPv4',
      ports: [{ name: '', port: 80, protocol: 'TCP' }],
      endpoints: c.eps.map(([ip, node]) => ({ addresses: [ip], conditions: { ready: true }, nodeName: node })),
    };
    const r = render(state([svcJSON('svc1', spec)], [slice]));
    assert.deepEqual(r.noLocalEndpoints, { internal: c.internal, external: c.external }, c.name);
  }
});

test('the restore input of 200k service ports is assembled (no per-port list spread into one call)', () => {
  // renderRestore's own work, without rendering: one shared port, 200k times. Spreading the
  // per-port chunk lists into push() put every chunk on the stack and threw a RangeError past
  // ~125k chunks (about 60k Services with endpoints), so a large cluster never got a first sync.
  const port: RenderedServicePort = {
    natTop: '-A KUBE-SERVICES -j KUBE-SVC-X\n',
    natTopCount: 1,
    filter: '-A KUBE-EXTERNAL-SERVICES -j DROP\n',
    filterCount: 1,
    chains: ['KUBE-SVC-X'],
    own: '-A KUBE-SVC-X -j KUBE-SEP-X\n',
    ownCount: 1,
    noLocalInternal: false,
    noLocalExternal: false,
  };
  const n = 200_000;
  const frame = { config, options: DEFAULT_IPTABLES_OPTIONS, lnp: false, largeClusterMode: true, partial: false };
  const r = renderRestore(
    { ...frame, skipped: [] },
    new Array<RenderedServicePort>(n).fill(port),
    new Array<boolean>(n).fill(true),
    [],
  );
  assert.equal(r.natChains, n);
  assert.equal(r.natRulesTotal, r.natRules);
  let natLines = 0;
  let filterLines = 0;
  for (const p of r.restoreParts) {
    if (p === port.natTop || p === port.own) natLines++;
    else if (p === port.filter) filterLines++;
  }
  assert.equal(natLines, 2 * n);
  assert.equal(filterLines, n);
});
