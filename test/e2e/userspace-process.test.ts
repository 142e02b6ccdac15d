// --proxy-mode userspace through the real binary in the two-node namespace
// cluster: the relay serves ClusterIP (TCP and UDP) and NodePort traffic from
// every kind of client, a Service without endpoints is refused at once,
// explain and diff read the live table, sockets and the proxy's status, and
// --cleanup removes the mode's own table. The relay terminates connections,
// so endpoints see the node's address, never the client's (README).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { E2EEnv, podsOf } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { nsRun } from '../netns/spawn.js';
import { proxyArgv } from '../netns/proxy.js';
import { run } from '../../src/platform/exec.js';
import type { Explanation } from '../../src/cmd/explainview.js';
import type { ServiceExplanation } from '../../src/cmd/explainservice.js';

describe('userspace mode through bin/kube-proxy-ts', { concurrency: false }, () => {
  let env: E2EEnv;
  before(async () => {
    env = await E2EEnv.start('userspace');
  });
  after(async () => {
    await env?.dispose();
  });

  /** The real binary, run from this (root) namespace. */
  const kpt = (...args: string[]) => run(proxyArgv()[0]!, [...proxyArgv().slice(1), ...args]);

  const diff = (ns: string, ...args: string[]) =>
    nsRun(ns, [...proxyArgv(), 'diff', ...env.proxy('node1').flags(), ...args], { allowFailure: true });

  /**
   * diff against the running proxy: no changes, endpoints compared; then the
   * proxy stops (its listeners close, the table stays) and a Service is
   * added: every redirect must move to a listener to be opened, and the new
   * Service's portal appears. Nothing is applied.
   */
  async function diffWhileStopped(ns: string): Promise<void> {
    const live = await diff(ns);
    assert.equal(live.code, 0, `${live.stdout}\n${live.stderr}`);
    assert.match(live.stdout, /^# userspace IPv4: no changes$/m, 'endpoints compared too: the proxy answered');
    await env.proxy('node1').stop();
    await env.apply(
      service({ name: 'later', clusterIP: '10.96.20.12', ports: webPorts() }),
      endpointSlice('later', [{ pod: env.cluster.pod('node2-a') }], webPorts()),
    );
    const ruleset = (await nsRun(ns, ['nft', '-s', 'list', 'ruleset'])).stdout;
    const r = await diff(ns);
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    const out = r.stdout;
    assert.match(out, /^# userspace IPv4: .*listener endpoints not compared: cannot reach kube-proxy-ts/m);
    assert.match(out, /^- service-portals: 10\.96\.20\.10 \. tcp \. 80 : \d+$/m);
    assert.match(out, /^\+ service-portals: 10\.96\.20\.10 \. tcp \. 80 : <new port>$/m);
    assert.match(out, /^\+ service-portals: 10\.96\.20\.12 \. tcp \. 80 : <new port>$/m);
    assert.match(out, /^\+ nodeport-portals: tcp \. 30500 : <new port>$/m);
    const later = `${env.cluster.pod('node2-a').ip}:8080`.replaceAll('.', '\\.');
    assert.match(out, new RegExp(`^\\+ tcp :<new port> default/later:tcp \\(cluster endpoints\\) -> ${later}$`, 'm'));
    assert.equal(
      out.match(/^\+ (tcp|udp) :<new port> /gm)?.length,
      4,
      'relay and later, TCP and UDP: one listener each (cluster IP and node port share the cluster set)',
    );
    assert.doesNotMatch(out, /^- (tcp|udp) :/m, 'no listener is listening any more');
    assert.equal((await nsRun(ns, ['nft', '-s', 'list', 'ruleset'])).stdout, ruleset, 'diff changed the table');
  }

  it('relays ClusterIP TCP and UDP to every endpoint, and NodePort from outside', async () => {
    const ip = '10.96.20.10';
    await env.apply(
      service({ name: 'relay', clusterIP: ip, type: 'NodePort', ports: webPorts(30500) }),
      endpointSlice(
        'relay',
        [{ pod: env.cluster.pod('node1-a') }, { pod: env.cluster.pod('node2-a') }],
        webPorts(30500),
      ),
    );
    await env.waitReachable('node1-b', 'tcp', ip, 80);
    const tcp = await env.sendMany('node1-b', 'tcp', ip, 80, 8);
    assert.ok(
      tcp.every((r) => r.ok),
      JSON.stringify(tcp),
    );
    assert.deepEqual(podsOf(tcp), ['node1-a', 'node2-a'], 'round-robin reaches both endpoints');
    const { value: udp } = await env.waitReachable('node2-b', 'udp', ip, 53);
    assert.ok(['node1-a', 'node2-a'].includes(udp.pod));
    const n1 = env.cluster.node('node1');
    const { value: np } = await env.waitReachable('ext', 'tcp', n1.ip, 30500);
    assert.ok(['node1-a', 'node2-a'].includes(np.pod));
  });

  it('explain follows a packet through the redirect table to the listener, and asks the proxy for its endpoints', async () => {
    const n1 = env.cluster.node('node1');
    const explain = async (...args: string[]) => {
      const r = await kpt('explain', '--netns', n1.ns, '-o', 'json', ...args);
      return JSON.parse(r.stdout) as Explanation;
    };
    const client = env.cluster.pod('node1-b').ip;
    const e = await explain('--src', client, '--dst', '10.96.20.10', '--port', '80');
    assert.equal(e.mode, 'userspace');
    assert.equal(e.verdict, 'DNAT');
    assert.match(e.service ?? '', /^default\/relay(:|$)/);
    const ips = e.candidates.map((c) => c.endpoint.replace(/:\d+$/, '')).sort();
    assert.deepEqual(ips, [env.cluster.pod('node1-a').ip, env.cluster.pod('node2-a').ip].sort());
    assert.ok(e.candidates.every((c) => c.probability === 0.5));
    assert.equal(e.masquerade, true, 'the relay connects from the node');
    assert.deepEqual(
      e.steps.map((s) => s.where.replace(/^listener .*/, 'listener')),
      ['portals-container', 'listener'],
    );
    // The NodePort from outside reaches the same listener kind through nodeports-container.
    const np = await explain('--src', '203.0.113.9', '--dst', n1.ip, '--port', '30500');
    assert.ok(
      np.steps.some((s) => s.where === 'nodeports-container'),
      JSON.stringify(np.steps),
    );
    assert.equal(np.candidates.length, 2);
    // The proxy cannot be asked: the walk still ends at the listener, and a note says why the endpoints are unknown.
    const blind = await explain('--src', client, '--dst', '10.96.20.10', '--port', '80', '--address', '127.0.0.1:1');
    assert.deepEqual(blind.candidates, []);
    assert.ok(blind.steps.some((s) => s.where.startsWith('listener ')));
    assert.match(
      (blind.notes ?? []).join(' '),
      /known only to the proxy process.*cannot reach kube-proxy-ts at 127\.0\.0\.1:1/,
    );
    // --service: the proxy names the Service's addresses; each is walked to its listener.
    const svc = await kpt('explain', '--netns', n1.ns, '-o', 'json', '--service', 'default/relay');
    const views = JSON.parse(svc.stdout) as ServiceExplanation[];
    const v4 = views.find((v) => v.addresses.some((a) => a.address === '10.96.20.10'))!;
    assert.equal(v4.mode, 'userspace');
    assert.deepEqual(v4.addresses.map((a) => `${a.kind} ${a.address ?? 'node'}:${a.port}/${a.protocol}`).sort(), [
      'cluster IP 10.96.20.10:53/UDP',
      'cluster IP 10.96.20.10:80/TCP',
      'node port node:30500/TCP',
      'node port node:30501/UDP',
    ]);
    const eps = [env.cluster.pod('node1-a').ip, env.cluster.pod('node2-a').ip].sort();
    for (const a of v4.addresses)
      for (const v of a.views) {
        assert.equal(v.verdict, 'DNAT', `${a.kind} ${a.port} from ${v.client}: ${v.summary}`);
        assert.deepEqual(v.candidates.map((c) => c.endpoint.replace(/:\d+$/, '')).sort(), eps);
        assert.match(v.summary, /redirected to the proxy's listener/);
      }
    assert.deepEqual(
      v4.addresses.find((a) => a.kind === 'node port' && a.protocol === 'TCP')!.views.map((v) => v.dst),
      [n1.ip, n1.ip],
    );
    // A saved listing (--from) gives the same walk, endpoints unknown.
    const listing = (await nsRun(n1.ns, ['nft', 'list', 'ruleset'])).stdout;
    const dir = mkdtempSync(join(tmpdir(), 'kpt-us-explain-'));
    try {
      writeFileSync(join(dir, 'dump'), listing);
      const fromDump = (...args: string[]) =>
        kpt(
          'explain',
          '-o',
          'json',
          '--from',
          join(dir, 'dump'),
          ...args,
          '--src',
          client,
          '--dst',
          '10.96.20.10',
          '--port',
          '80',
        );
      const r = await fromDump();
      const saved = JSON.parse(r.stdout) as Explanation;
      assert.deepEqual(
        saved.steps.map((s) => s.where),
        blind.steps.map((s) => s.where),
      );
      assert.match((saved.notes ?? []).join(' '), /saved dump has only the table/);
      // With the proxy's status saved next to it (--status), the dump gives the live answer, endpoints included.
      const status = await kpt('status', '--netns', n1.ns, '-o', 'json');
      writeFileSync(join(dir, 'status.json'), status.stdout);
      const withStatus = await fromDump('--status', join(dir, 'status.json'), '--local-ip', n1.ip);
      assert.deepEqual(JSON.parse(withStatus.stdout), e);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an API outage with the history compacted meanwhile: a Service created during it is relayed soon after the API returns', async () => {
    const ip = '10.96.20.13';
    const before = await env.cp.stats();
    await env.cp.stopServing();
    try {
      // Made while the server is away (in its store), then the history dropped past every watch.
      await env.cp.createMany([
        service({ name: 'during', clusterIP: ip, ports: webPorts() }),
        endpointSlice('during', [{ pod: env.cluster.pod('node1-a') }], webPorts()),
      ]);
      await env.cp.compact();
    } finally {
      await env.cp.startServing();
    }
    const back = Date.now();
    await env.waitServedBy('node2-a', 'tcp', ip, 80, ['node1-a'], {}, 6);
    const ms = Date.now() - back;
    const api = await env.cp.stats();
    console.log(
      `userspace: outage+410: change made during it relayed ${ms} ms after the API returned; ` +
        `${api.handshakes - before.handshakes} handshakes, ${api.abortedHandshakes - before.abortedHandshakes} aborted`,
    );
    // The next case counts the relay's listeners: this Service's must be gone.
    await env.kube.remove('Service', 'during');
    await env.waitFor('the Service gone from the relay', async () => {
      const r = await env.send('node2-a', 'tcp', ip, 80, { timeoutMs: 500 });
      return r.ok ? undefined : true;
    });
    assert.equal(api.abortedHandshakes, 0, 'no TLS handshake opened and dropped');
    assert.ok(ms <= 10_000, `relayed ${ms} ms after the API returned`);
  });

  it('refuses a Service without endpoints at once; diff sees the live state and what a sync would change; --cleanup removes the table', async () => {
    const ip = '10.96.20.11';
    await env.apply(
      service({ name: 'empty', clusterIP: ip, ports: webPorts() }),
      endpointSlice('empty', [], webPorts()),
    );
    const { value } = await env.waitFor('connection refused', async () => {
      const r = await env.send('node1-a', 'tcp', ip, 80, { timeoutMs: 1500 });
      return !r.ok && /ECONNREFUSED/.test(r.error) ? r.error : undefined;
    });
    assert.match(value, /ECONNREFUSED/);

    const n1 = env.cluster.node('node1');
    const before = await nsRun(n1.ns, ['nft', 'list', 'tables']);
    assert.match(before.stdout, /kube-proxy-userspace/);
    await diffWhileStopped(n1.ns);
    const r = await env.proxy('node1').cleanup();
    assert.equal(r.code, 0, r.output);
    const afterTables = await nsRun(n1.ns, ['nft', 'list', 'tables']);
    assert.doesNotMatch(afterTables.stdout, /kube-proxy-userspace/);
  });
});
