import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../../test/support/fakeclock.js';
import { healthTimeoutFor, ProxyHealthState } from '../engine/health.js';
import { ProxyMetrics } from './metrics.js';
import { startHealthzServer } from './healthz.js';

const T0 = Date.UTC(2026, 11, 1, 10, 0, 0);

test('healthz server: /healthz and /livez codes, headers, bodies and counters over real HTTP', async (t) => {
  const clock = new FakeClock(T0);
  let eligible = true;
  const state = new ProxyHealthState({ clock, healthTimeout: healthTimeoutFor(30_000), nodeEligible: () => eligible });
  const metrics = new ProxyMetrics({ defaultMetrics: false });
  const srv = startHealthzServer({ bindAddress: '127.0.0.1:0', state, counters: metrics });
  assert.ok(srv);
  t.after(() => srv.close());
  const { port } = await srv.ready;
  const get = (p: string) => fetch(`http://127.0.0.1:${port}${p}`);

  state.updated('IPv4');
  let r = await get('/healthz');
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('content-type'), 'application/json');
  assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(
    await r.text(),
    '{"lastUpdated":"2026-12-01T10:00:00Z","currentTime":"2026-12-01T10:00:00Z","nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":"2026-12-01T10:00:00Z","healthy":true}}}',
  );

  state.queuedUpdate('IPv4');
  clock.advance(60_000);
  r = await get('/livez');
  assert.equal(r.status, 503);
  assert.equal(((await r.json()) as { healthy: boolean }).healthy, false);
  state.updated('IPv4');
  eligible = false;
  r = await get('/healthz');
  assert.equal(r.status, 503);
  assert.equal(((await r.json()) as { nodeEligible: boolean }).nodeEligible, false);
  r = await get('/livez');
  assert.equal(r.status, 200);
  await r.text();
  r = await get('/other');
  assert.equal(r.status, 404);
  await r.text();

  const text = (await metrics.render()).body;
  assert.match(text, /^kubeproxy_proxy_healthz_total\{code="200"\} 1$/m);
  assert.match(text, /^kubeproxy_proxy_healthz_total\{code="503"\} 1$/m);
  assert.match(text, /^kubeproxy_proxy_livez_total\{code="503"\} 1$/m);
  assert.match(text, /^kubeproxy_proxy_livez_total\{code="200"\} 1$/m);
});

test('empty bind address disables the healthz server', () => {
  const state = new ProxyHealthState({ clock: new FakeClock(), healthTimeout: 1 });
  assert.equal(startHealthzServer({ bindAddress: '', state }), null);
});
