import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { DataplaneConfig } from '../../core/types.js';
import type { UserspacePlan } from './plan.js';
import { renderCleanup, renderRules as renderTx } from './rules.js';
import { PORTAL_PORTS, portalPlan } from '../../../test/dataplane/userspace-fixtures.js';

const CFG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'none' },
  nodePortAddresses: null,
  localhostNodePorts: true,
  localIPs: ['127.0.0.1', '192.168.0.2'],
};

const PLAN = portalPlan('IPv4');
const PORTS = PORTAL_PORTS;

const lines = (s: string) => s.trimEnd().split('\n');
/** The transaction as the `nft -f` script it is (one line per object). */
const renderRules = (...args: Parameters<typeof renderTx>) => renderTx(...args).toString();

describe('userspace renderRules', () => {
  it('replaces the whole table atomically: add, delete, add', () => {
    const out = lines(renderRules(PLAN, PORTS, CFG));
    assert.deepEqual(out.slice(0, 3), [
      'add table ip kube-proxy-userspace',
      'delete table ip kube-proxy-userspace',
      'add table ip kube-proxy-userspace { comment "rules for kube-proxy-ts userspace mode" ; }',
    ]);
  });

  it('redirects portals to their listener ports; refuses the others (reject, drop, listener without a port)', () => {
    const out = renderRules(PLAN, PORTS, CFG);
    const elementsOf = (map: string) =>
      lines(out)
        .filter((l) => l.startsWith(`add element ip kube-proxy-userspace ${map} `))
        .map((l) => l.replace(/^.* \{ (.*) \}$/, '$1'));
    assert.deepEqual(elementsOf('service-portals'), [
      '172.30.0.41 . tcp . 80 : 40001',
      '192.168.99.11 . tcp . 80 : 40002',
    ]);
    assert.deepEqual(elementsOf('nodeport-portals'), ['tcp . 30080 : 40002']);
    assert.deepEqual(elementsOf('no-endpoint-services'), [
      '172.30.0.42 . udp . 53 : goto reject-chain',
      '172.30.0.43 . tcp . 81 : goto reject-chain',
    ]);
    assert.deepEqual(elementsOf('no-endpoint-nodeports'), ['udp . 30053 : drop']);
  });

  it('NodePorts on every local address (MatchAll), loopback excluded when localhost NodePorts are off', () => {
    assert.match(
      renderRules(PLAN, PORTS, CFG),
      /^add rule ip kube-proxy-userspace portals-host fib daddr type local jump nodeports-host$/m,
    );
    const off = renderRules(PLAN, PORTS, { ...CFG, localhostNodePorts: false });
    assert.match(
      off,
      /^add rule ip kube-proxy-userspace portals-host fib daddr type local ip daddr != 127\.0\.0\.0\/8 jump nodeports-host$/m,
    );
    assert.match(
      off,
      /^add rule ip kube-proxy-userspace filter-input ip daddr != 127\.0\.0\.0\/8 meta l4proto \. th dport vmap @no-endpoint-nodeports$/m,
    );
  });

  it('nodePortAddresses CIDRs become an interval set; none of this family means no NodePort rules', () => {
    const some = renderRules(PLAN, PORTS, { ...CFG, nodePortAddresses: ['192.168.0.0/24', '2001:db8::/64'] });
    assert.match(some, /^add element ip kube-proxy-userspace nodeport-ips \{ 192\.168\.0\.0\/24 \}$/m);
    assert.match(
      some,
      /^add rule ip kube-proxy-userspace portals-container fib daddr type local ip daddr @nodeport-ips jump nodeports-container$/m,
    );
    const none = renderRules(PLAN, PORTS, { ...CFG, nodePortAddresses: ['2001:db8::/64'] });
    assert.doesNotMatch(none, /jump nodeports/);
  });

  it('IPv6 uses ip6 and ipv6_addr keys', () => {
    const plan6: UserspacePlan = {
      listeners: new Map(),
      skipped: [],
      portals: [
        {
          servicePortKey: 'x',
          protocol: 'TCP',
          port: 80,
          clusterIP: 'fd00:172:30::41',
          internal: { kind: 'listener', listener: 'A' },
          externalIPs: [],
          nodePort: 0,
          external: null,
        },
      ],
    };
    const out = renderRules(plan6, PORTS, { ...CFG, family: 'IPv6', localIPs: ['::1'] });
    assert.match(
      out,
      /^add map ip6 kube-proxy-userspace service-portals \{ type ipv6_addr \. inet_proto \. inet_service : inet_service ; \}$/m,
    );
    assert.match(out, /redirect to : ip6 daddr \. meta l4proto \. th dport map @service-portals/);
    assert.match(out, /fd00:172:30::41 \. tcp \. 80 : 40001/);
  });

  it('a Service address claimed twice is written once (the first wins)', () => {
    const dup: UserspacePlan = {
      ...PLAN,
      portals: [PLAN.portals[0]!, { ...PLAN.portals[0]!, servicePortKey: 'ns1/z:p', internal: { kind: 'reject' } }],
    };
    const out = renderRules(dup, PORTS, CFG);
    assert.equal(out.match(/172\.30\.0\.41 \. tcp \. 80/g)?.length, 1);
  });

  it('cleanup deletes only our table, and works when it is absent', () => {
    assert.equal(
      renderCleanup('IPv6').toString(),
      'add table ip6 kube-proxy-userspace\ndelete table ip6 kube-proxy-userspace\n',
    );
  });
});
