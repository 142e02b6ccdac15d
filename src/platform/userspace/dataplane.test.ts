// UserspaceDataplane relays on loopback only: listeners bound to 127.0.0.1,
// endpoints on 127.0.0.x, a recording nft runner (no netfilter is touched).
// The redirect rules themselves run on a real kernel in
// test/e2e/userspace-kernel.test.ts.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import net from 'node:net';
import { once } from 'node:events';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../core/types.js';
import { listenerKey } from '../../dataplane/userspace/plan.js';
import { FakeClock } from '../../../test/support/fakeclock.js';
import { service, slice } from '../../../test/cases/fixtures.js';
import { UserspaceDataplane } from './dataplane.js';
import type { NftRunner } from '../nftables/dataplane.js';
import { ExecError } from '../exec.js';

const CFG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'none' },
  nodePortAddresses: null,
  localhostNodePorts: true,
  localIPs: ['127.0.0.1'],
};
const TCP_KEY = listenerKey('ns1/a:p', 'TCP', 'cluster');
const UDP_KEY = listenerKey('ns1/u:p', 'UDP', 'cluster');

/** A TCP server that greets with its name, then echoes; on the client's FIN it sends "bytes=N" and ends. */
function tcpServer(name: string, host: string, port: number): Promise<net.Server> {
  const srv = net.createServer({ allowHalfOpen: true }, (c) => {
    let n = 0;
    c.write(`${name};`);
    c.on('data', (d: Buffer) => {
      n += d.length;
      if (d.toString() !== 'BULK') c.write(d);
    });
    c.on('end', () => c.end(`bytes=${n}`));
    c.on('error', () => {});
  });
  return new Promise((resolve) => srv.listen(port, host, () => resolve(srv)));
}

function udpServer(name: string, host: string, port: number): Promise<dgram.Socket> {
  const s = dgram.createSocket('udp4');
  s.on('message', (m, r) => s.send(`${name}:${m.toString()}`, r.port, r.address));
  return new Promise((resolve) => s.bind(port, host, () => resolve(s)));
}

/** Connect, optionally send and half-close, and collect everything until the server ends. */
function exchange(port: number, send?: string): Promise<{ data: string; error?: string }> {
  return new Promise((resolve) => {
    const c = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true });
    let data = '';
    c.on('data', (d) => {
      data += d.toString();
    });
    c.on('connect', () => {
      if (send !== undefined) c.end(send);
    });
    c.on('error', (e: NodeJS.ErrnoException) => resolve({ data, error: e.code ?? String(e) }));
    c.on('end', () => {
      c.end();
      resolve({ data });
    });
  });
}

/** Resolves on 'close' (events.once would reject on the 'error' a reset emits first). */
function closedP(c: net.Socket): Promise<void> {
  return new Promise((r) => c.once('close', () => r()));
}

function greeting(port: number): Promise<string> {
  return exchange(port, '').then((r) => r.data.split(';')[0]!);
}

describe('UserspaceDataplane relays (loopback)', () => {
  let port = 0;
  const servers: net.Server[] = [];
  const udps: dgram.Socket[] = [];
  const scripts: string[] = [];
  const runner: NftRunner = async (_args, input) => {
    scripts.push(input ?? '');
    return { stdout: '', stderr: '', code: 0 };
  };
  const clock = new FakeClock();
  const dp = new UserspaceDataplane({
    config: CFG,
    runner,
    clock,
    bindAddress: '127.0.0.1',
    dialTimeoutsMs: [200, 200, 200, 200],
  });

  const state = (eps: string[], opts: { udp?: boolean; withA?: boolean; sticky?: boolean } = {}): SyncState => {
    const svcs = [];
    const slices = [];
    if (opts.withA !== false) {
      svcs.push(
        service('a', { clusterIP: '172.30.0.41', ...(opts.sticky ? { sessionAffinity: 'ClientIP' } : {}) }, [
          { name: 'p', port: 80 },
        ]),
      );
      if (eps.length)
        slices.push(
          slice(
            'a',
            [{ name: 'p', port }],
            eps.map((ip) => ({ ip })),
          ),
        );
    }
    if (opts.udp) {
      svcs.push(service('u', { clusterIP: '172.30.0.42' }, [{ name: 'p', port: 53, protocol: 'UDP' }]));
      slices.push(slice('u', [{ name: 'p', port, protocol: 'UDP' }], [{ ip: '127.0.0.2' }, { ip: '127.0.0.3' }]));
    }
    return syncStateFromObjects({ services: svcs, slices, family: 'IPv4' });
  };

  before(async () => {
    const first = await tcpServer('ep2', '127.0.0.2', 0);
    port = (first.address() as net.AddressInfo).port;
    servers.push(first, await tcpServer('ep3', '127.0.0.3', port));
    udps.push(await udpServer('ep2', '127.0.0.2', port), await udpServer('ep3', '127.0.0.3', port));
  });
  after(async () => {
    await dp.close();
    for (const s of servers) s.close();
    for (const u of udps) u.close();
  });

  it('relays to the endpoints round-robin and writes a redirect to the listener', async () => {
    await dp.sync(state(['127.0.0.2', '127.0.0.3']));
    const lport = dp.listenerPort(TCP_KEY)!;
    assert.ok(lport > 0);
    assert.match(scripts.at(-1)!, new RegExp(`172\\.30\\.0\\.41 \\. tcp \\. 80 : ${lport}`));
    const got = [await greeting(lport), await greeting(lport), await greeting(lport), await greeting(lport)];
    assert.deepEqual(got, ['ep2', 'ep3', 'ep2', 'ep3']);
  });

  it('passes a half-close on: the client FIN reaches the endpoint, whose answer still comes back', async () => {
    const r = await exchange(dp.listenerPort(TCP_KEY)!, 'hello');
    assert.equal(r.error, undefined);
    assert.match(r.data, /^ep[23];hellobytes=5$/);
  });

  it('keeps the client on one endpoint with ClientIP affinity', async () => {
    await dp.sync(state(['127.0.0.2', '127.0.0.3'], { sticky: true }));
    const lport = dp.listenerPort(TCP_KEY)!;
    const got = new Set([await greeting(lport), await greeting(lport), await greeting(lport)]);
    assert.equal(got.size, 1);
    await dp.sync(state(['127.0.0.2', '127.0.0.3']));
  });

  it('tries the next endpoint when one refuses', async () => {
    await dp.sync(state(['127.0.0.2', '127.0.0.9']));
    const lport = dp.listenerPort(TCP_KEY)!;
    const got = [await greeting(lport), await greeting(lport), await greeting(lport)];
    assert.deepEqual(got, ['ep2', 'ep2', 'ep2']);
  });

  it('endpoint changes keep the listener and its port; relays to a removed endpoint are reset', async () => {
    await dp.sync(state(['127.0.0.2', '127.0.0.3']));
    const lport = dp.listenerPort(TCP_KEY)!;
    const conns: Array<{ c: net.Socket; ep: string; closed: Promise<unknown> }> = [];
    for (let i = 0; i < 2; i++) {
      const c = net.connect({ host: '127.0.0.1', port: lport });
      c.on('error', () => {});
      const [d] = (await once(c, 'data')) as [Buffer];
      conns.push({ c, ep: d.toString().split(';')[0]!, closed: closedP(c) });
    }
    await dp.sync(state(['127.0.0.2']));
    assert.equal(dp.listenerPort(TCP_KEY), lport);
    const to3 = conns.find((x) => x.ep === 'ep3')!;
    const to2 = conns.find((x) => x.ep === 'ep2')!;
    await to3.closed;
    assert.equal(to2.c.destroyed, false);
    to2.c.write('still');
    const [echo] = (await once(to2.c, 'data')) as [Buffer];
    assert.equal(echo.toString(), 'still');
    to2.c.destroy();
  });

  it(
    'applies backpressure: a reader that stops reading stalls the endpoint instead of filling the relay',
    { timeout: 20_000 },
    async () => {
      const lport = dp.listenerPort(TCP_KEY)!;
      const total = 64 * 1024 * 1024;
      let written = 0;
      let stalled: () => void = () => {};
      const stalledP = new Promise<void>((r) => {
        stalled = r;
      });
      const bulk = net.createServer((s) => {
        s.on('error', () => {});
        const chunk = Buffer.alloc(64 * 1024);
        const pump = () => {
          while (written < total) {
            written += chunk.length;
            if (!s.write(chunk)) {
              s.once('drain', pump);
              setImmediate(() => {
                if (s.writableNeedDrain) stalled();
              });
              return;
            }
          }
        };
        pump();
      });
      await new Promise<void>((r) => bulk.listen(port + 1 === 65536 ? 1 : port + 1, '127.0.0.4', () => r()));
      const bport = (bulk.address() as net.AddressInfo).port;
      const st = syncStateFromObjects({
        services: [service('a', { clusterIP: '172.30.0.41' }, [{ name: 'p', port: 80 }])],
        slices: [slice('a', [{ name: 'p', port: bport }], [{ ip: '127.0.0.4' }])],
        family: 'IPv4',
      });
      await dp.sync(st);
      const c = net.connect({ host: '127.0.0.1', port: lport });
      c.on('error', () => {});
      c.pause();
      await stalledP;
      // Poll a few event-loop turns: once the relay has stopped reading, `written` stays put.
      let last = -1;
      while (last !== written) {
        last = written;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(written < total / 4, `endpoint wrote ${written} bytes into a reader that never read`);
      c.destroy();
      bulk.close();
    },
  );

  it(
    'relays 24 MiB both ways byte-exact, also while the client does not read (bulk sides, stalled writes)',
    { timeout: 30_000 },
    async () => {
      await dp.sync(state(['127.0.0.2']));
      const lport = dp.listenerPort(TCP_KEY)!;
      const total = 24 * 1024 * 1024;
      const data = Buffer.alloc(total);
      for (let i = 0; i < total; i++) data[i] = (i * 7 + (i >> 12)) % 251;
      const c = net.connect({ host: '127.0.0.1', port: lport, allowHalfOpen: true });
      const got: Buffer[] = [];
      c.on('data', (d: Buffer) => got.push(d));
      const ended = once(c, 'end');
      await once(c, 'connect');
      // Not reading until everything was written: the echo backs up into the relay, whose writes to us stall.
      c.pause();
      for (let off = 0; off < total; off += 1024 * 1024) {
        if (!c.write(data.subarray(off, off + 1024 * 1024))) await once(c, 'drain');
      }
      c.end();
      c.resume();
      await ended;
      const all = Buffer.concat(got);
      assert.equal(all.subarray(0, 4).toString(), 'ep2;');
      assert.equal(all.length, 4 + total + `bytes=${total}`.length);
      assert.ok(all.subarray(4, 4 + total).equals(data), 'echoed bytes differ from those sent');
      assert.equal(all.subarray(4 + total).toString(), `bytes=${total}`);
      c.destroy();
    },
  );

  it('UDP: one session per client address, replies come back, idle sessions end on the injected clock', async () => {
    await dp.sync(state(['127.0.0.2', '127.0.0.3'], { udp: true }));
    const uport = dp.listenerPort(UDP_KEY)!;
    const ask = async (sock: dgram.Socket, msg: string) => {
      sock.send(msg, uport, '127.0.0.1');
      const [m] = (await once(sock, 'message')) as [Buffer];
      return m.toString();
    };
    const c1 = dgram.createSocket('udp4');
    const c2 = dgram.createSocket('udp4');
    const a1 = await ask(c1, 'x');
    assert.equal(await ask(c1, 'y'), `${a1.split(':')[0]}:y`, 'same session, same endpoint');
    const a2 = await ask(c2, 'z');
    assert.notEqual(a2.split(':')[0], a1.split(':')[0], 'a second client address gets the next endpoint');
    assert.equal(dp.stats().udpSessions, 2);
    clock.advance(249);
    assert.equal(dp.stats().udpSessions, 2);
    clock.advance(1);
    assert.equal(dp.stats().udpSessions, 0);
    c1.close();
    c2.close();
  });

  it(
    'UDP with affinity: a session whose endpoint refuses ends, and the client moves to the next endpoint',
    { timeout: 10_000 },
    async () => {
      // 127.0.0.1:port has no server: sorted first, so it is the first pick.
      const st = syncStateFromObjects({
        services: [
          service('u', { clusterIP: '172.30.0.42', sessionAffinity: 'ClientIP' }, [
            { name: 'p', port: 53, protocol: 'UDP' },
          ]),
        ],
        slices: [slice('u', [{ name: 'p', port, protocol: 'UDP' }], [{ ip: '127.0.0.1' }, { ip: '127.0.0.2' }])],
        family: 'IPv4',
      });
      await dp.sync(st);
      const uport = dp.listenerPort(UDP_KEY)!;
      const c = dgram.createSocket('udp4');
      c.send('a', uport, '127.0.0.1');
      while (dp.stats().udpSessions === 0) await new Promise((r) => setImmediate(r));
      while (dp.stats().udpSessions !== 0) await new Promise((r) => setImmediate(r));
      c.send('b', uport, '127.0.0.1');
      const [m] = (await once(c, 'message')) as [Buffer];
      assert.equal(m.toString(), 'ep2:b');
      c.close();
    },
  );

  it('a removed Service closes its listener and resets its relays; no endpoints means a REJECT, no listener', async () => {
    await dp.sync(state(['127.0.0.2']));
    const lport = dp.listenerPort(TCP_KEY)!;
    const c = net.connect({ host: '127.0.0.1', port: lport });
    c.on('error', () => {});
    await once(c, 'data');
    const closed = closedP(c);
    await dp.sync(state([], { withA: false }));
    await closed;
    assert.equal(dp.listenerPort(TCP_KEY), undefined);
    assert.equal((await exchange(lport)).error, 'ECONNREFUSED');
    await dp.sync(state([]));
    assert.equal(dp.listenerPort(TCP_KEY), undefined);
    assert.match(scripts.at(-1)!, /172\.30\.0\.41 \. tcp \. 80 : goto reject-chain/);
  });
});

describe('UserspaceDataplane syncs through the reconciler (loopback, recording nft)', () => {
  const scripts: string[] = [];
  let failNext = false;
  const runner: NftRunner = async (args, input) => {
    if (failNext) {
      failNext = false;
      throw new ExecError('nft', args, { stdout: '', stderr: 'Error: injected', code: 1 });
    }
    scripts.push(input ?? '');
    return { stdout: '', stderr: '', code: 0 };
  };
  const dp = new UserspaceDataplane({ config: CFG, runner, bindAddress: '127.0.0.1' });
  after(() => dp.close());

  const st = (aEps: string[], changed?: string[], withU = false): SyncState =>
    syncStateFromObjects({
      services: [
        service('a', { clusterIP: '172.30.0.41' }, [{ name: 'p', port: 80 }]),
        ...(withU ? [service('u', { clusterIP: '172.30.0.42' }, [{ name: 'p', port: 53, protocol: 'UDP' }])] : []),
      ],
      slices: [
        slice(
          'a',
          [{ name: 'p', port: 9 }],
          aEps.map((ip) => ({ ip })),
        ),
        ...(withU ? [slice('u', [{ name: 'p', port: 9, protocol: 'UDP' }], [{ ip: '127.0.0.2' }])] : []),
      ],
      family: 'IPv4',
      ...(changed ? { fullSync: false, changedServices: changed } : {}),
    });
  const wholeTable = (s: string) => s.startsWith('add table ip kube-proxy-userspace\ndelete table');

  it('a partial sync writes only the changed portals, and nothing for an endpoint change', async () => {
    assert.equal((await dp.sync(st(['127.0.0.2']))).partial, false);
    assert.ok(wholeTable(scripts.at(-1)!));
    const lport = dp.listenerPort(TCP_KEY)!;
    const n = scripts.length;
    const moved = await dp.sync(st(['127.0.0.3'], ['ns1/a']));
    assert.equal(moved.partial, true);
    assert.equal(scripts.length, n, 'the endpoints changed in the listener; the table did not');
    assert.equal(dp.listenerPort(TCP_KEY), lport);
    await dp.sync(st(['127.0.0.3'], ['ns1/u'], true));
    const uport = dp.listenerPort(UDP_KEY)!;
    assert.equal(
      scripts.at(-1),
      `add element ip kube-proxy-userspace service-portals { 172.30.0.42 . udp . 53 : ${uport} }\n`,
    );
  });

  it('after a failed write the next sync is full, and keeps the listeners it holds', async () => {
    const lport = dp.listenerPort(TCP_KEY)!;
    const uport = dp.listenerPort(UDP_KEY)!;
    failNext = true;
    await assert.rejects(dp.sync(st([], ['ns1/a'], true)));
    const after = await dp.sync(st(['127.0.0.3'], ['ns1/u'], true));
    assert.equal(after.partial, false);
    assert.ok(wholeTable(scripts.at(-1)!));
    assert.match(scripts.at(-1)!, new RegExp(`172\\.30\\.0\\.41 \\. tcp \\. 80 : ${lport}`));
    assert.match(scripts.at(-1)!, new RegExp(`172\\.30\\.0\\.42 \\. udp \\. 53 : ${uport}`));
    assert.deepEqual([dp.listenerPort(TCP_KEY), dp.listenerPort(UDP_KEY)], [lport, uport]);
  });
});
