// The reflector against a scripted transport and a manual clock: backoff
// schedule, the stall watchdog, relist diffs, odd watch events, shutdown.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../test/support/fakeclock.js';
import type { SourceEvent } from './events.js';
import { MAX_RETRY_AFTER_MS } from './backoff.js';
import { Reflector, type K8sObject, type ReflectorOptions } from './reflector.js';
import { ApiStatusError } from './transport.js';
import { ScriptedTransport } from '../../../test/support/scriptedtransport.js';

const obj = (name: string, rv: string): K8sObject => ({ metadata: { namespace: 'ns', name, resourceVersion: rv } });
const flush = (): Promise<void> => new Promise((r) => setImmediate(r));
/** The waits the reflector chose, in order. */
const backoffDelays = (events: readonly SourceEvent[]): number[] =>
  events.filter((e) => e.type === 'backoff').map((e) => (e as { delayMs: number }).delayMs);

function setup(transport: ScriptedTransport, extra: Partial<ReflectorOptions<K8sObject>> = {}) {
  const clock = new FakeClock();
  const calls: string[] = [];
  const events: SourceEvent[] = [];
  const id = (o: K8sObject): string => `${o.metadata.name}@${o.metadata.resourceVersion}`;
  const reflector = new Reflector<K8sObject>({
    resource: 'things',
    path: '/api/v1/things',
    transport,
    clock,
    backoff: { initialMs: 20, maxMs: 100, factor: 2 },
    watchTimeoutSeconds: 60,
    sink: {
      add: (o) => calls.push(`add ${id(o)}`),
      update: (a, b) => calls.push(`update ${id(a)}->${id(b)}`),
      delete: (o) => calls.push(`delete ${id(o)}`),
      synced: () => calls.push('synced'),
    },
    onEvent: (e) => events.push(e),
    ...extra,
  });
  const ac = new AbortController();
  const done = reflector.run(ac.signal);
  return { clock, calls, events, reflector, ac, done };
}

describe('Reflector', () => {
  it('backs off exponentially up to the maximum between failed lists', async () => {
    const t = new ScriptedTransport();
    t.lists = [1, 2, 3, 4, 5].map(() => new Error('connect ECONNREFUSED'));
    t.lists.push({ resourceVersion: '7', items: [obj('a', '5')] });
    const { clock, calls, events, ac, done } = setup(t);
    for (const delay of [20, 40, 80, 100, 100]) {
      await flush();
      const attempts = t.listCalls;
      clock.advance(delay - 1);
      await flush();
      assert.equal(t.listCalls, attempts, `no retry before ${delay} ms`);
      clock.advance(1);
      await flush();
      assert.equal(t.listCalls, attempts + 1, `retry after ${delay} ms`);
    }
    assert.deepEqual(backoffDelays(events), [20, 40, 80, 100, 100]);
    assert.deepEqual(calls, ['add a@5', 'synced']);
    await flush();
    assert.equal(t.watches[0]?.query.resourceVersion, '7');
    ac.abort();
    await done;
  });

  it('treats a watch that outlives its timeout as stalled and resumes from the same version', async () => {
    const t = new ScriptedTransport();
    t.lists = [{ resourceVersion: '10', items: [] }];
    const { clock, events, ac, done } = setup(t);
    await flush();
    const w = t.watches[0]!;
    w.open();
    w.send('BOOKMARK', { metadata: { resourceVersion: '12' } });
    clock.advance(60_000 + 29_999);
    assert.equal(w.aborted(), false);
    clock.advance(1);
    assert.equal(w.aborted(), true);
    await flush();
    assert.ok(events.some((e) => e.type === 'error' && e.error.includes('stalled')));
    clock.advance(20);
    await flush();
    assert.equal(t.watches.length, 2);
    assert.equal(t.watches[1]!.query.resourceVersion, '12');
    assert.equal(t.listCalls, 1);
    ac.abort();
    await done;
  });

  it('relists on a 410 ERROR event and delivers the diff, with synced last', async () => {
    const t = new ScriptedTransport();
    t.lists = [
      { resourceVersion: '10', items: [obj('a', '1'), obj('b', '2'), obj('c', '3')] },
      { resourceVersion: '20', items: [obj('a', '1'), obj('b', '15'), obj('d', '16')] },
    ];
    const { calls, events, ac, done } = setup(t);
    await flush();
    t.watches[0]!.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' });
    await flush();
    await flush();
    assert.deepEqual(calls, [
      'add a@1',
      'add b@2',
      'add c@3',
      'synced',
      'update b@2->b@15',
      'add d@16',
      'delete c@3',
      'synced',
    ]);
    assert.ok(events.some((e) => e.type === 'expired'));
    assert.equal(t.watches[1]!.query.resourceVersion, '20');
    ac.abort();
    await done;
  });

  it('relists on an HTTP 410 from the watch request too', async () => {
    const t = new ScriptedTransport();
    t.lists = [
      { resourceVersion: '10', items: [] },
      { resourceVersion: '30', items: [obj('z', '29')] },
    ];
    const { calls, ac, done } = setup(t);
    await flush();
    t.watches[0]!.fail(new ApiStatusError(410, 'Expired', 'gone'));
    await flush();
    await flush();
    assert.deepEqual(calls, ['synced', 'add z@29', 'synced']);
    ac.abort();
    await done;
  });

  it('maps watch events onto the local copy (MODIFIED of unknown = add, DELETED of unknown = nothing)', async () => {
    const t = new ScriptedTransport();
    t.lists = [{ resourceVersion: '10', items: [obj('a', '1')] }];
    const { calls, events, reflector, ac, done } = setup(t);
    await flush();
    const w = t.watches[0]!;
    w.send('MODIFIED', obj('b', '11'));
    w.send('ADDED', obj('a', '12'));
    w.send('DELETED', obj('ghost', '13'));
    w.send('DELETED', obj('b', '14'));
    w.send('ADDED', 'not an object');
    assert.deepEqual(calls.slice(2), ['add b@11', 'update a@1->a@12', 'delete b@14']);
    assert.deepEqual(
      reflector.snapshot().map((o) => o.metadata.name),
      ['a'],
    );
    assert.equal(events.filter((e) => e.type === 'skipped').length, 1);
    assert.equal(reflector.resourceVersion, '14');
    ac.abort();
    await done;
  });

  it('resumes a cleanly closed watch at once, and stops promptly when aborted during a backoff', async () => {
    const t = new ScriptedTransport();
    t.lists = [{ resourceVersion: '10', items: [] }];
    const { events, ac, done } = setup(t);
    await flush();
    t.watches[0]!.send('BOOKMARK', { metadata: { resourceVersion: '11' } });
    t.watches[0]!.end();
    await flush();
    assert.equal(t.watches.length, 2, 'resumed without waiting');
    assert.equal(t.watches[1]!.query.resourceVersion, '11');
    t.watches[1]!.fail(new Error('socket hang up'));
    await flush();
    assert.equal(events.at(-1)?.type, 'backoff');
    ac.abort();
    await done;
    assert.equal(events.at(-1)?.type, 'stopped');
  });

  it('lists in pages of pageSize, following continue tokens, and delivers the diff once all pages are in', async () => {
    const t = new ScriptedTransport();
    t.lists = [
      { resourceVersion: '30', items: [obj('a', '1'), obj('b', '2')], continue: 'tok1' },
      { resourceVersion: '30', items: [obj('c', '3')] },
    ];
    const { calls, ac, done } = setup(t, { pageSize: 2 });
    await flush();
    await flush();
    assert.deepEqual(
      t.listQueries.map((q) => [q.limit, q.continue]),
      [
        ['2', undefined],
        ['2', 'tok1'],
      ],
    );
    assert.deepEqual(calls, ['add a@1', 'add b@2', 'add c@3', 'synced']);
    assert.equal(t.watches[0]!.query.resourceVersion, '30');
    ac.abort();
    await done;
  });

  it('lists as client-go\'s reflector: from 0 first, from the last version without pages after a 410, then from "" in pages', async () => {
    const t = new ScriptedTransport();
    t.lists = [
      { resourceVersion: '10', items: [obj('a', '1')] },
      new ApiStatusError(410, 'Expired', 'too old resource version: 12 (15)'),
      { resourceVersion: '20', items: [obj('a', '15')] },
      { resourceVersion: '30', items: [obj('a', '15'), obj('b', '25')] },
    ];
    const { calls, events, ac, done } = setup(t);
    for (let i = 0; i < 3; i++) await flush();
    t.watches[0]!.open();
    t.watches[0]!.send('MODIFIED', obj('a', '12'));
    t.watches[0]!.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' });
    for (let i = 0; i < 5; i++) await flush();
    assert.equal(t.watches[1]!.query.resourceVersion, '20', 'watching from the consistent list');
    // The watch cache will not serve 20 to a watch after yet another compaction; the relist asks for 20 first.
    t.watches[1]!.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' });
    for (let i = 0; i < 5; i++) await flush();
    assert.deepEqual(
      t.listQueries.map((q) => ({ ...q })),
      [
        { resourceVersion: '0', limit: '500' }, // the watch cache serves it (and ignores the limit)
        { resourceVersion: '12' }, // "not older than" the last version seen, from the watch cache: no pages
        { resourceVersion: '', limit: '500' }, // that version is gone too: a consistent read, in pages
        { resourceVersion: '20' }, // a successful list makes the last version good again
      ],
    );
    assert.deepEqual(calls, [
      'add a@1',
      'synced',
      'update a@1->a@12',
      'update a@12->a@15',
      'synced',
      'add b@25',
      'synced',
    ]);
    assert.ok(!events.some((e) => e.type === 'backoff'), 'a 410 relists at once');
    ac.abort();
    await done;
  });

  it('stops when aborted during a list, without starting the watch', async () => {
    const t = new ScriptedTransport();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const list = t.list.bind(t);
    t.list = async (path, query) => {
      await gate;
      return list(path, query);
    };
    t.lists = [{ resourceVersion: '10', items: [obj('a', '1')] }];
    const { events, ac, done } = setup(t);
    await flush();
    ac.abort();
    release();
    await done;
    assert.equal(t.watches.length, 0);
    assert.equal(events.at(-1)?.type, 'stopped');
  });

  it('resumes at once a quiet watch that lasted a second or more, and backs off one that ended sooner', async () => {
    const t = new ScriptedTransport();
    t.lists = [{ resourceVersion: '10', items: [] }];
    const { clock, events, ac, done } = setup(t);
    for (let i = 0; i < 3; i++) await flush();
    clock.advance(1000);
    t.watches[0]!.end();
    for (let i = 0; i < 3; i++) await flush();
    assert.equal(t.watches.length, 2, 'resumed without a backoff');
    t.watches[1]!.end();
    for (let i = 0; i < 3; i++) await flush();
    assert.equal(t.watches.length, 2);
    assert.deepEqual(backoffDelays(events), [20]);
    ac.abort();
    await done;
  });

  it('keeps listing in pages when the list from 0 came back in pages (a server without a watch cache)', async () => {
    const t = new ScriptedTransport();
    t.lists = [
      { resourceVersion: '10', items: [obj('a', '1')], continue: 'tok1' },
      { resourceVersion: '10', items: [obj('b', '2')] },
      { resourceVersion: '20', items: [obj('a', '1')] },
    ];
    const { ac, done } = setup(t);
    for (let i = 0; i < 3; i++) await flush();
    t.watches[0]!.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' });
    for (let i = 0; i < 5; i++) await flush();
    assert.deepEqual(t.listQueries.at(-1), { resourceVersion: '10', limit: '500' });
    ac.abort();
    await done;
  });

  it('starts the list over when a continue token has expired (410), without a half-list diff', async () => {
    const t = new ScriptedTransport();
    t.lists = [
      { resourceVersion: '30', items: [obj('a', '1')], continue: 'tok1' },
      new ApiStatusError(410, 'Expired', 'continue too old'),
      { resourceVersion: '40', items: [obj('a', '35')], continue: 'tok2' },
      { resourceVersion: '40', items: [obj('d', '36')] },
    ];
    const { calls, events, ac, done } = setup(t, { pageSize: 1 });
    for (let i = 0; i < 5; i++) await flush();
    assert.deepEqual(
      t.listQueries.map((q) => q.continue),
      [undefined, 'tok1', undefined, 'tok2'],
    );
    assert.deepEqual(calls, ['add a@35', 'add d@36', 'synced']);
    assert.ok(events.some((e) => e.type === 'expired'));
    assert.ok(!events.some((e) => e.type === 'backoff'), 'restarted at once');
    ac.abort();
    await done;
  });

  it('hands the sink transformed objects, from lists and watch events alike', async () => {
    const t = new ScriptedTransport();
    t.lists = [
      { resourceVersion: '10', items: [{ metadata: { name: 'a', resourceVersion: '1', managedFields: [1] } }] },
    ];
    const seen: unknown[] = [];
    const { ac, done } = setup(t, {
      transform: (o) => ({
        metadata: {
          name: (o.metadata as K8sObject['metadata']).name,
          resourceVersion: (o.metadata as K8sObject['metadata']).resourceVersion,
        },
      }),
      sink: { add: (o) => seen.push(o), update: (_a, b) => seen.push(b), delete: () => {}, synced: () => {} },
    });
    await flush();
    t.watches[0]!.send('MODIFIED', { metadata: { name: 'a', resourceVersion: '11', managedFields: [2] }, spec: {} });
    assert.deepEqual(seen, [
      { metadata: { name: 'a', resourceVersion: '1' } },
      { metadata: { name: 'a', resourceVersion: '11' } },
    ]);
    ac.abort();
    await done;
  });

  it("keeps only what keep() returns, and hands that form to update() and to a relist's delete() as the old object", async () => {
    const t = new ScriptedTransport();
    const full = (name: string, rv: string) => ({ ...obj(name, rv), spec: { big: name } });
    t.lists = [
      { resourceVersion: '10', items: [full('a', '1'), full('b', '2')] },
      { resourceVersion: '20', items: [full('a', '12')] },
    ];
    const seen: Array<[string, unknown]> = [];
    const { reflector, ac, done } = setup(t, {
      keep: (o) => ({ metadata: o.metadata }),
      sink: {
        add: (o) => seen.push(['add', o]),
        update: (a, b) => seen.push(['update', a], ['to', b]),
        delete: (o) => seen.push(['delete', o]),
        synced: () => {},
      },
    });
    await flush();
    assert.deepEqual(seen, [
      ['add', full('a', '1')],
      ['add', full('b', '2')],
    ]);
    assert.deepEqual(reflector.snapshot(), [obj('a', '1'), obj('b', '2')]);
    t.watches[0]!.send('MODIFIED', full('a', '11'));
    assert.deepEqual(seen.slice(2), [
      ['update', obj('a', '1')],
      ['to', full('a', '11')],
    ]);
    t.watches[0]!.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' });
    await flush();
    await flush();
    assert.deepEqual(seen.slice(4), [
      ['update', obj('a', '11')],
      ['to', full('a', '12')],
      ['delete', obj('b', '2')],
    ]);
    assert.deepEqual(reflector.snapshot(), [obj('a', '12')]);
    ac.abort();
    await done;
  });

  it('refuses keep together with a resync period (a kept copy cannot be re-delivered)', () => {
    assert.throws(
      () =>
        new Reflector<K8sObject>({
          resource: 'things',
          path: '/api/v1/things',
          transport: new ScriptedTransport(),
          clock: new FakeClock(),
          backoff: { initialMs: 20, maxMs: 100 },
          watchTimeoutSeconds: 60,
          sink: { add: () => {}, update: () => {}, delete: () => {}, synced: () => {} },
          keep: (o) => o,
          resyncMs: 1000,
        }),
      /keep and resyncMs/,
    );
  });

  it('re-delivers every cached object as an update to itself each resync period, once listed', async () => {
    const t = new ScriptedTransport();
    t.lists = [new Error('down'), { resourceVersion: '10', items: [obj('a', '1'), obj('b', '2')] }];
    const { clock, calls, events, ac, done } = setup(t, { resyncMs: 1000 });
    await flush();
    clock.advance(20); // the backoff, also the first resync would be due before the list: nothing to resync
    await flush();
    assert.deepEqual(calls, ['add a@1', 'add b@2', 'synced']);
    clock.advance(980);
    assert.deepEqual(calls.slice(3), ['update a@1->a@1', 'update b@2->b@2']);
    clock.advance(1000);
    assert.equal(calls.length, 7);
    assert.equal(events.filter((e) => e.type === 'resynced').length, 2);
    ac.abort();
    await done;
    clock.advance(5000);
    assert.equal(calls.length, 7, 'no resync after stop');
  });

  it('starts the backoff steps over when the last backoff began more than resetMs ago', async () => {
    const t = new ScriptedTransport();
    t.lists = [{ resourceVersion: '1', items: [] }];
    const { clock, events, ac, done } = setup(t, { backoff: { initialMs: 20, maxMs: 100, factor: 2, resetMs: 1000 } });
    const delays = (): number[] => backoffDelays(events);
    const failWatch = async (): Promise<void> => {
      await flush();
      t.watches.at(-1)!.fail(new Error('read ETIMEDOUT'));
      await flush();
    };
    // One outage: three failed watches in a row climb the steps.
    for (const wait of [20, 40, 80]) {
      await failWatch();
      clock.advance(wait);
    }
    assert.deepEqual(delays(), [20, 40, 80]);
    // The server answers the next watch: the outage is over, so its failure 900 ms later (no event yet)
    // starts again at initialMs ...
    await flush();
    t.watches.at(-1)!.open();
    clock.advance(900); // 980 ms after the last backoff began
    await failWatch();
    assert.deepEqual(delays(), [20, 40, 80, 20], 'a watch the server answered ends the count');
    // ... but that watch was a very short one, so the next answered watch does not end the count; it
    // stays open with no events (a quiet cluster) for longer than resetMs, and the next outage starts
    // again at initialMs anyway, not at the step after the last.
    clock.advance(20);
    await flush();
    t.watches.at(-1)!.open();
    clock.advance(1001);
    await failWatch();
    assert.deepEqual(delays(), [20, 40, 80, 20, 20]);
    ac.abort();
    await done;
  });

  it('an outage right after another starts from the first step: the watch the server answered in between ended the count', async () => {
    // As in an API-server restart just after an outage: the watches reconnect (answered), and the server
    // goes away again a moment later, closing them before any event.
    const t = new ScriptedTransport();
    t.lists = [{ resourceVersion: '1', items: [] }];
    const { clock, events, ac, done } = setup(t, { backoff: { initialMs: 20, maxMs: 1000, factor: 2 } });
    const delays = (): number[] => backoffDelays(events);
    for (const wait of [20, 40, 80, 160, 320]) {
      await flush();
      t.watches.at(-1)!.fail(new Error('connect ECONNREFUSED'));
      await flush();
      clock.advance(wait);
    }
    await flush();
    t.watches.at(-1)!.open();
    clock.advance(130);
    t.watches.at(-1)!.end();
    await flush();
    assert.deepEqual(delays(), [20, 40, 80, 160, 320, 20], 'not 640: the first outage is over');
    ac.abort();
    await done;
  });

  it('a server that answers watches and closes them at once is asked less and less often', async () => {
    const t = new ScriptedTransport();
    t.lists = [{ resourceVersion: '1', items: [] }];
    const { clock, events, ac, done } = setup(t, { backoff: { initialMs: 20, maxMs: 1000, factor: 2 } });
    const delays = (): number[] => backoffDelays(events);
    for (const wait of [20, 40, 80, 160]) {
      await flush();
      t.watches.at(-1)!.open();
      clock.advance(10);
      t.watches.at(-1)!.end();
      await flush();
      clock.advance(wait);
    }
    // Each opened watch would end an outage's count, but not after a very short one.
    assert.deepEqual(delays(), [20, 40, 80, 160]);
    ac.abort();
    await done;
  });

  it('jitters the backoff, and ends it early when the transport reports the server reachable again', async () => {
    const t = new ScriptedTransport();
    let release: () => void = () => {};
    t.untilReachable = (signal) =>
      new Promise<void>((resolve) => {
        release = resolve;
        signal.addEventListener('abort', () => resolve());
      });
    t.lists = [
      new Error('connect ECONNREFUSED'),
      new Error('connect ECONNREFUSED'),
      { resourceVersion: '5', items: [] },
    ];
    const { events, ac, done } = setup(t, {
      backoff: { initialMs: 1000, maxMs: 30_000, factor: 2, jitter: 0.5 },
      random: () => 1,
    });
    await flush();
    assert.deepEqual(backoffDelays(events), [500]);
    release();
    await flush();
    assert.equal(t.listCalls, 2, 'retried before the backoff ran out');
    assert.ok(events.some((e) => e.type === 'reachable'));
    assert.deepEqual(backoffDelays(events), [500, 1000]);
    release();
    await flush();
    await flush();
    assert.equal(t.listCalls, 3);
    assert.ok(events.some((e) => e.type === 'listed'));
    ac.abort();
    await done;
  });

  it('waits at least the Retry-After a server sent, and the reachability shortcut does not cut it short', async () => {
    const t = new ScriptedTransport();
    let reachableCalls = 0;
    t.untilReachable = () => {
      reachableCalls++;
      return Promise.resolve();
    };
    t.lists = [
      new ApiStatusError(429, 'TooManyRequests', 'slow down', 7),
      new ApiStatusError(500, 'InternalError', 'oops', 3600),
      { resourceVersion: '5', items: [] },
    ];
    const { clock, events, ac, done } = setup(t, { backoff: { initialMs: 200, maxMs: 30_000, factor: 2 } });
    await flush();
    const backoffs = (): number[] => backoffDelays(events);
    assert.deepEqual(backoffs(), [7000], 'the backoff (200 ms) is raised to Retry-After');
    const err = events.find((e) => e.type === 'error') as { retryAfterSeconds?: number };
    assert.equal(err.retryAfterSeconds, 7);
    clock.advance(6999);
    await flush();
    assert.equal(t.listCalls, 1, 'not retried before Retry-After ran out');
    assert.equal(reachableCalls, 0, 'a server that answered is not probed');
    clock.advance(1);
    await flush();
    assert.equal(t.listCalls, 2);
    assert.deepEqual(backoffs(), [7000, MAX_RETRY_AFTER_MS], 'an absurd Retry-After is capped');
    clock.advance(MAX_RETRY_AFTER_MS);
    await flush();
    await flush();
    assert.equal(t.listCalls, 3);
    assert.ok(events.some((e) => e.type === 'listed'));
    ac.abort();
    await done;
  });

  it('takes Retry-After from a watch ERROR event Status (details.retryAfterSeconds)', async () => {
    const t = new ScriptedTransport();
    t.lists = [{ resourceVersion: '5', items: [] }];
    const { clock, events, ac, done } = setup(t, { backoff: { initialMs: 200, maxMs: 30_000, factor: 2 } });
    await flush();
    t.watches[0]!.open();
    t.watches[0]!.send('ERROR', {
      kind: 'Status',
      code: 429,
      reason: 'TooManyRequests',
      message: 'too many',
      details: { retryAfterSeconds: 2 },
    });
    await flush();
    const backoff = events.find((e) => e.type === 'backoff') as { delayMs: number };
    assert.equal(backoff.delayMs, 2000);
    clock.advance(1999);
    await flush();
    assert.equal(t.watches.length, 1);
    clock.advance(1);
    await flush();
    assert.equal(t.watches.length, 2, 'watched again after Retry-After');
    ac.abort();
    await done;
  });
});
