// /statusz and /flagz over real HTTP on the metrics server: upstream's text
// layout and structured objects, content negotiation (406 included), our
// ?format=json and the HTML page (escaping, CSP), and the gates leaving the
// paths out (404).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { ProxyMetrics } from '../metrics.js';
import { startMetricsServer } from '../metricsserver.js';
import type { StatusDoc } from '../../engine/statusview.js';
import { negotiate } from './negotiate.js';
import { flagzText } from './flagz.js';
import { statuszText, unixDate, uptimeText } from './statusz.js';
import { renderStatusPage } from './page.js';

const DOC: StatusDoc = {
  mode: 'iptables',
  version: '0.1.0',
  startTime: '2026-01-02T03:04:05.678Z',
  uptimeSeconds: 3725,
  now: '2026-01-02T04:06:10.678Z',
  node: { name: 'node1', zone: 'zone-a', ips: { IPv4: '192.168.77.11' }, podCIDRs: ['10.244.1.0/24'] },
  initialized: true,
  families: [
    {
      family: 'IPv4',
      lastSync: { time: '2026-01-02T04:06:00.000Z', durationSeconds: 0.0123, full: false },
      lastError: { time: '2026-01-02T04:00:00.000Z', message: 'iptables-restore: <line 3> failed' },
      failuresSinceSuccess: 0,
      servicePorts: 1,
      repairs: 2,
      lastRepair: {
        time: '2026-01-02T04:05:00.000Z',
        reason: 'rules_changed',
        detail: 'delete rule <b>',
        seconds: 0.25,
      },
    },
  ],
  servicePorts: [
    {
      servicePort: 'default/web:http',
      namespace: 'default',
      name: 'web',
      port: 'http',
      family: 'IPv4',
      protocol: 'TCP',
      addresses: [{ kind: 'ClusterIP', address: '10.96.0.10:80', traffic: 'internal' }],
      traffic: [
        {
          traffic: 'internal',
          policy: 'Cluster',
          verdict: 'forward',
          endpoints: ['10.244.1.2:8080'],
          detail: 'forwarded to 1 endpoint',
        },
      ],
      sessionAffinitySeconds: 0,
      loadBalancerSourceRanges: [],
      topology: '',
      endpoints: [
        {
          endpoint: '10.244.1.2:8080',
          node: 'node1',
          zone: '',
          local: true,
          ready: true,
          serving: true,
          terminating: false,
          usedFor: ['internal'],
          skipped: [],
        },
        {
          endpoint: '10.244.2.9:8080',
          node: '<script>alert(1)</script>',
          zone: '',
          local: false,
          ready: false,
          serving: false,
          terminating: false,
          usedFor: [],
          skipped: [{ traffic: 'internal', reason: 'not-ready', text: 'not ready', detail: 'not ready' }],
        },
      ],
    },
  ],
};

async function server(t: { after(fn: () => unknown): void }, zpages: { statusz?: boolean; flagz?: boolean }) {
  const srv = startMetricsServer({
    bindAddress: '127.0.0.1:0',
    metrics: new ProxyMetrics({ defaultMetrics: false }),
    proxyMode: 'iptables',
    config: {},
    ...(zpages.statusz ? { statusz: () => DOC } : {}),
    ...(zpages.flagz ? { flagz: { 'proxy-mode': 'iptables', 'cluster-cidr': '10.244.0.0/16' } } : {}),
  });
  assert.ok(srv);
  t.after(() => srv.close());
  const { port } = await srv.ready;
  return (p: string, accept?: string) =>
    fetch(`http://127.0.0.1:${port}${p}`, { headers: accept === undefined ? {} : { accept } });
}

test('Accept negotiation follows upstream zpages, plus HTML for browsers', () => {
  assert.equal(negotiate(undefined, 'Statusz', true), 'text');
  assert.equal(negotiate('*/*', 'Statusz', true), 'text');
  assert.equal(negotiate('text/plain; charset=UTF-8', 'Statusz', true), 'text');
  assert.equal(negotiate('text/plain; charset=latin1', 'Statusz', true), null);
  assert.equal(negotiate('application/json', 'Statusz', true), null);
  assert.equal(negotiate('application/json;v=v1beta1;g=config.k8s.io;as=Statusz', 'Statusz', true), 'structured');
  assert.equal(negotiate('application/json;v=v1beta1;g=config.k8s.io;as=Statusz', 'Flagz', false), null);
  const browser = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
  assert.equal(negotiate(browser, 'Statusz', true), 'html');
  assert.equal(negotiate(browser, 'Flagz', false), 'text');
  assert.equal(negotiate('text/html;q=0.5, text/plain', 'Statusz', true), 'text');
});

test('Go UnixDate and uptime as upstream prints them', () => {
  assert.equal(unixDate(Date.UTC(2024, 9, 6, 21, 3, 43)), 'Sun Oct  6 21:03:43 UTC 2024');
  assert.equal(uptimeText(3725), '1 hr 02 min 05 sec');
});

test('/statusz: text, structured, ?format=json, HTML with escaping and a CSP allowing only its own script', async (t) => {
  const get = await server(t, { statusz: true });
  let r = await get('/statusz');
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('content-type'), 'text/plain; charset=utf-8');
  const text = await r.text();
  assert.match(text, /^\nkube-proxy statusz\nWarning: This endpoint is not meant to be machine parseable/);
  assert.match(text, /^Started(:|: |=| ) Fri Jan {2}2 03:04:05 UTC 2026$/m);
  assert.match(text, /^Up(:|: |=| ) 1 hr 02 min 05 sec$/m);
  assert.match(text, /^Binary version(:|: |=| ) 0\.1\.0$/m);
  assert.match(text, /^Proxy mode(:|: |=| ) iptables$/m);
  assert.match(text, /^IPv4 last sync(:|: |=| ) 2026-01-02T04:06:00.000Z \(partial, 0.012s, 1 service ports\)$/m);
  assert.match(text, /^IPv4 last error(:|: |=| ) 2026-01-02T04:00:00.000Z iptables-restore: <line 3> failed$/m);
  assert.match(
    text,
    /^IPv4 repairs(:|: |=| ) 2, last 2026-01-02T04:05:00.000Z after 0.250s \(rules_changed: delete rule <b>\)$/m,
  );

  r = await get('/statusz', 'application/json;v=v1beta1;g=config.k8s.io;as=Statusz');
  assert.equal(r.headers.get('content-type'), 'application/json;v=v1beta1;g=config.k8s.io;as=Statusz');
  assert.deepEqual(await r.json(), {
    kind: 'Statusz',
    apiVersion: 'config.k8s.io/v1beta1',
    metadata: { name: 'kube-proxy' },
    startTime: '2026-01-02T03:04:05Z',
    uptimeSeconds: 3725,
    binaryVersion: '0.1.0',
  });
  r = await get('/statusz', 'application/json');
  assert.equal(r.status, 406);
  await r.text();

  r = await get('/statusz?format=json');
  const full = (await r.json()) as { kind: string; proxy: StatusDoc };
  assert.equal(full.kind, 'Statusz');
  assert.deepEqual(full.proxy, DOC);

  r = await get('/statusz?q=web', 'text/html,*/*;q=0.8');
  assert.equal(r.headers.get('content-type'), 'text/html; charset=utf-8');
  const csp = r.headers.get('content-security-policy') ?? '';
  const html = await r.text();
  assert.ok(!html.includes('<script>alert(1)</script>'), 'API data is escaped');
  assert.ok(html.includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
  assert.match(html, /<tr class="svc" data-service-port="default\/web:http" data-family="IPv4"/);
  assert.match(
    html,
    /<td class="repairs">2, last 2026-01-02T04:05:00.000Z after 250 ms: rules_changed \(delete rule &lt;b&gt;\)<\/td>/,
  );
  assert.match(html, /<li class="ep skipped" data-endpoint="10.244.2.9:8080" data-reason="not-ready"/);
  assert.match(html, /id="search"[^>]*value="web"/);
  const script = /<script>([\s\S]*?)<\/script>/.exec(html)![1]!;
  const hash = createHash('sha256').update(script).digest('base64');
  assert.ok(csp.startsWith("default-src 'none';"), csp);
  assert.ok(csp.includes(`script-src 'sha256-${hash}'`), csp);
});

test('/flagz: sorted text with upstream header, structured object; both 404 when gated off', async (t) => {
  assert.equal(
    flagzText({ b: '2', a: '1' }, '='),
    '\nkube-proxy flags\nWarning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.\n\na=1\nb=2\n',
  );
  const get = await server(t, { flagz: true });
  let r = await get('/flagz');
  const text = await r.text();
  assert.match(text, /\n\ncluster-cidr(:|: |=| )10\.244\.0\.0\/16\nproxy-mode(:|: |=| )iptables\n$/);
  r = await get('/flagz', 'application/json;v=v1beta1;g=config.k8s.io;as=Flagz');
  assert.deepEqual(await r.json(), {
    kind: 'Flagz',
    apiVersion: 'config.k8s.io/v1beta1',
    metadata: { name: 'kube-proxy' },
    flags: { 'proxy-mode': 'iptables', 'cluster-cidr': '10.244.0.0/16' },
  });
  r = await get('/flagz?format=json');
  assert.equal(((await r.json()) as { kind: string }).kind, 'Flagz');
  r = await get('/statusz');
  assert.equal(r.status, 404, '/statusz is off when ComponentStatusz is');
  await r.text();

  const off = await server(t, {});
  r = await off('/flagz');
  assert.equal(r.status, 404);
  await r.text();
});

test("/statusz text and page: each family's canary, and a blind one (no route to its ClusterIP) said as such", () => {
  const canary = {
    service: '[100::a9fe:fffd]:10257',
    endpoint: '[fd00:77::12]:40000',
    healthy: true,
    reason: '',
    since: null,
    consecutiveFailures: 0,
    probes: 0,
    failures: 0,
    discarded: 4,
    noRoute: true,
    lastFailure: null,
  };
  const v4 = { ...DOC.families[0]!, canary: { ...canary, service: '169.254.255.253:10257', noRoute: false } };
  const v6 = { ...DOC.families[0]!, family: 'IPv6' as const, canary };
  const doc: StatusDoc = { ...DOC, families: [{ ...v4, canary: { ...v4.canary, probes: 7 } }, v6] };
  const text = statuszText(doc, ':');
  assert.match(text, /^IPv4 datapath canary: healthy \(7 probes, 0 failed\)$/m);
  assert.match(
    text,
    /^IPv6 datapath canary: blind: no route from this node to \[100::a9fe:fffd\]:10257, probes not counted$/m,
  );
  assert.match(renderStatusPage(doc, ''), /blind: no route from this node to \[100::a9fe:fffd\]:10257/);
  // Failing wins over blind: the route went away after the canary had already failed.
  const failing = { ...canary, healthy: false, since: '2026-01-02T04:00:00.000Z', reason: '3 probes in a row failed' };
  const text2 = statuszText({ ...DOC, families: [{ ...v6, canary: failing }] }, ':');
  assert.match(text2, /^IPv6 datapath canary: failing since 2026-01-02T04:00:00.000Z: 3 probes in a row failed$/m);
});
