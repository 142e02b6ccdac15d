// `diff` in userspace mode over a stub runner: a running proxy whose
// listener still relays to the endpoints of an older state (its status says
// so) is reported as that listener's endpoints changing on the same port,
// and a redirect to a port nobody listens on as a listener to open.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../../core/snapshot.js';
import type { DataplaneConfig } from '../../../core/types.js';
import type { CommandRunner } from '../../../platform/exec.js';
import { diffUserspaceFamily } from './diff.js';
import { NODE_IP, service, slice } from '../../../../test/cases/fixtures.js';
import { statusAfterSync } from '../../../../test/cases/status.js';

const config: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'none' },
  nodePortAddresses: null,
  localhostNodePorts: true,
  localIPs: ['127.0.0.1', NODE_IP],
};

const state = (eps: string[]) =>
  syncStateFromObjects({
    services: [service('s0', { clusterIP: '10.96.0.10' }, [{ name: 'http', port: 80, targetPort: 8080 }])],
    slices: [
      slice(
        's0',
        [{ name: 'http', port: 8080 }],
        eps.map((ip) => ({ ip })),
      ),
    ],
    family: 'IPv4',
    nodeIPs: { IPv4: NODE_IP },
    fullSync: true,
  });

/** What nft and ss print on a node whose table redirects 10.96.0.10:80 to port 40001. */
function node(listening: boolean): CommandRunner {
  const out: Record<string, string> = {
    'nft list tables ip': 'table ip kube-proxy-userspace\n',
    'nft list table ip kube-proxy-userspace': [
      'table ip kube-proxy-userspace {',
      '\tmap service-portals {',
      '\t\ttype ipv4_addr . inet_proto . inet_service : inet_service',
      '\t\telements = { 10.96.0.10 . tcp . 80 : 40001 }',
      '\t}',
      '}',
      '',
    ].join('\n'),
    'ss -Hln -t': listening ? 'LISTEN 0      511          0.0.0.0:40001      0.0.0.0:*\n' : '',
    'ss -Hln -u': '',
  };
  return (cmd, args) => {
    const stdout = out[[cmd, ...args].join(' ')];
    if (stdout === undefined) throw new Error(`unexpected command ${cmd} ${args.join(' ')}`);
    return Promise.resolve({ code: 0, stdout, stderr: '' });
  };
}

test('userspace diff: stale endpoints of a running listener, and a listener that is not listening', async () => {
  const old = state(['10.180.0.1']);
  const d = await diffUserspaceFamily({
    run: node(true),
    family: 'IPv4',
    config,
    state: state(['10.180.0.1', '10.180.0.2']),
    status: statusAfterSync('userspace', old),
    statusError: null,
  });
  assert.match(
    d.text,
    /^## listeners\n- tcp :40001 -> 10\.180\.0\.1:8080\n\+ tcp :40001 -> 10\.180\.0\.1:8080, 10\.180\.0\.2:8080\n/m,
  );
  assert.doesNotMatch(d.text, /service-portals: 10\.96\.0\.10/, 'the listener keeps its port: no redirect changes');
  assert.doesNotMatch(d.summary, /not compared/);

  const closed = await diffUserspaceFamily({
    run: node(false),
    family: 'IPv4',
    config,
    state: old,
    status: null,
    statusError: 'cannot reach kube-proxy-ts',
  });
  assert.match(closed.text, /^- service-portals: 10\.96\.0\.10 \. tcp \. 80 : 40001$/m);
  assert.match(closed.text, /^\+ service-portals: 10\.96\.0\.10 \. tcp \. 80 : <new port>$/m);
  assert.match(closed.text, /^\+ tcp :<new port> ns1\/s0:http \(cluster endpoints\) -> 10\.180\.0\.1:8080$/m);
  assert.match(
    closed.summary,
    /1 listener\(s\) to open \(listener endpoints not compared: cannot reach kube-proxy-ts\)/,
  );
});
