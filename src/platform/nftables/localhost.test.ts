// The loopback relays' bookkeeping with real sockets on 127.0.0.x (no
// netfilter: the reject table's nft runner is a recorder).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { IPFamily, SyncState } from '../../core/types.js';
import { LOCAL, service, slice } from '../../../test/cases/fixtures.js';
import { FakeClock } from '../../../test/support/fakeclock.js';
import { LocalhostNodePorts, parseRejectCounters, type LocalhostNodePortMetrics } from './localhost.js';
import type { NftRunner } from './leftovers.js';
import type { LocalhostNodePortsMode } from '../../core/config/nodeport.js';

/** A free port on 127.0.0.1 right now. */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

/**
 * Connect to 127.0.0.1:port and read until the endpoint closes (it sends its name and ends), or the error
 * code. Reading to the end lets each relay finish cleanly before the test closes the listeners.
 */
function hello(port: number): Promise<string> {
  return new Promise((resolve) => {
    const c = net.connect({ host: '127.0.0.1', port });
    let data = '';
    c.on('data', (d) => (data += d.toString()));
    c.once('close', () => resolve(data));
    c.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? String(e)));
  });
}

class Recorder implements LocalhostNodePortMetrics {
  listeners = -1;
  failures = 0;
  localhostNodePortListeners(_f: IPFamily, n: number): void {
    this.listeners = n;
  }
  localhostNodePortListenerFailed(): void {
    this.failures++;
  }
}

describe('LocalhostNodePorts (loopback relays)', () => {
  const servers: net.Server[] = [];
  const conns = new Set<net.Socket>();
  let epPort = 0;
  let np1 = 0;
  let np2 = 0;
  const scripts: string[] = [];
  const runner: NftRunner = async (_args, input) => {
    scripts.push(input ?? '');
    return { stdout: '', stderr: '', code: 0 };
  };
  const relays = (mode: LocalhostNodePortsMode, metrics: Recorder) =>
    new LocalhostNodePorts({ family: 'IPv4', serving: mode, runner, metrics, clock: new FakeClock() });

  /** Services with NodePorts np1 (endpoint 127.0.0.2, this node) and np2 (127.0.0.3, another node), and a UDP one. */
  const state = (opts: { second?: boolean; local2?: boolean; withoutA?: boolean } = {}): SyncState => {
    const svcs = [
      service('a', { clusterIP: '172.30.0.41', type: 'NodePort' }, [
        { name: 'p', port: 80, nodePort: opts.withoutA ? 0 : np1 },
      ]),
      service('u', { clusterIP: '172.30.0.43', type: 'NodePort' }, [
        { name: 'p', port: 53, protocol: 'UDP', nodePort: 30053 },
      ]),
    ];
    const slices = [
      slice('a', [{ name: 'p', port: epPort }], [{ ip: '127.0.0.2', node: LOCAL }]),
      slice('u', [{ name: 'p', port: 53, protocol: 'UDP' }], [{ ip: '127.0.0.2', node: LOCAL }]),
    ];
    if (opts.second !== false) {
      svcs.push(
        service(
          'b',
          { clusterIP: '172.30.0.42', type: 'NodePort', ...(opts.local2 ? { externalTrafficPolicy: 'Local' } : {}) },
          [{ name: 'p', port: 80, nodePort: np2 }],
        ),
      );
      slices.push(slice('b', [{ name: 'p', port: epPort }], [{ ip: '127.0.0.3', node: 'other' }]));
    }
    return syncStateFromObjects({ services: svcs, slices, family: 'IPv4', nodeName: LOCAL });
  };

  before(async () => {
    for (const [name, host] of [
      ['ep2', '127.0.0.2'],
      ['ep3', '127.0.0.3'],
    ] as const) {
      const srv = net.createServer((c) => {
        // The test's client hangs up after the greeting; the relay passes that on as a reset.
        c.on('error', () => {});
        conns.add(c);
        c.on('close', () => conns.delete(c));
        c.end(name);
      });
      await new Promise<void>((r) => srv.listen(epPort, host, () => r()));
      epPort = (srv.address() as net.AddressInfo).port;
      servers.push(srv);
    }
    np1 = await freePort();
    np2 = await freePort();
  });
  after(() => {
    for (const c of conns) c.destroy();
    for (const s of servers) s.close();
  });

  it('serves each TCP NodePort on 127.0.0.1, follows removals and traffic policy, rejects UDP', async () => {
    const m = new Recorder();
    const lnp = relays('serve', m);
    try {
      await lnp.sync(state());
      assert.deepEqual(
        lnp.listening(),
        [np1, np2].sort((a, b) => a - b),
      );
      assert.equal(m.listeners, 2);
      assert.equal(await hello(np1), 'ep2');
      assert.equal(await hello(np2), 'ep3');
      assert.match(scripts.at(-1)!, /reject-udp \{ 30053 \}/);
      assert.doesNotMatch(scripts.at(-1)!, /reject-tcp \{ \d/, 'served TCP ports are not rejected');

      // Service b goes: its listener closes.
      const before = scripts.length;
      await lnp.sync(state({ second: false }));
      assert.deepEqual(lnp.listening(), [np1]);
      assert.equal(m.listeners, 1);
      assert.equal(await hello(np2), 'ECONNREFUSED');
      assert.equal(scripts.length, before, 'an unchanged reject table is not rewritten');

      // b again with externalTrafficPolicy Local and no endpoint here: no listener.
      await lnp.sync(state({ local2: true }));
      assert.deepEqual(lnp.listening(), [np1]);
      assert.equal(await hello(np2), 'ECONNREFUSED');
    } finally {
      await lnp.close();
    }
    assert.equal(m.listeners, 0);
    assert.equal(await hello(np1), 'ECONNREFUSED', 'close() closes the listeners');
  });

  it('a port already taken is a counted failure, tried again at the next sync', async () => {
    const squatter = net.createServer((c) => {
      c.on('error', () => {});
      c.end('squatter');
    });
    await new Promise<void>((r) => squatter.listen(np2, '127.0.0.1', () => r()));
    const m = new Recorder();
    const events: string[] = [];
    const lnp = new LocalhostNodePorts({
      family: 'IPv4',
      serving: 'serve',
      runner,
      metrics: m,
      onEvent: (level, _f, msg) => events.push(`${level}: ${msg}`),
    });
    try {
      await lnp.sync(state());
      assert.deepEqual(lnp.listening(), [np1], 'the other NodePort is served regardless');
      assert.equal(m.failures, 1);
      assert.equal(m.listeners, 1);
      assert.ok(events.some((e) => e.startsWith('error: localhost NodePort relay failed to listen')));
      assert.equal(await hello(np2), 'squatter');
      await lnp.sync(state());
      assert.equal(m.failures, 2, 'each sync tries again and counts again');
      await new Promise((r) => squatter.close(r));
      await lnp.sync(state());
      assert.equal(m.failures, 2);
      assert.equal(await hello(np2), 'ep3', 'served once the port is free');
    } finally {
      if (squatter.listening) squatter.close();
      await lnp.close();
    }
  });

  it("'reject' mode opens nothing and rejects TCP NodePorts too; 'off' only removes a left-over table", async () => {
    const m = new Recorder();
    const rej = relays('reject', m);
    await rej.sync(state());
    assert.deepEqual(rej.listening(), []);
    assert.equal(m.listeners, 0);
    const tcpLine = scripts
      .at(-1)!
      .split('\n')
      .find((l) => /reject-tcp \{ \d/.test(l));
    assert.deepEqual(
      tcpLine?.match(/\d{4,5}/g)?.map(Number),
      [np1, np2].sort((a, b) => a - b),
    );
    await rej.close();

    const off = relays('off', new Recorder());
    const n = scripts.length;
    await off.sync(state());
    await off.sync(state());
    assert.deepEqual(off.listening(), []);
    assert.deepEqual(scripts.slice(n), [
      'add table ip kube-proxy-ts-localhost\ndelete table ip kube-proxy-ts-localhost\n',
    ]);
    assert.deepEqual(await off.rejectedPackets(), {});
  });

  it('closing a relay whose half-close is in flight leaves no socket open', async () => {
    const sockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
    const lnp = relays('serve', new Recorder());
    await lnp.sync(state({ second: false }));
    const before = sockets();
    // The endpoint sends its name and ends; the relay passes the end on as a shutdown, and the Service goes
    // away in the same breath, so the relay is reset while that shutdown is still queued.
    await new Promise<void>((resolve) => {
      const c = net.connect({ host: '127.0.0.1', port: np1 });
      c.once('data', () => {
        c.destroy();
        void lnp.sync(state({ second: false, withoutA: true })).then(() => resolve());
      });
    });
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(sockets(), before, 'every relayed socket is closed');
    await lnp.close();
  });

  it('a failing reject-table write never fails the sync: warned once, tried again each sync', async () => {
    let calls = 0;
    let fail = true;
    const flaky: NftRunner = async () => {
      calls++;
      if (fail) throw new Error('nft: no such file');
      return { stdout: '', stderr: '', code: 0 };
    };
    const events: string[] = [];
    const lnp = new LocalhostNodePorts({
      family: 'IPv4',
      serving: 'reject',
      runner: flaky,
      metrics: new Recorder(),
      onEvent: (level, _f, msg) => events.push(`${level}: ${msg}`),
    });
    await lnp.sync(state());
    await lnp.sync(state());
    assert.equal(calls, 2, 'tried at each sync');
    assert.deepEqual(
      events.map((e) => e.split(':')[0]),
      ['warn', 'debug'],
    );
    fail = false;
    await lnp.sync(state());
    await lnp.sync(state());
    assert.equal(calls, 3, 'written once it works, then left alone while unchanged');
  });

  it('IPv6: the relay listens on ::1 and reaches an IPv6 endpoint', async () => {
    const ep6 = net.createServer((c) => {
      c.on('error', () => {});
      c.end('ep6');
    });
    await new Promise<void>((r) => ep6.listen(0, '::1', () => r()));
    const port6 = (ep6.address() as net.AddressInfo).port;
    const np6 = await freePort();
    const lnp = new LocalhostNodePorts({ family: 'IPv6', serving: 'serve', runner, metrics: new Recorder() });
    try {
      await lnp.sync(
        syncStateFromObjects({
          services: [
            service('v6', { clusterIP: 'fd00:30::41', type: 'NodePort' }, [{ name: 'p', port: 80, nodePort: np6 }]),
          ],
          slices: [slice('v6', [{ name: 'p', port: port6 }], [{ ip: '::1', node: LOCAL }])],
          family: 'IPv6',
          nodeName: LOCAL,
        }),
      );
      const got = await new Promise<string>((resolve) => {
        const c = net.connect({ host: '::1', port: np6 });
        let data = '';
        c.on('data', (d) => (data += d.toString()));
        c.once('close', () => resolve(data));
        c.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? String(e)));
      });
      assert.equal(got, 'ep6');
      assert.match(scripts.at(-1)!, /ip6 daddr ::1 tcp dport/);
    } finally {
      await lnp.close();
      ep6.close();
    }
  });

  it('parseRejectCounters reads our named counters only', () => {
    const json = JSON.stringify({
      nftables: [
        { metainfo: {} },
        { counter: { name: 'localhost-nodeport-rejected-tcp', packets: 4 } },
        { counter: { name: 'localhost-nodeport-rejected-udp', packets: 7 } },
        { counter: { name: 'someone-else', packets: 9 } },
      ],
    });
    assert.deepEqual(parseRejectCounters(json), { TCP: 4, UDP: 7 });
  });
});
