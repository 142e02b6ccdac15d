// The test API server itself: auth, REST verbs and paths, list versions and
// selectors, watch order/history/selector transitions, 410 after compaction,
// bookmarks, timeoutSeconds, stop/restart, unserved resources.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { call, type ClientOptions, WatchStream } from './client.js';
import { node, slice, svc } from './fixtures.js';
import { TestApiServer } from './server.js';
import { waitFor } from './wait.js';

describe('test API server', () => {
  let server: TestApiServer;
  let c: ClientOptions;
  before(async () => {
    server = new TestApiServer({ bookmarkIntervalMs: 30 });
    await server.start();
    c = { url: server.url, ca: server.caCert, token: server.token };
  });
  after(async () => {
    await server.dispose();
  });

  it('answers 401 Unauthorized without a token or with a wrong one, and accepts a client certificate', async () => {
    for (const token of [undefined, 'nope']) {
      const r = await call({ ...c, token }, 'GET', '/api/v1/services');
      assert.equal(r.status, 401);
      assert.equal(r.body.reason, 'Unauthorized');
      assert.equal(r.body.kind, 'Status');
    }
    assert.equal((await call(c, 'GET', '/api/v1/services')).status, 200);
    const cert = server.issueClientCert('system:kube-proxy');
    assert.equal((await call({ ...c, token: undefined, clientCert: cert }, 'GET', '/api/v1/nodes')).status, 200);
  });

  it('accepts rotated tokens and refuses revoked ones, naming the caller in its request log', async () => {
    server.acceptToken('second');
    assert.equal((await call({ ...c, token: 'second' }, 'GET', '/api/v1/nodes')).status, 200);
    assert.equal(server.requests.at(-1)?.user, 'token:second');
    server.revokeToken('second');
    assert.equal((await call({ ...c, token: 'second' }, 'GET', '/api/v1/nodes')).status, 401);
    assert.equal(server.requests.at(-1)?.user, undefined);
  });

  it('speaks JSON only: a client accepting only protobuf gets 406', async () => {
    const proto = await call(
      { ...c, headers: { Accept: 'application/vnd.kubernetes.protobuf' } },
      'GET',
      '/api/v1/nodes',
    );
    assert.equal(proto.status, 406);
    assert.equal(proto.body.reason, 'NotAcceptable');
    const both = { Accept: 'application/vnd.kubernetes.protobuf, application/json' };
    assert.equal((await call({ ...c, headers: both }, 'GET', '/api/v1/nodes')).status, 200);
  });

  it('serves lists in pages from one consistent snapshot, and 410 for a continue token compacted away', async () => {
    const base = '/api/v1/namespaces/paged/services';
    for (let i = 0; i < 5; i++) await call(c, 'POST', base, svc('paged', `s${i}`, `172.30.8.${i + 1}`));
    const first = await call(c, 'GET', `${base}?limit=2`);
    const meta1 = first.body.metadata as { continue?: string; resourceVersion: string; remainingItemCount?: number };
    const names = (r: typeof first): string[] =>
      (r.body.items as Array<{ metadata: { name: string } }>).map((i) => i.metadata.name);
    assert.deepEqual(names(first), ['s0', 's1']);
    assert.equal(meta1.remainingItemCount, 3);
    // Changes after the first page do not show in the following pages.
    await call(c, 'DELETE', `${base}/s3`);
    await call(c, 'POST', base, svc('paged', 's5', '172.30.8.6'));
    const second = await call(c, 'GET', `${base}?limit=2&continue=${meta1.continue}`);
    assert.deepEqual(names(second), ['s2', 's3']);
    const meta2 = second.body.metadata as { continue?: string; resourceVersion: string };
    assert.equal(meta2.resourceVersion, meta1.resourceVersion);
    const third = await call(c, 'GET', `${base}?limit=2&continue=${meta2.continue}`);
    assert.deepEqual(names(third), ['s4']);
    assert.equal((third.body.metadata as { continue?: string }).continue, undefined);
    // Selectors apply to pages too; a fresh list sees the changes.
    assert.deepEqual(names(await call(c, 'GET', `${base}?limit=10&fieldSelector=metadata.name!%3Ds0`)), [
      's1',
      's2',
      's4',
      's5',
    ]);

    server.compact();
    const expired = await call(c, 'GET', `${base}?limit=2&continue=${meta1.continue}`);
    assert.equal(expired.status, 410);
    assert.equal(expired.body.reason, 'Expired');
    assert.equal((await call(c, 'GET', `${base}?limit=2&continue=garbage`)).status, 400);
    for (const n of ['s0', 's1', 's2', 's4', 's5']) await call(c, 'DELETE', `${base}/${n}`);
  });

  it('stores events.k8s.io/v1 Events (generateName completed) and rejects invalid ones with 422', async () => {
    const ev = {
      metadata: { generateName: 'node-a.' },
      eventTime: '2026-12-01T00:00:00.000000Z',
      reportingController: 'kube-proxy',
      reportingInstance: 'kube-proxy-node-a',
      action: 'StartKubeProxy',
      reason: 'Starting',
      type: 'Normal',
      regarding: { kind: 'Node', name: 'node-a' },
      note: 'Starting kube-proxy.',
    };
    const ok = await call(c, 'POST', '/apis/events.k8s.io/v1/namespaces/default/events', ev);
    assert.equal(ok.status, 201);
    assert.match((ok.body.metadata as { name: string }).name, /^node-a\.[0-9a-f]{5}$/);
    assert.deepEqual(
      server.events().map((e) => e['reason']),
      ['Starting'],
    );
    const bad = await call(c, 'POST', '/apis/events.k8s.io/v1/namespaces/default/events', {
      ...ev,
      type: 'Info',
      reportingController: '',
    });
    assert.equal(bad.status, 422);
    assert.match(String(bad.body.message), /reportingController: Required value.*type: Unsupported value: "Info"/);
  });

  it('serves discovery and 404 for unknown paths', async () => {
    assert.equal((await call(c, 'GET', '/version')).body.major, '1');
    const groups = (await call(c, 'GET', '/apis')).body.groups as Array<{ name: string }>;
    assert.deepEqual(groups.map((g) => g.name).sort(), ['discovery.k8s.io', 'events.k8s.io', 'networking.k8s.io']);
    const v1 = (await call(c, 'GET', '/api/v1')).body.resources as Array<{ name: string }>;
    assert.deepEqual(v1.map((r) => r.name).sort(), ['nodes', 'services']);
    assert.equal((await call(c, 'GET', '/api/v1/pods')).status, 404);
    assert.equal((await call(c, 'GET', '/apis/discovery.k8s.io/v1/namespaces/x/endpointslices/a/status')).status, 404);
  });

  it('creates, reads, updates, patches and deletes with one resourceVersion counter', async () => {
    const base = '/api/v1/namespaces/crud/services';
    const created = await call(c, 'POST', base, svc('crud', 'web', '172.30.9.1'));
    assert.equal(created.status, 201);
    const meta = created.body.metadata as { resourceVersion: string; uid: string; namespace: string };
    assert.equal(meta.namespace, 'crud');
    assert.equal(Number(meta.resourceVersion), server.store.resourceVersion);
    assert.ok(meta.uid);
    assert.equal((await call(c, 'POST', base, svc('crud', 'web', '172.30.9.1'))).body.reason, 'AlreadyExists');
    assert.equal((await call(c, 'GET', `${base}/web`)).body.kind, 'Service');

    const stale = {
      ...svc('crud', 'web', '172.30.9.2'),
      metadata: { namespace: 'crud', name: 'web', resourceVersion: '1' },
    };
    const conflict = await call(c, 'PUT', `${base}/web`, stale);
    assert.equal(conflict.status, 409);
    assert.equal(conflict.body.reason, 'Conflict');

    // Status is a subresource: the main resource ignores it, /status changes only it.
    const lb = { loadBalancer: { ingress: [{ ip: '198.51.100.1' }] } };
    const put = await call(c, 'PUT', `${base}/web`, { ...svc('crud', 'web', '172.30.9.2'), status: lb });
    assert.equal((put.body.spec as { clusterIP: string }).clusterIP, '172.30.9.2');
    assert.equal(put.body.status, undefined);
    const st = await call(c, 'PUT', `${base}/web/status`, { ...svc('crud', 'web', '172.30.9.99'), status: lb });
    assert.deepEqual(st.body.status, lb);
    assert.equal((st.body.spec as { clusterIP: string }).clusterIP, '172.30.9.2');

    const patched = await call(
      c,
      'PATCH',
      `${base}/web`,
      { metadata: { labels: { a: '1', b: '2' } } },
      'application/merge-patch+json',
    );
    assert.deepEqual((patched.body.metadata as { labels: object }).labels, { a: '1', b: '2' });
    const unset = await call(
      c,
      'PATCH',
      `${base}/web`,
      { metadata: { labels: { a: null } } },
      'application/merge-patch+json',
    );
    assert.deepEqual((unset.body.metadata as { labels: object }).labels, { b: '2' });
    assert.equal((await call(c, 'PATCH', `${base}/web`, [], 'application/json-patch+json')).status, 415);

    assert.equal((await call(c, 'DELETE', `${base}/web`)).status, 200);
    assert.equal((await call(c, 'GET', `${base}/web`)).status, 404);
    assert.equal((await call(c, 'DELETE', `${base}/web`)).status, 404);
  });

  it('lists with the current resourceVersion and applies namespace, label and field selectors', async () => {
    server.create('services', svc('lst', 'a', '172.30.8.1', { labels: { tier: 'fe' } }));
    server.create('services', svc('lst', 'b', 'None'));
    server.create(
      'services',
      svc('lst2', 'c', '172.30.8.3', { labels: { 'service.kubernetes.io/service-proxy-name': 'x' } }),
    );
    const names = async (path: string): Promise<string[]> => {
      const r = await call(c, 'GET', path);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(
        (r.body.metadata as { resourceVersion: string }).resourceVersion,
        String(server.store.resourceVersion),
      );
      return (r.body.items as Array<{ metadata: { name: string } }>).map((i) => i.metadata.name);
    };
    assert.deepEqual(await names('/api/v1/namespaces/lst/services'), ['a', 'b']);
    assert.deepEqual(
      await names(
        '/api/v1/services?fieldSelector=spec.clusterIP!%3DNone&labelSelector=!service.kubernetes.io/service-proxy-name',
      ),
      ['a'],
    );
    assert.deepEqual(await names('/api/v1/services?labelSelector=tier%20in%20(fe,be)'), ['a']);
    assert.deepEqual(await names('/api/v1/services?fieldSelector=metadata.namespace%3Dlst2'), ['c']);
    assert.equal((await call(c, 'GET', '/api/v1/services?labelSelector=a%20in%20(b')).status, 400);
    assert.equal((await call(c, 'GET', '/api/v1/services?fieldSelector=spec.foo%3Db')).status, 400);
    for (const [ns, n] of [
      ['lst', 'a'],
      ['lst', 'b'],
      ['lst2', 'c'],
    ] as const)
      server.delete('services', ns, n);
  });

  it('watches in commit order, replays history from a version, and turns selector transitions into ADDED/DELETED', async () => {
    const from = server.store.resourceVersion;
    server.create('endpointslices', slice('w', 's1', 'svc', ['10.180.0.1']));
    const live = new WatchStream(
      c,
      `/apis/discovery.k8s.io/v1/namespaces/w/endpointslices?watch=true&resourceVersion=${from}&labelSelector=!service.kubernetes.io/headless`,
    );
    await live.atLeast(1);
    const s1 = server.get('endpointslices', 'w', 's1');
    server.update('endpointslices', { ...s1, endpoints: [] });
    server.update('endpointslices', {
      ...s1,
      metadata: { ...s1.metadata, resourceVersion: undefined, labels: { 'service.kubernetes.io/headless': '' } },
    });
    server.create('endpointslices', slice('other', 's2', 'svc', ['10.180.0.2']));
    server.create('endpointslices', slice('w', 's3', 'svc', ['10.180.0.3']));
    const evs = await live.atLeast(4);
    assert.deepEqual(
      evs.map((e) => `${e.type} ${e.object.metadata.name}`),
      ['ADDED s1', 'MODIFIED s1', 'DELETED s1', 'ADDED s3'],
    );
    const rvs = evs.map((e) => Number(e.object.metadata.resourceVersion));
    assert.deepEqual(
      rvs,
      [...rvs].sort((a, b) => a - b),
    );
    assert.equal(
      evs[2]!.object.metadata.labels?.['service.kubernetes.io/headless'],
      undefined,
      'DELETED carries the last matching state',
    );
    assert.equal(rvs[2], from + 3, "with the event's resourceVersion");
    live.close();

    const fresh = new WatchStream(c, '/apis/discovery.k8s.io/v1/endpointslices?watch=true');
    const initial = await fresh.atLeast(3);
    assert.deepEqual(initial.map((e) => `${e.type} ${e.object.metadata.name}`).sort(), [
      'ADDED s1',
      'ADDED s2',
      'ADDED s3',
    ]);
    fresh.close();
  });

  it('serves a list from resourceVersion 0 in one reply, whatever the limit, as the watch cache does', async () => {
    for (let i = 0; i < 3; i++) server.create('nodes', node(`n-rv0-${i}`, `192.0.2.${60 + i}`));
    const all = (await call(c, 'GET', '/api/v1/nodes')).body as { items: unknown[] };
    const zero = (await call(c, 'GET', '/api/v1/nodes?resourceVersion=0&limit=1')).body as {
      items: unknown[];
      metadata: { continue?: string };
    };
    assert.equal(zero.items.length, all.items.length);
    assert.equal(zero.metadata.continue, undefined);
    const paged = (await call(c, 'GET', '/api/v1/nodes?limit=1')).body as { metadata: { continue?: string } };
    assert.ok(paged.metadata.continue, 'a consistent read keeps its pages');
  });

  it('answers 410 Expired once the history was compacted past the asked version', async () => {
    const old = server.store.resourceVersion;
    server.create('nodes', node('n-410', '192.0.2.9'));
    server.compact();
    const w = new WatchStream(c, `/api/v1/nodes?watch=true&resourceVersion=${old}`);
    await w.ended;
    assert.equal(w.status, 200);
    assert.equal(w.events.length, 1);
    assert.equal(w.events[0]!.type, 'ERROR');
    assert.equal(w.events[0]!.object.code, 410);
    assert.equal(w.events[0]!.object.reason, 'Expired');
    // A list of exactly that version (a limit makes it exact) is gone too...
    assert.equal((await call(c, 'GET', `/api/v1/nodes?resourceVersion=${old}&limit=500`)).status, 410);
    // ...but without a limit the watch cache serves "not older than" it: the current state.
    const notOlder = await call(c, 'GET', `/api/v1/nodes?resourceVersion=${old}`);
    assert.equal(notOlder.status, 200);
    assert.equal(
      (notOlder.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion,
      String(server.store.resourceVersion),
    );
    const ahead = await call(c, 'GET', `/api/v1/nodes?resourceVersion=${server.store.resourceVersion + 5}`);
    assert.equal(ahead.status, 504, 'a version the server has not reached');
    assert.equal((await call(c, 'GET', `/api/v1/nodes?resourceVersion=${server.store.resourceVersion}`)).status, 200);
    const ok = new WatchStream(c, `/api/v1/nodes?watch=true&resourceVersion=${server.store.resourceVersion}`);
    server.delete('nodes', undefined, 'n-410');
    assert.equal((await ok.atLeast(1))[0]!.type, 'DELETED');
    ok.close();
  });

  it('sends BOOKMARKs with the current version only to watches that allow them', async () => {
    const rv = server.store.resourceVersion;
    const quiet = new WatchStream(c, `/api/v1/nodes?watch=true&resourceVersion=${rv}`);
    const marked = new WatchStream(c, `/api/v1/nodes?watch=true&resourceVersion=${rv}&allowWatchBookmarks=true`);
    server.create('services', svc('bm', 'x', '172.30.7.1'));
    const marks = await marked.atLeast(3, 'BOOKMARK');
    assert.equal(marks.at(-1)!.object.metadata.resourceVersion, String(rv + 1));
    assert.equal(marks.at(-1)!.object.kind, 'Node');
    assert.equal(quiet.events.length, 0);
    quiet.close();
    marked.close();
    server.delete('services', 'bm', 'x');
  });

  it('ends a watch after timeoutSeconds', async () => {
    const w = new WatchStream(
      c,
      `/api/v1/nodes?watch=true&resourceVersion=${server.store.resourceVersion}&timeoutSeconds=1`,
    );
    await w.ended;
    assert.equal(w.status, 200);
  });

  it('stop() kills open watches; restart() serves the same store on the same port and CA', async () => {
    const port = new URL(server.url).port;
    const w = new WatchStream(c, `/api/v1/services?watch=true&resourceVersion=${server.store.resourceVersion}`);
    await waitFor(() => server.openWatches === 1, 'the watch to be open');
    await server.stop();
    await w.ended;
    assert.equal(server.openWatches, 0);
    await assert.rejects(call(c, 'GET', '/api/v1/services'), /ECONNREFUSED/);
    server.create('services', svc('rs', 'while-down', '172.30.6.1'));
    await server.restart();
    assert.equal(new URL(server.url).port, port);
    const r = await call(c, 'GET', '/api/v1/namespaces/rs/services/while-down');
    assert.equal(r.status, 200);
  });
});

describe('test API server without ServiceCIDRs', () => {
  it('answers 404 for the resource and leaves its group out of discovery', async () => {
    const server = new TestApiServer({ resources: ['services', 'endpointslices', 'nodes'] });
    await server.start();
    try {
      const c = { url: server.url, ca: server.caCert, token: server.token };
      assert.equal((await call(c, 'GET', '/apis/networking.k8s.io/v1/servicecidrs')).status, 404);
      const groups = (await call(c, 'GET', '/apis')).body.groups as Array<{ name: string }>;
      assert.deepEqual(
        groups.map((g) => g.name),
        ['discovery.k8s.io'],
      );
    } finally {
      await server.dispose();
    }
  });
});
