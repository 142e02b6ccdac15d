import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { once } from 'node:events';
import { ServiceHealthServer } from './servicehealth.js';

/** A port that was free a moment ago (the kernel picks it). */
async function freePort(): Promise<number> {
  const s = createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const { port } = s.address() as { port: number };
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

test('service health checks over real HTTP on 127.0.0.1: open, count, health, port change, close', async (t) => {
  let healthy = true;
  const failures: Array<[string, number]> = [];
  const hs = new ServiceHealthServer({
    nodeIPs: ['127.0.0.1'],
    isProxyHealthy: () => healthy,
    onListenFailed: (k, p) => failures.push([k, p]),
  });
  t.after(() => hs.close());
  const p1 = await freePort();
  await hs.syncServices(new Map([['ns/web', p1]]));
  assert.deepEqual(hs.open(), new Map([['ns/web', p1]]));

  let r = await fetch(`http://127.0.0.1:${p1}/any/path`);
  assert.equal(r.status, 503, 'no local endpoints yet');
  assert.equal(r.headers.get('x-load-balancing-endpoint-weight'), '0');
  await r.text();

  hs.syncEndpoints(new Map([['ns/web', 2]]));
  r = await fetch(`http://127.0.0.1:${p1}/`);
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('content-type'), 'application/json');
  assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(r.headers.get('x-load-balancing-endpoint-weight'), '2');
  assert.deepEqual(await r.json(), {
    service: { namespace: 'ns', name: 'web' },
    localEndpoints: 2,
    serviceProxyHealthy: true,
  });

  healthy = false;
  r = await fetch(`http://127.0.0.1:${p1}/`);
  assert.equal(r.status, 503, 'proxy unhealthy');
  assert.equal(((await r.json()) as { serviceProxyHealthy: boolean }).serviceProxyHealthy, false);
  healthy = true;

  const p2 = await freePort();
  await hs.syncServices(new Map([['ns/web', p2]]));
  await assert.rejects(fetch(`http://127.0.0.1:${p1}/`), 'old port closed');
  r = await fetch(`http://127.0.0.1:${p2}/`);
  assert.equal(r.status, 200, 'a re-opened service starts from the last endpoint sync');
  await r.text();

  await hs.syncServices(new Map());
  assert.equal(hs.open().size, 0);
  await assert.rejects(fetch(`http://127.0.0.1:${p2}/`));
  assert.deepEqual(failures, []);
});

test('a port clash is logged/counted, not fatal, and retried on the next sync', async (t) => {
  const blocker = createServer().listen(0, '127.0.0.1');
  await once(blocker, 'listening');
  const busy = (blocker.address() as { port: number }).port;
  const failures: Array<[string, number, string]> = [];
  const hs = new ServiceHealthServer({
    nodeIPs: ['127.0.0.1'],
    isProxyHealthy: () => true,
    onListenFailed: (k, p, e) => failures.push([k, p, (e as NodeJS.ErrnoException).code ?? '']),
  });
  t.after(() => hs.close());
  const ok = await freePort();
  await hs.syncServices(
    new Map([
      ['ns/clash', busy],
      ['ns/fine', ok],
    ]),
  );
  assert.deepEqual(failures, [['ns/clash', busy, 'EADDRINUSE']]);
  assert.deepEqual(hs.open(), new Map([['ns/fine', ok]]), 'the other service still serves');
  hs.syncEndpoints(
    new Map([
      ['ns/clash', 1],
      ['ns/fine', 1],
    ]),
  );

  await new Promise<void>((r) => blocker.close(() => r()));
  await hs.syncServices(
    new Map([
      ['ns/clash', busy],
      ['ns/fine', ok],
    ]),
  );
  assert.equal(hs.open().get('ns/clash'), busy, 'retried and opened');
  const r = await fetch(`http://127.0.0.1:${busy}/`);
  assert.equal(r.status, 200, 'took the count from the last endpoint sync');
  await r.text();
});
