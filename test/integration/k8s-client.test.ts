// The client against the test API server over real HTTPS: the client-side
// rate limit (clientConnection.qps/burst) with events on their own bucket,
// event posting (events.k8s.io/v1), JSON only (the server refuses clients
// that accept only protobuf), the contentType setting, and paginated lists.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { hasCode } from '../../src/core/errors.js';
import { checkContentType } from '../../src/platform/k8s/client.js';
import { ApiStatusError } from '../../src/platform/k8s/transport.js';
import { FakeClock } from '../support/fakeclock.js';
import { node, svc } from '../apiserver/fixtures.js';
import { clientFor } from '../apiserver/kubeconfig.js';
import { TestApiServer } from '../apiserver/server.js';
import { waitFor } from '../apiserver/wait.js';

const never = new AbortController().signal;

function event(reason: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    metadata: { generateName: 'node-a.', namespace: 'default' },
    eventTime: '2026-12-01T00:00:00.000000Z',
    reportingController: 'kube-proxy',
    reportingInstance: 'kube-proxy-node-a',
    action: 'StartKubeProxy',
    reason,
    type: 'Normal',
    regarding: { kind: 'Node', name: 'node-a' },
    note: 'Starting kube-proxy.',
    ...extra,
  };
}

describe('KubeClient against the test API server', () => {
  let server: TestApiServer;
  before(async () => {
    server = new TestApiServer();
    await server.start();
    server.create('nodes', node('node-a', '192.0.2.1'));
    for (let i = 0; i < 5; i++) server.create('services', svc('paged', `s${i}`, `172.30.3.${i + 1}`));
  });
  after(async () => {
    await server.dispose();
  });

  const listsOfNodes = (): number => server.requests.filter((r) => r.path === '/api/v1/nodes').length;

  it('holds requests beyond the burst until the bucket refills; events have a bucket of their own', async () => {
    const clock = new FakeClock();
    const c = clientFor(server, {}, { qps: 5, burst: 2, clock });
    try {
      const before = listsOfNodes();
      const lists = [0, 1, 2].map(() => c.list('/api/v1/nodes', {}, never));
      await Promise.all(lists.slice(0, 2));
      await c.postEvent(event('Starting'));
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(listsOfNodes(), before + 2, 'the third list waits for a token');
      assert.equal(server.events().length, 1, 'the event did not wait');
      clock.advance(200);
      await lists[2];
      assert.equal(listsOfNodes(), before + 3);
    } finally {
      c.close();
    }
  });

  it('a request whose connection was refused gives its token back; one the server answered does not', async () => {
    const clock = new FakeClock();
    const c = clientFor(server, {}, { qps: 1, burst: 1, clock });
    try {
      await server.stop();
      try {
        // Each refused list took the only token and gave it back: no refill (the fake clock stands
        // still) is needed for the next one.
        for (let i = 0; i < 3; i++)
          await assert.rejects(
            c.list('/api/v1/nodes', {}, never),
            (e: NodeJS.ErrnoException) => e.code === 'ECONNREFUSED',
          );
      } finally {
        await server.start();
      }
      const before = listsOfNodes();
      await c.list('/api/v1/nodes', {}, never);
      assert.equal(listsOfNodes(), before + 1, 'the list after the outage went out at once');
      // That one reached the server: its token is spent, and the next list waits for the refill.
      const next = c.list('/api/v1/nodes', {}, never);
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(listsOfNodes(), before + 1, 'the next list waits for a token');
      clock.advance(1000);
      await next;
      assert.equal(listsOfNodes(), before + 2);
    } finally {
      c.close();
    }
  });

  it('posts events.k8s.io/v1 Events and reports a rejected one as an ApiStatusError', async () => {
    const c = clientFor(server);
    try {
      await c.postEvent(event('FailedToStartServiceHealthcheck', { type: 'Warning', note: 'port 30000 in use' }));
      const got = server.events().find((e) => e['reason'] === 'FailedToStartServiceHealthcheck');
      assert.equal(got?.['note'], 'port 30000 in use');
      assert.equal(server.requests.at(-1)?.path, '/apis/events.k8s.io/v1/namespaces/default/events');
      const err = await c.postEvent(event('Bad', { type: 'Info' })).catch((e: unknown) => e);
      assert.ok(err instanceof ApiStatusError && err.statusCode === 422, String(err));
    } finally {
      c.close();
    }
  });

  it('asks for JSON only, whatever the configured content type', async () => {
    const c = clientFor(server);
    try {
      await c.list('/api/v1/nodes', {}, never);
      await c.listAll('/api/v1/services', {}, never);
      const mine = server.requests.slice(-3);
      assert.ok(
        mine.every((r) => r.accept === 'application/json'),
        JSON.stringify(mine),
      );
    } finally {
      c.close();
    }
    assert.deepEqual(checkContentType(''), {});
    assert.deepEqual(checkContentType('application/json'), {});
    assert.match(checkContentType('application/vnd.kubernetes.protobuf').note ?? '', /talks JSON/);
    let err: unknown;
    try {
      checkContentType('application/yaml');
    } catch (e) {
      err = e;
    }
    assert.ok(hasCode(err, 'KPT_CONFIG_INVALID'));
    assert.match((err as Error).message, /clientConnection.contentType: Unsupported value: "application\/yaml"/);
  });

  it('follows continue tokens to the end of a list', async () => {
    const c = clientFor(server);
    try {
      const seen = server.requests.length;
      const all = await c.listAll('/api/v1/namespaces/paged/services', {}, never, 2);
      assert.deepEqual(
        all.items.map((i) => (i as { metadata: { name: string } }).metadata.name),
        ['s0', 's1', 's2', 's3', 's4'],
      );
      await waitFor(() => server.requests.length >= seen + 3, 'three pages');
      assert.deepEqual(
        server.requests.slice(seen).map((r) => [r.query['limit'], Boolean(r.query['continue'])]),
        [
          ['2', false],
          ['2', true],
          ['2', true],
        ],
      );
    } finally {
      c.close();
    }
  });
});
