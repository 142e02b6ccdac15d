import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import { LOCAL, service, slice } from '../../../test/cases/fixtures.js';
import { localhostCleanupScript, localhostRejectScript, planLocalhostNodePorts, relayKey } from './localhost.js';

/** web: TCP NodePort 30080 (endpoints on this node and another); dns: UDP NodePort 30053; plain: no NodePort. */
function state(opts: { local?: boolean; sticky?: boolean; localEndpoints?: boolean } = {}) {
  const services = [
    service(
      'web',
      {
        clusterIP: '172.30.0.41',
        type: 'NodePort',
        ...(opts.local ? { externalTrafficPolicy: 'Local' } : {}),
        ...(opts.sticky ? { sessionAffinity: 'ClientIP' } : {}),
      },
      [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080 }],
    ),
    service('dns', { clusterIP: '172.30.0.42', type: 'NodePort' }, [
      { name: 'dns', port: 53, protocol: 'UDP', nodePort: 30053 },
    ]),
    service('plain', { clusterIP: '172.30.0.43' }, [{ name: 'p', port: 80 }]),
  ];
  const slices = [
    slice(
      'web',
      [{ name: 'http', port: 8080 }],
      [
        { ip: '10.180.0.1', node: opts.localEndpoints === false ? 'other' : LOCAL },
        { ip: '10.180.1.1', node: 'other' },
      ],
    ),
    slice('dns', [{ name: 'dns', port: 53, protocol: 'UDP' }], [{ ip: '10.180.0.2', node: LOCAL }]),
    slice('plain', [{ name: 'p', port: 80 }], [{ ip: '10.180.0.3', node: LOCAL }]),
  ];
  return syncStateFromObjects({ services, slices, family: 'IPv4', nodeName: LOCAL });
}

test('serve: one relay per TCP NodePort with the cluster endpoints; UDP rejected', () => {
  const plan = planLocalhostNodePorts(state(), true);
  assert.deepEqual([...plan.relays.keys()], [relayKey(30080)]);
  const r = plan.relays.get('tcp/30080')!;
  assert.deepEqual(r.endpoints, ['10.180.0.1:8080', '10.180.1.1:8080']);
  assert.equal(r.stickyMs, 0);
  assert.deepEqual(plan.rejected, { TCP: [], UDP: [30053], SCTP: [] });
});

test('serve: externalTrafficPolicy Local keeps this node endpoints only; none = no relay', () => {
  assert.deepEqual(planLocalhostNodePorts(state({ local: true }), true).relays.get('tcp/30080')?.endpoints, [
    '10.180.0.1:8080',
  ]);
  const none = planLocalhostNodePorts(state({ local: true, localEndpoints: false }), true);
  assert.equal(none.relays.size, 0, 'no local endpoint: the kernel refuses, as upstream');
  assert.deepEqual(none.rejected.TCP, [], 'and it is not counted as a rejection');
});

test('serve: ClientIP affinity keeps its timeout (default 10800 s)', () => {
  assert.equal(planLocalhostNodePorts(state({ sticky: true }), true).relays.get('tcp/30080')?.stickyMs, 10800_000);
});

test('reject: no relays, every NodePort rejected', () => {
  const plan = planLocalhostNodePorts(state(), false);
  assert.equal(plan.relays.size, 0);
  assert.deepEqual(plan.rejected, { TCP: [30080], UDP: [30053], SCTP: [] });
});

test('the reject script keeps named counters (add, never re-create) and refills sets and chain', () => {
  const s = localhostRejectScript('IPv4', { TCP: [30080, 30090], UDP: [30053], SCTP: [] });
  assert.match(s, /^add counter ip kube-proxy-ts-localhost localhost-nodeport-rejected-udp$/m);
  assert.doesNotMatch(s, /delete|create/);
  assert.match(s, /^add element ip kube-proxy-ts-localhost localhost-nodeport-reject-tcp \{ 30080, 30090 \}$/m);
  assert.doesNotMatch(s, /add element \S+ \S+ localhost-nodeport-reject-sctp/, 'an empty set gets no element line');
  assert.match(s, /^flush chain ip kube-proxy-ts-localhost input$/m);
  assert.match(
    s,
    /^add rule ip kube-proxy-ts-localhost input ip daddr 127\.0\.0\.0\/8 udp dport @localhost-nodeport-reject-udp counter name localhost-nodeport-rejected-udp reject$/m,
  );
  assert.match(
    localhostRejectScript('IPv6', { TCP: [], UDP: [], SCTP: [] }),
    /ip6 daddr ::1 tcp dport .* reject with tcp reset$/m,
  );
  assert.equal(
    localhostCleanupScript('IPv6'),
    'add table ip6 kube-proxy-ts-localhost\ndelete table ip6 kube-proxy-ts-localhost\n',
  );
});
