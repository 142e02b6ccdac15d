// The userspace tracer on its own: hook order, refusals, the relay's candidates, a portal whose
// listener is gone, and strict/lenient handling of rules it does not know. The shared
// packet-flow table runs it against real renders (test/dataplane/userspace-packetflow.test.ts).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { DataplaneConfig } from '../../core/types.js';
import { LOCAL, LOCAL_IPS_V4, NODE_IP, service, slice } from '../../../test/cases/fixtures.js';
import { Fake } from './fake.js';
import { planUserspace } from './plan.js';
import { renderRules } from './rules.js';
import { userspaceTransaction } from './rules.js';
import { trace } from './trace.js';

const CFG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'none' },
  nodePortAddresses: null,
  localhostNodePorts: false,
  localIPs: LOCAL_IPS_V4,
};
const POD = '10.0.0.2';

function load(): { fake: Fake; ports: Map<string, number> } {
  const plan = planUserspace(
    syncStateFromObjects({
      services: [
        service('web', { type: 'NodePort', clusterIP: '172.30.0.41' }, [{ name: 'p', port: 80, nodePort: 30080 }]),
        service('empty', { clusterIP: '172.30.0.42' }, [{ name: 'p', port: 80 }]),
      ],
      slices: [slice('web', [{ name: 'p', port: 8080 }], [{ ip: '10.180.0.1' }, { ip: '10.180.0.2', node: LOCAL }])],
      family: 'IPv4',
      nodeIPs: { IPv4: NODE_IP },
    }),
  );
  const fake = new Fake('ip');
  const ports = new Map([...plan.listeners.values()].map((s) => [s.key, fake.listen(s)]));
  fake.run(renderRules(plan, ports, CFG));
  return { fake, ports };
}

describe('userspace trace', () => {
  it('a pod to a ClusterIP: redirected in nat prerouting, relayed to every endpoint with equal chance', () => {
    const { fake } = load();
    const r = trace(fake, { src: POD, dst: '172.30.0.41', port: 80 }, LOCAL_IPS_V4);
    assert.equal(r.verdict, 'DNAT');
    assert.deepEqual(
      r.candidates.map((c) => [c.endpoint, c.probability]),
      [
        ['10.180.0.1:8080', 0.5],
        ['10.180.0.2:8080', 0.5],
      ],
    );
    assert.equal(r.masq, true);
    assert.equal(r.steps[0]!.chain, 'portals-container');
    assert.match(r.steps.at(-1)!.chain, /^listener ns1\/web:p\/TCP\/cluster$/);
  });

  it('the node to its NodePort goes through nat output and nodeports-host', () => {
    const { fake } = load();
    const r = trace(fake, { src: NODE_IP, dst: NODE_IP, port: 30080 }, LOCAL_IPS_V4);
    // In walk order (the nftables tracer's): the jump in portals-host, then the rule it jumped to.
    assert.deepEqual(
      r.steps.map((s) => [s.chain, s.depth]),
      [
        ['portals-host', 0],
        ['nodeports-host', 1],
        ['listener ns1/web:p/TCP/cluster', 0],
      ],
    );
    assert.equal(r.output, '10.180.0.1:8080, 10.180.0.2:8080');
  });

  it('a Service without endpoints is rejected in filter, before any redirect', () => {
    const { fake } = load();
    for (const src of [POD, NODE_IP]) {
      const r = trace(fake, { src, dst: '172.30.0.42', port: 80 }, LOCAL_IPS_V4);
      assert.equal(r.verdict, 'REJECT', src);
      assert.equal(r.masq, false);
    }
  });

  it('a portal whose listener has gone is answered by the kernel (REJECT)', () => {
    const { fake } = load();
    fake.close('ns1/web:p/TCP/cluster');
    const r = trace(fake, { src: POD, dst: '172.30.0.41', port: 80 }, LOCAL_IPS_V4);
    assert.equal(r.output, 'REJECT');
    assert.match(r.matched.at(-1)!, /^no listener: tcp port 4000\d$/);
  });

  it('an address that is no portal matches nothing', () => {
    const { fake } = load();
    const r = trace(fake, { src: POD, dst: '172.30.0.99', port: 80 }, LOCAL_IPS_V4);
    assert.deepEqual([r.output, r.verdict, r.matched], ['', 'NONE', []]);
  });

  it('strict by default: an unknown rule throws; lenient mode lists it and goes on', () => {
    const { fake } = load();
    fake.run(
      userspaceTransaction('IPv4').add({ kind: 'rule', chain: 'portals-container', rule: 'ct mark 0x1 counter' }),
    );
    assert.throws(() => trace(fake, { src: POD, dst: '172.30.0.99', port: 80 }, LOCAL_IPS_V4), /ct mark 0x1/);
    const r = trace(fake, { src: POD, dst: '172.30.0.41', port: 80 }, LOCAL_IPS_V4, { strict: false });
    assert.equal(r.verdict, 'DNAT');
    assert.deepEqual(r.notUnderstood, []);
    const miss = trace(fake, { src: POD, dst: '172.30.0.99', port: 80 }, LOCAL_IPS_V4, { strict: false });
    assert.deepEqual(miss.notUnderstood, ['portals-container: ct mark 0x1 counter']);
  });
});
