import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { once } from 'node:events';
import { FakeClock } from '../../test/support/fakeclock.js';
import { ProxyMetrics } from './metrics.js';
import { parseBindAddress, RetryingServer, startMetricsServer } from './metricsserver.js';

test('parseBindAddress', () => {
  assert.equal(parseBindAddress(''), null);
  assert.deepEqual(parseBindAddress('127.0.0.1:0'), { host: '127.0.0.1', port: 0 }, 'port 0: ephemeral');
  assert.deepEqual(parseBindAddress('0.0.0.0:10256'), { host: '0.0.0.0', port: 10256 });
  assert.deepEqual(parseBindAddress('[::]:10256'), { host: '::', port: 10256 });
  assert.deepEqual(parseBindAddress('[::1]:10249'), { host: '::1', port: 10249 });
  assert.deepEqual(parseBindAddress(':10249'), { host: '', port: 10249 });
  for (const bad of ['10256', '1.2.3.4', '1.2.3.4:70000', 'x.y:1', '::1:10249', '[1.2.3]:1']) {
    assert.throws(() => parseBindAddress(bad), { code: 'KPT_CONFIG_INVALID' }, bad);
  }
});

test('metrics server answers /metrics, /healthz, /metrics/slis, /proxyMode, /configz and 404 over real HTTP', async (t) => {
  const metrics = new ProxyMetrics({ defaultMetrics: false });
  metrics.changeRecorded('endpoint');
  const srv = startMetricsServer({
    bindAddress: '127.0.0.1:0',
    metrics,
    proxyMode: 'nftables',
    config: { mode: 'nftables', clusterCIDR: '10.0.0.0/8' },
  });
  assert.ok(srv);
  t.after(() => srv.close());
  const { port } = await srv.ready;
  const get = (p: string) => fetch(`http://127.0.0.1:${port}${p}`);

  let r = await get('/metrics');
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type') ?? '', /^text\/plain; version=0.0.4/);
  assert.match(await r.text(), /^kubeproxy_sync_proxy_rules_endpoint_changes_total 1$/m);
  r = await get('/healthz');
  assert.equal(await r.text(), 'ok');
  r = await get('/healthz?verbose');
  assert.equal(await r.text(), '[+]ping ok\nhealthz check passed\n');
  r = await get('/metrics/slis');
  const slis = await r.text();
  assert.match(slis, /^kubernetes_healthcheck\{name="ping",type="healthz"\} 1$/m);
  assert.match(slis, /^kubernetes_healthchecks_total\{name="ping",status="success",type="healthz"\} 2$/m);
  r = await get('/proxyMode');
  assert.equal(r.headers.get('content-type'), 'text/plain; charset=utf-8');
  assert.equal(await r.text(), 'nftables');
  r = await get('/configz');
  assert.deepEqual(await r.json(), { 'kubeproxy.config.k8s.io': { mode: 'nftables', clusterCIDR: '10.0.0.0/8' } });
  r = await get('/nope');
  assert.equal(r.status, 404);
  await r.text();
});

test('disabled when the bind address is empty', () => {
  assert.equal(
    startMetricsServer({
      bindAddress: '',
      metrics: new ProxyMetrics({ defaultMetrics: false }),
      proxyMode: 'iptables',
      config: {},
    }),
    null,
  );
});

async function occupiedPort(): Promise<{ port: number; release: () => Promise<void> }> {
  const blocker = createServer();
  blocker.listen(0, '127.0.0.1');
  await once(blocker, 'listening');
  const port = (blocker.address() as { port: number }).port;
  return { port, release: () => new Promise((r) => blocker.close(() => r())) };
}

test('a busy port is retried every retryInterval until it is free (injected clock)', async (t) => {
  const clock = new FakeClock();
  const { port, release } = await occupiedPort();
  const errors: Error[] = [];
  let failed!: () => void;
  let nextFailure = new Promise<void>((r) => {
    failed = r;
  });
  const srv = new RetryingServer({
    name: 'test',
    address: { host: '127.0.0.1', port },
    handler: (_q, s) => s.end('hi'),
    clock,
    onListenRetry: (e) => {
      errors.push(e);
      failed();
    },
    onListenError: () => assert.fail('not fatal without hardFail'),
  });
  t.after(() => srv.close());
  await nextFailure;
  assert.equal((errors[0] as NodeJS.ErrnoException).code, 'EADDRINUSE');
  nextFailure = new Promise<void>((r) => {
    failed = r;
  });
  clock.advance(5000);
  await nextFailure;
  assert.equal(errors.length, 2, 'retried after 5 s');
  await release();
  clock.advance(4999);
  assert.equal(errors.length, 2, 'no attempt before the interval');
  clock.advance(1);
  const addr = await srv.ready;
  assert.equal(addr.port, port);
  assert.equal(await (await fetch(`http://127.0.0.1:${port}/`)).text(), 'hi');
});

test('hardFail: reports once and stops retrying', async () => {
  const clock = new FakeClock();
  const { port, release } = await occupiedPort();
  let calls = 0;
  let failed!: () => void;
  const done = new Promise<void>((r) => {
    failed = r;
  });
  const srv = new RetryingServer({
    name: 'test',
    address: { host: '127.0.0.1', port },
    handler: (_q, s) => s.end(),
    clock,
    hardFail: true,
    onListenError: () => {
      calls++;
      failed();
    },
    onListenRetry: () => assert.fail('no retry with hardFail'),
  });
  await done;
  assert.equal(clock.pending(), 0, 'no retry armed');
  clock.advance(60_000);
  assert.equal(calls, 1);
  await srv.close();
  await release();
});

test('close() during a listen attempt leaves nothing listening', async () => {
  const { port, release } = await occupiedPort();
  await release();
  const srv = new RetryingServer({ name: 'test', address: { host: '127.0.0.1', port }, handler: (_q, s) => s.end() });
  await srv.close();
  // The port must be free again: bind it ourselves.
  const again = await occupiedPortAt(port);
  await again();
});

async function occupiedPortAt(port: number): Promise<() => Promise<void>> {
  const s = createServer();
  s.listen(port, '127.0.0.1');
  await once(s, 'listening');
  return () => new Promise((r) => s.close(() => r()));
}
