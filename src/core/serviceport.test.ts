import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_STICKY_MAX_AGE_SECONDS, objectKey, serviceToServicePorts } from './serviceport.js';
import type { IPFamily } from './types.js';
import { makeService, svcPort, withClusterIP, withLoadBalancerIngress } from '../../test/support/fixtures.js';

function intake(svc: unknown, family: IPFamily = 'IPv4') {
  const skips: string[] = [];
  const ports = serviceToServicePorts(svc, family, (k, r) => skips.push(`${k}: ${r}`));
  return { ports, skips, only: ports.size === 1 ? [...ports.values()][0]! : undefined };
}

const basic = (mut?: Parameters<typeof makeService>[2]) =>
  makeService('ns1', 'svc1', (s) => {
    withClusterIP(s, '172.30.0.41');
    s.spec.ports = [svcPort('p80', 80)];
    mut?.(s);
  });

test('a ClusterIP service becomes one ServicePort per port', () => {
  const { ports, skips } = intake(
    basic((s) => {
      s.spec.ports = [svcPort('p80', 80), { name: 'dns', port: 53, protocol: 'UDP' }, { name: 'np', port: 81 }];
    }),
  );
  assert.deepEqual(skips, []);
  assert.deepEqual([...ports.keys()], ['ns1/svc1:p80', 'ns1/svc1:dns', 'ns1/svc1:np']);
  const p = ports.get('ns1/svc1:p80')!;
  assert.deepEqual(p.name, { namespace: 'ns1', name: 'svc1', port: 'p80', protocol: 'TCP' });
  assert.equal(p.serviceKey, 'ns1/svc1');
  assert.equal(p.clusterIP, '172.30.0.41');
  assert.equal(p.nodePort, 0);
  assert.equal(p.stickyMaxAgeSeconds, 0);
  assert.equal(p.externallyAccessible, false);
  assert.equal(p.usesClusterEndpoints, true);
  assert.equal(p.usesLocalEndpoints, false);
  assert.equal(ports.get('ns1/svc1:np')!.protocol, 'TCP', 'protocol defaults to TCP');
  assert.equal(ports.get('ns1/svc1:dns')!.protocol, 'UDP');
});

test('an unnamed port has the key ns/svc', () => {
  assert.equal(
    intake(
      basic((s) => {
        s.spec.ports = [{ port: 80 }];
      }),
    ).only!.key,
    'ns1/svc1',
  );
});

test('headless, ExternalName and claimed Services are skipped silently', () => {
  for (const s of [
    basic((x) => {
      x.spec.clusterIP = 'None';
      x.spec.clusterIPs = ['None'];
    }),
    basic((x) => {
      x.spec.clusterIP = '';
      x.spec.clusterIPs = [];
    }),
    basic((x) => {
      x.spec.type = 'ExternalName';
      x.spec.externalName = 'example.com';
    }),
    basic((x) => {
      x.metadata.labels = { 'service.kubernetes.io/service-proxy-name': 'other' };
    }),
  ]) {
    const r = intake(s);
    assert.equal(r.ports.size, 0);
    assert.deepEqual(r.skips, []);
  }
});

test('with a service-proxy-name, only Services claimed with exactly that name are served', () => {
  const claimed = (name?: string) =>
    basic((x) => {
      if (name !== undefined) x.metadata.labels = { 'service.kubernetes.io/service-proxy-name': name };
    });
  const as = (svc: unknown, proxyName: string) => serviceToServicePorts(svc, 'IPv4', () => {}, proxyName).size;
  assert.equal(as(claimed('kube-proxy-ts'), 'kube-proxy-ts'), 1);
  assert.equal(as(claimed('other'), 'kube-proxy-ts'), 0);
  assert.equal(as(claimed(), 'kube-proxy-ts'), 0, 'unclaimed Services stay with the other proxy');
  assert.equal(as(claimed(), ''), 1, 'upstream behaviour without a name');
  assert.equal(as(claimed('kube-proxy-ts'), ''), 0);
});

test('dual-stack: each family takes its own ClusterIP; single-stack is ignored by the other family', () => {
  const ds = basic((s) => {
    s.spec.clusterIPs = ['172.30.0.41', 'fd00:172:30::41'];
    s.spec.ipFamilies = ['IPv4', 'IPv6'];
  });
  assert.equal(intake(ds, 'IPv4').only!.clusterIP, '172.30.0.41');
  assert.equal(intake(ds, 'IPv6').only!.clusterIP, 'fd00:172:30::41');
  assert.equal(intake(ds, 'IPv6').only!.family, 'IPv6');
  assert.equal(intake(basic(), 'IPv6').ports.size, 0);
});

test('TestBadIPs: leading zeros are accepted and normalised', () => {
  const s = basic((x) => {
    withClusterIP(x, '172.30.0.041');
    x.spec.type = 'LoadBalancer';
    x.spec.externalIPs = ['192.168.099.011'];
    x.spec.loadBalancerSourceRanges = ['203.0.113.000/025'];
  });
  withLoadBalancerIngress(s, '1.2.3.004');
  const p = intake(s).only!;
  assert.equal(p.clusterIP, '172.30.0.41');
  assert.deepEqual(p.externalIPs, ['192.168.99.11']);
  assert.deepEqual(p.loadBalancerVIPs, ['1.2.3.4']);
  assert.deepEqual(p.loadBalancerSourceRanges, ['203.0.113.0/25']);
});

test('externalIPs and source ranges are filtered to the family; ranges trimmed; invalid ones reported', () => {
  const s = basic((x) => {
    x.spec.externalIPs = ['192.168.99.11', 'fd00::11', 'not-an-ip'];
    x.spec.loadBalancerSourceRanges = ['192.168.0.0/24', ' 203.0.113.0/25', 'fd00::/64', 'garbage'];
  });
  const v4 = intake(s, 'IPv4');
  assert.deepEqual(v4.only!.externalIPs, ['192.168.99.11']);
  assert.deepEqual(v4.only!.loadBalancerSourceRanges, ['192.168.0.0/24', '203.0.113.0/25']);
  assert.equal(v4.skips.length, 2);
  assert.match(v4.skips.join('\n'), /not-an-ip/);
  assert.match(v4.skips.join('\n'), /garbage/);
  const v6 = intake(s, 'IPv6');
  assert.equal(v6.ports.size, 0, 'no IPv6 ClusterIP');
});

test('loopback, unspecified, link-local and multicast ClusterIPs and externalIPs are reported and never served', () => {
  // The API server refuses them; a hostile one would capture the node's own traffic (127.0.0.1:10249 and all).
  for (const [ip, family, why] of [
    ['127.0.0.1', 'IPv4', 'loopback'],
    ['127.8.9.10', 'IPv4', 'loopback'],
    ['0.0.0.0', 'IPv4', 'unspecified'],
    ['169.254.1.1', 'IPv4', 'link-local'],
    ['224.0.0.1', 'IPv4', 'multicast'],
    ['::1', 'IPv6', 'loopback'],
    ['::', 'IPv6', 'unspecified'],
    ['fe80::1', 'IPv6', 'link-local'],
    ['ff02::1', 'IPv6', 'multicast'],
    // The datapath canary's block (src/core/canary.ts): RFC 6666 discard-only, which the API server accepts.
    ['100::a9fe:fffd', 'IPv6', 'discard-only'],
    ['100::ffff:ffff:ffff:ffff', 'IPv6', 'discard-only'],
  ] as const) {
    const r = intake(
      basic((x) => withClusterIP(x, ip)),
      family,
    );
    assert.equal(r.ports.size, 0, `${ip} served`);
    assert.match(r.skips.join('\n'), new RegExp(`invalid clusterIP .*\\(${why}\\b`), ip);
  }
  const ext = intake(basic((x) => (x.spec.externalIPs = ['127.0.0.1', '192.168.99.11'])));
  assert.deepEqual(ext.only!.externalIPs, ['192.168.99.11']);
  assert.match(ext.skips.join('\n'), /invalid externalIP "127.0.0.1" \(loopback\)/);
  // Only 100::/64 is kept back: its neighbour 100:0:0:1::/64 is an address like any other.
  const v6 = intake(
    basic((x) => {
      withClusterIP(x, '100:0:0:1::5');
      x.spec.externalIPs = ['100::a9fe:fffd', '100:0:0:1::6'];
    }),
    'IPv6',
  );
  assert.equal(v6.only!.clusterIP, '100:0:0:1::5');
  assert.deepEqual(v6.only!.externalIPs, ['100:0:0:1::6']);
  assert.match(v6.skips.join('\n'), /invalid externalIP "100::a9fe:fffd" \(discard-only/);
});

test('a zero CIDR source range of the family means allow-all (empty list)', () => {
  const s = basic((x) => {
    x.spec.loadBalancerSourceRanges = ['192.168.0.0/24', '0.0.0.0/0', 'fd00::/64'];
  });
  assert.deepEqual(intake(s).only!.loadBalancerSourceRanges, []);
  const other = basic((x) => {
    x.spec.loadBalancerSourceRanges = ['192.168.0.0/24', '::/0'];
  });
  assert.deepEqual(intake(other).only!.loadBalancerSourceRanges, ['192.168.0.0/24']);
});

test('LB ingress: only VIP-mode (or unset) IPs of the family; hostnames ignored', () => {
  const s = basic((x) => {
    x.spec.type = 'LoadBalancer';
  });
  withLoadBalancerIngress(
    s,
    '1.2.3.4',
    { ip: '5.6.7.8', ipMode: 'Proxy' },
    { ip: '9.10.11.12', ipMode: 'VIP' },
    'fd00::1',
  );
  s.status!.loadBalancer!.ingress!.push({ hostname: 'lb.example.com' });
  const p = intake(s).only!;
  assert.deepEqual(p.loadBalancerVIPs, ['1.2.3.4', '9.10.11.12']);
  assert.equal(p.externallyAccessible, true);
});

test('session affinity: default timeout, explicit timeout, invalid timeout reported', () => {
  assert.equal(
    intake(
      basic((s) => {
        s.spec.sessionAffinity = 'ClientIP';
      }),
    ).only!.stickyMaxAgeSeconds,
    DEFAULT_STICKY_MAX_AGE_SECONDS,
  );
  assert.equal(
    intake(
      basic((s) => {
        s.spec.sessionAffinity = 'ClientIP';
        s.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: 100 } };
      }),
    ).only!.stickyMaxAgeSeconds,
    100,
  );
  const bad = intake(
    basic((s) => {
      s.spec.sessionAffinity = 'ClientIP';
      s.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: -5 } };
    }),
  );
  assert.equal(bad.only!.stickyMaxAgeSeconds, DEFAULT_STICKY_MAX_AGE_SECONDS);
  assert.equal(bad.skips.length, 1);
  assert.equal(
    intake(
      basic((s) => {
        s.spec.sessionAffinity = 'None';
        s.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: 100 } };
      }),
    ).only!.stickyMaxAgeSeconds,
    0,
  );
});

test('healthCheckNodePort only for LoadBalancer with eTP Local', () => {
  const lb = (type: 'LoadBalancer' | 'NodePort', etp: 'Local' | 'Cluster') =>
    intake(
      basic((s) => {
        s.spec.type = type;
        s.spec.externalTrafficPolicy = etp;
        s.spec.healthCheckNodePort = 30000;
        s.spec.ports = [svcPort('p80', 80, 'TCP', { nodePort: 3001 })];
      }),
    ).only!;
  assert.equal(lb('LoadBalancer', 'Local').healthCheckNodePort, 30000);
  assert.equal(lb('LoadBalancer', 'Cluster').healthCheckNodePort, 0);
  assert.equal(lb('NodePort', 'Local').healthCheckNodePort, 0);
  assert.equal(lb('NodePort', 'Local').externalPolicyLocal, true);
  assert.equal(lb('NodePort', 'Local').usesLocalEndpoints, true);
  assert.equal(lb('NodePort', 'Local').usesClusterEndpoints, true);
});

test('traffic policy flags follow upstream derivations', () => {
  // eTP Local on a ClusterIP-only Service is meaningless (not externally accessible).
  const cip = intake(
    basic((s) => {
      s.spec.externalTrafficPolicy = 'Local';
    }),
  ).only!;
  assert.equal(cip.externalPolicyLocal, false);
  assert.equal(cip.usesLocalEndpoints, false);
  const itp = intake(
    basic((s) => {
      s.spec.internalTrafficPolicy = 'Local';
    }),
  ).only!;
  assert.equal(itp.internalPolicyLocal, true);
  assert.equal(itp.usesClusterEndpoints, false);
  assert.equal(itp.usesLocalEndpoints, true);
  const td = intake(
    basic((s) => {
      s.spec.trafficDistribution = 'PreferClose';
    }),
  ).only!;
  assert.equal(td.trafficDistribution, 'PreferClose');
});

test('malformed ports are dropped with a reason; healthy ports survive', () => {
  const { ports, skips } = intake(
    basic((s) => {
      s.spec.ports = [
        svcPort('ok', 80),
        { name: 'zero', port: 0 },
        { name: 'neg', port: -1 },
        { name: 'str', port: '80' as unknown as number },
        { name: 'big', port: 70000 },
        { name: 'proto', port: 81, protocol: 'ICMP' as unknown as 'TCP' },
        { name: 'badnp', port: 82, nodePort: -3 },
        svcPort('ok', 83),
        null as unknown as { port: number },
        { name: 5 as unknown as string, port: 84 },
      ];
    }),
  );
  assert.deepEqual([...ports.keys()], ['ns1/svc1:ok', 'ns1/svc1:badnp']);
  assert.equal(ports.get('ns1/svc1:ok')!.port, 80, 'first of duplicate names wins');
  assert.equal(ports.get('ns1/svc1:badnp')!.nodePort, 0, 'an invalid nodePort is ignored, not fatal');
  assert.equal(skips.length, 9);
  assert.ok(skips.every((s) => s.startsWith('ns1/svc1: ')));
});

test('garbage objects never throw and are reported', () => {
  const garbage: unknown[] = [
    null,
    42,
    'svc',
    {},
    { metadata: null },
    { metadata: { name: 'x' } },
    { metadata: { namespace: 'ns', name: 7 } },
    { metadata: { namespace: 'ns', name: 'x' } },
    { metadata: { namespace: 'ns', name: 'x' }, spec: 'nope' },
    { metadata: { namespace: 'ns', name: 'x' }, spec: { clusterIP: 5, ports: 'x' } },
    { metadata: { namespace: 'ns', name: 'x' }, spec: { clusterIP: '172.30.0.1', clusterIPs: 'x', ports: {} } },
    {
      metadata: { namespace: 'ns', name: 'x' },
      spec: { clusterIP: '172.30.0.1', externalIPs: [1, null], loadBalancerSourceRanges: 3 },
      status: { loadBalancer: { ingress: [null, 4] } },
    },
  ];
  for (const g of garbage) {
    const r = intake(g);
    assert.equal(r.ports.size, 0, JSON.stringify(g));
  }
  assert.ok(intake(null).skips.length === 1);
  assert.ok(intake({ metadata: { namespace: 'ns', name: 'x' }, spec: 'nope' }).skips.length === 1);
});

test('objectKey validates namespace and name', () => {
  assert.equal(objectKey({ metadata: { namespace: 'ns1', name: 'svc1' } }), 'ns1/svc1');
  assert.equal(objectKey({ metadata: { namespace: 'ns1', name: 'a/b' } }), null);
  assert.equal(objectKey({ metadata: { namespace: '', name: 'x' } }), null);
});

test('kube-proxy-ts/lb-algorithm: the four values are kept; anything else is reported and the default used', () => {
  const annotated = (v: unknown) =>
    intake(
      basic((s) => {
        (s.metadata as { annotations?: Record<string, unknown> }).annotations = { 'kube-proxy-ts/lb-algorithm': v };
      }),
    );
  assert.equal(intake(basic()).only!.lbAlgorithm, undefined);
  for (const a of ['random', 'round-robin', 'maglev', 'source-hash']) {
    const r = annotated(a);
    assert.deepEqual(r.skips, []);
    assert.equal(r.only!.lbAlgorithm, a);
  }
  for (const bad of ['rr', 'Maglev', '', 7, null]) {
    const r = annotated(bad);
    assert.equal(r.only!.lbAlgorithm, undefined, String(bad));
    assert.equal(r.skips.length, 1, String(bad));
    assert.match(
      r.skips[0]!,
      /invalid kube-proxy-ts\/lb-algorithm annotation .*random, round-robin, maglev, source-hash/,
    );
  }
});
