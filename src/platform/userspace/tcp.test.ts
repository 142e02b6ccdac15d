// TcpListener on its own, on loopback: what the dataplane tests
// (dataplane.test.ts) do not reach through a sync.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { hasCode } from '../../core/errors.js';
import { RoundRobin } from '../../dataplane/userspace/loadbalancer.js';
import { FakeClock } from '../../../test/support/fakeclock.js';
import { TcpListener } from './tcp.js';

describe('TcpListener (loopback)', () => {
  let backend: net.Server;
  let endpoint = '';
  const accepted: net.Socket[] = [];

  before(async () => {
    // Greets, then keeps the connection open until the other side goes.
    backend = net.createServer((c) => {
      accepted.push(c);
      c.on('error', () => {});
      c.write('hi');
    });
    await new Promise<void>((r) => backend.listen(0, '127.0.0.2', () => r()));
    endpoint = `127.0.0.2:${(backend.address() as net.AddressInfo).port}`;
  });
  after(() => {
    // A relay left open by a failing test must not keep the process alive.
    for (const c of accepted) c.destroy();
    backend.close();
  });

  const listener = (): TcpListener => {
    const lb = new RoundRobin(new FakeClock());
    lb.setEndpoints([endpoint], 0);
    return new TcpListener('ns/a:p', lb, () => {});
  };

  it('close() after retire() resets the relays the retired listener left running', { timeout: 5000 }, async () => {
    const l = listener();
    const port = await l.listen('127.0.0.1');
    const c = net.connect({ host: '127.0.0.1', port });
    const closed = new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
      let err: NodeJS.ErrnoException | undefined;
      c.on('error', (e) => (err = e));
      c.on('close', () => resolve(err));
    });
    await once(c, 'data');
    l.retire();
    assert.equal(l.connectionCount(), 1, 'retiring keeps the open relay');
    await l.close();
    assert.equal(l.connectionCount(), 0);
    assert.equal((await closed)?.code, 'ECONNRESET');
  });

  it('a port already taken rejects listen() with KPT_BUSY', async () => {
    const first = listener();
    const port = await first.listen('127.0.0.1');
    const second = listener();
    await assert.rejects(second.listen('127.0.0.1', port), (err: unknown) => hasCode(err, 'KPT_BUSY'));
    await second.close();
    await first.close();
  });
});
