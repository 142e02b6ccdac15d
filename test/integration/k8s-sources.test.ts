// The Kubernetes sources against the test API server over real HTTPS with a
// token: initial list then watch, server-side selectors, auth failure, an API
// server outage (state kept, changes picked up on reconnect) and a forced 410
// (relist delivered as a diff).

import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { KubeClient } from '../../src/platform/k8s/client.js';
import type { ClientConfig } from '../../src/platform/k8s/kubeconfig.js';
import { startSources } from '../../src/platform/k8s/sources.js';
import { TestApiServer } from '../apiserver/server.js';
import { Recorder } from '../apiserver/recorder.js';
import { node, proxyNameSvc, serviceCIDR, slice, svc } from '../apiserver/fixtures.js';
import { clientFor, kubeConfigFor } from '../apiserver/kubeconfig.js';

/** Clients made by a test; closed after it (their keep-alive sockets would keep the process up). */
const clients: KubeClient[] = [];
function track(c: KubeClient): KubeClient {
  clients.push(c);
  return c;
}
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

const FAST = { initialMs: 20, maxMs: 200, factor: 2 };

interface Running {
  rec: Recorder;
  stop: () => Promise<void>;
}

function run(kc: ClientConfig, nodeName = 'node-a'): Running {
  const rec = new Recorder();
  const ac = new AbortController();
  const client = new KubeClient(kc, { qps: -1 });
  const done = startSources({
    client,
    nodeName,
    handlers: rec.handlers,
    signal: ac.signal,
    onEvent: rec.onEvent,
    backoff: FAST,
  });
  return {
    rec,
    stop: async () => {
      ac.abort();
      await done;
      client.close();
    },
  };
}

const allSynced = (rec: Recorder) => (): boolean =>
  ['service synced', 'slice synced', 'node synced'].every((s) => rec.calls.includes(s)) && rec.cidrs !== undefined;

/** Requests the server saw for one collection path (lists without watch, or watches). */
function requestsTo(server: TestApiServer, path: string, watch: boolean): Array<Readonly<Record<string, string>>> {
  return server.requests.filter((r) => r.path === path && (r.query.watch === 'true') === watch).map((r) => r.query);
}

describe('k8s sources against the test API server', () => {
  let server: TestApiServer;
  before(async () => {
    server = new TestApiServer({ bookmarkIntervalMs: 100 });
    await server.start();
  });
  after(async () => {
    await server.dispose();
  });

  it('delivers the initial list, then watch events in order', async () => {
    server.create('services', svc('app', 'alpha', '172.30.0.10'));
    server.create('services', svc('app', 'beta', '172.30.0.11'));
    server.create('endpointslices', slice('app', 'alpha-1', 'alpha', ['10.180.0.1']));
    server.create('nodes', node('node-a', '192.0.2.1'));
    server.create('nodes', node('node-b', '192.0.2.2'));
    server.create('servicecidrs', serviceCIDR('kubernetes', ['172.30.0.0/16']));
    const { rec, stop } = run(kubeConfigFor(server));
    try {
      await rec.until(allSynced(rec), 'initial sync');
      assert.deepEqual(rec.only('service'), [
        'service add app/alpha rv=101',
        'service add app/beta rv=102',
        'service synced',
      ]);
      assert.deepEqual(rec.only('slice'), ['slice add app/alpha-1 rv=103', 'slice synced']);
      assert.deepEqual(rec.only('node'), ['node add node-a rv=104', 'node synced'], 'only this node is watched');
      assert.deepEqual(
        rec.cidrs?.map((c) => c.spec?.cidrs),
        [['172.30.0.0/16']],
      );
      await rec.until(() => rec.events.filter((e) => e.type === 'watching').length >= 4, 'four watches');

      const before = rec.calls.length;
      server.create('services', svc('app', 'gamma', '172.30.0.12'));
      const a = server.get('services', 'app', 'alpha');
      server.update('services', {
        ...a,
        spec: { ...(a.spec as object), clusterIP: '172.30.0.10', sessionAffinity: 'ClientIP' },
      });
      server.delete('services', 'app', 'beta');
      server.create('endpointslices', slice('app', 'gamma-1', 'gamma', ['10.180.0.2']));
      server.create('servicecidrs', serviceCIDR('extra', ['172.31.0.0/16']));
      await rec.until(() => rec.calls.length >= before + 5, 'five watch events');
      assert.deepEqual(rec.only('service').slice(3), [
        'service add app/gamma rv=107',
        'service update app/alpha rv=101 -> 108',
        'service delete app/beta rv=109',
      ]);
      assert.deepEqual(rec.only('slice').slice(2), ['slice add app/gamma-1 rv=110']);
      assert.deepEqual(rec.only('cidrs'), ['cidrs kubernetes', 'cidrs extra,kubernetes']);
      for (const q of requestsTo(server, '/api/v1/services', true)) {
        assert.equal(q.labelSelector, '!service.kubernetes.io/service-proxy-name');
        assert.equal(q.fieldSelector, 'spec.clusterIP!=None');
        assert.equal(q.allowWatchBookmarks, 'true');
      }
      assert.ok(requestsTo(server, '/api/v1/nodes', false).every((q) => q.fieldSelector === 'metadata.name=node-a'));
    } finally {
      await stop();
    }
    for (const n of ['alpha', 'gamma']) server.delete('services', 'app', n);
    server.delete('endpointslices', 'app', 'alpha-1');
    server.delete('endpointslices', 'app', 'gamma-1');
    server.delete('servicecidrs', undefined, 'extra');
  });

  it('never delivers proxy-name-labelled or headless Services, nor headless slices', async () => {
    server.create('services', proxyNameSvc('sel', 'claimed', '172.30.1.1'));
    server.create('services', svc('sel', 'headless', 'None'));
    server.create('services', svc('sel', 'plain', '172.30.1.2'));
    server.create('endpointslices', slice('sel', 'headless-1', 'headless', ['10.180.1.1'], { headless: true }));
    const { rec, stop } = run(kubeConfigFor(server));
    try {
      await rec.until(allSynced(rec), 'initial sync');
      await rec.until(() => rec.events.filter((e) => e.type === 'watching').length >= 4, 'four watches');
      server.create('services', proxyNameSvc('sel', 'claimed-2', '172.30.1.3'));
      server.create('services', svc('sel', 'headless-2', 'None'));
      server.create('endpointslices', slice('sel', 'headless-2', 'headless-2', ['10.180.1.2'], { headless: true }));
      // A Service that becomes claimed by another proxy leaves our view (a DELETED event from the server).
      const plain = server.get('services', 'sel', 'plain');
      const claimedRV = server.update('services', {
        ...plain,
        metadata: { ...plain.metadata, labels: { 'service.kubernetes.io/service-proxy-name': 'x' } },
      }).metadata.resourceVersion;
      await rec.until(() => rec.calls.some((c) => c.startsWith('service delete sel/plain')), 'plain to leave');
      const names = rec.calls.filter((c) => c.startsWith('service') || c.startsWith('slice')).join('\n');
      for (const hidden of ['claimed', 'headless'])
        assert.ok(!names.includes(`sel/${hidden}`), `${hidden} must not arrive:\n${names}`);
      assert.deepEqual(
        rec.only('service').filter((c) => c.includes('sel/')),
        ['service add sel/plain rv=' + plain.metadata.resourceVersion, `service delete sel/plain rv=${claimedRV}`],
      );
    } finally {
      await stop();
    }
  });

  it('resumes a watch the server ended at its timeoutSeconds, without relisting', async () => {
    const seen = server.requests.length;
    const rec = new Recorder();
    const ac = new AbortController();
    const done = startSources({
      client: track(clientFor(server)),
      nodeName: 'node-a',
      handlers: rec.handlers,
      signal: ac.signal,
      onEvent: rec.onEvent,
      backoff: FAST,
      watchTimeoutSeconds: 1,
    });
    try {
      const closed = (): number =>
        rec.events.filter((e) => e.type === 'watchClosed' && e.resource === 'services').length;
      await rec.until(() => closed() >= 1, 'the server to end a watch', 10_000);
      server.create('services', svc('timeout', 'late', '172.30.2.1'));
      await rec.until(
        () => rec.calls.some((c) => c.startsWith('service add timeout/late')),
        'an event on the resumed watch',
      );
      assert.equal(rec.events.filter((e) => e.type === 'listed' && e.resource === 'services').length, 1);
      const watches = server.requests
        .slice(seen)
        .filter((r) => r.path === '/api/v1/services' && r.query.watch === 'true');
      assert.ok(watches.length >= 2 && watches.every((r) => r.query.timeoutSeconds === '1'));
    } finally {
      ac.abort();
      await done;
    }
    server.delete('services', 'timeout', 'late');
  });

  it('reports a token the server refuses, and delivers nothing', async () => {
    const { rec, stop } = run(kubeConfigFor(server, { token: 'wrong-token' }));
    try {
      await rec.until(
        () =>
          rec.events.filter((e) => e.type === 'error' && e.statusCode === 401).length >= 4 &&
          rec.events.some((e) => e.type === 'backoff' && e.attempt >= 2),
        '401 errors and backoff',
      );
      assert.deepEqual(rec.calls, []);
      assert.ok(rec.events.every((e) => e.type !== 'listed'));
    } finally {
      await stop();
    }
  });
});

describe('k8s sources: optional resources and misbehaving handlers', () => {
  it('carries on without ServiceCIDRs when the server does not serve them (404)', async () => {
    const server = new TestApiServer({ resources: ['services', 'endpointslices', 'nodes'] });
    await server.start();
    server.create('services', svc('app', 'alpha', '172.30.0.10'));
    const rec = new Recorder();
    const ac = new AbortController();
    const client = clientFor(server);
    const done = startSources({
      client,
      nodeName: 'node-a',
      handlers: rec.handlers,
      signal: ac.signal,
      onEvent: rec.onEvent,
      backoff: { initialMs: 20, maxMs: 100 },
    });
    try {
      await rec.until(
        () =>
          rec.events.some((e) => e.type === 'unavailable' && e.resource === 'servicecidrs') &&
          ['service synced', 'slice synced', 'node synced'].every((s) => rec.calls.includes(s)),
        'sync without servicecidrs',
      );
      assert.equal(rec.cidrs, undefined);
      assert.equal(
        server.requests.filter((r) => r.path.endsWith('/servicecidrs')).length,
        1,
        'asked once, not retried',
      );
    } finally {
      ac.abort();
      await done;
      client.close();
      await server.dispose();
    }
  });

  it('reports a throwing handler and keeps delivering the following events', async () => {
    const server = new TestApiServer();
    await server.start();
    const rec = new Recorder();
    const handlers = {
      ...rec.handlers,
      service: {
        ...rec.handlers.service,
        onServiceAdd: (s: { metadata: { name?: string } }) => {
          if (s.metadata.name === 'boom') throw new Error('handler bug');
          rec.handlers.service.onServiceAdd(s as never);
        },
      },
    };
    const ac = new AbortController();
    const client = clientFor(server);
    const done = startSources({
      client,
      nodeName: 'node-a',
      handlers,
      signal: ac.signal,
      onEvent: rec.onEvent,
      backoff: { initialMs: 20, maxMs: 100 },
    });
    try {
      await rec.until(() => rec.events.filter((e) => e.type === 'watching').length >= 4, 'watches');
      server.create('services', svc('app', 'boom', '172.30.0.20'));
      server.create('services', svc('app', 'fine', '172.30.0.21'));
      await rec.until(() => rec.calls.some((c) => c.startsWith('service add app/fine')), 'the next event');
      assert.ok(rec.events.some((e) => e.type === 'handlerError' && e.error === 'handler bug'));
      assert.equal(rec.events.filter((e) => e.type === 'listed' && e.resource === 'services').length, 1, 'no relist');
    } finally {
      ac.abort();
      await done;
      client.close();
      await server.dispose();
    }
  });
});
