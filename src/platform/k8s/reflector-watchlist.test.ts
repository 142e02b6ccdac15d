// The reflector's streaming watch-list (client-go's WatchListClient) and its
// relist fallbacks, against a scripted transport and a manual clock: the
// request it sends, the initial events kept apart until the end bookmark
// and delivered as one diff, the stream going on as the watch, and how each
// failure is sorted (again from "", back off, or list at once).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../test/support/fakeclock.js';
import type { SourceEvent } from './events.js';
import { INITIAL_EVENTS_END, Reflector, type K8sObject } from './reflector.js';
import { ApiStatusError } from './transport.js';
import { ScriptedTransport } from '../../../test/support/scriptedtransport.js';

const obj = (name: string, rv: string): K8sObject => ({ metadata: { namespace: 'ns', name, resourceVersion: rv } });
const endBookmark = (rv: string): unknown => ({
  kind: 'Thing',
  metadata: { resourceVersion: rv, annotations: { [INITIAL_EVENTS_END]: 'true' } },
});
const flush = async (): Promise<void> => {
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
};
const tooLarge = (): ApiStatusError =>
  new ApiStatusError(504, 'Timeout', 'Timeout: Too large resource version: 30, current: 25', 1, [
    { reason: 'ResourceVersionTooLarge', message: 'Too large resource version' },
  ]);

function setup(t: ScriptedTransport, watchList = true, firstStateAsItComes = false) {
  const clock = new FakeClock();
  const calls: string[] = [];
  const events: SourceEvent[] = [];
  const id = (o: K8sObject): string => `${o.metadata.name}@${o.metadata.resourceVersion}`;
  const reflector = new Reflector<K8sObject>({
    resource: 'things',
    path: '/api/v1/things',
    transport: t,
    clock,
    backoff: { initialMs: 20, maxMs: 100, factor: 2 },
    watchTimeoutSeconds: 60,
    watchList,
    firstStateAsItComes,
    sink: {
      add: (o) => calls.push(`add ${id(o)}`),
      update: (a, b) => calls.push(`update ${id(a)}->${id(b)}`),
      delete: (o) => calls.push(`delete ${id(o)}`),
      synced: () => calls.push('synced'),
    },
    onEvent: (e) => events.push(e),
  });
  const ac = new AbortController();
  const done = reflector.run(ac.signal);
  const kinds = (): string[] => events.map((e) => e.type);
  return { clock, calls, events, kinds, reflector, stop: () => (ac.abort(), done) };
}

describe('Reflector: watch-list', () => {
  it('asks for the state as a watch, delivers it at the end bookmark as one diff, then watches on the same stream', async () => {
    const t = new ScriptedTransport();
    const { calls, events, reflector, stop } = setup(t);
    await flush();
    const w = t.watches[0]!;
    assert.deepEqual(w.query, {
      watch: 'true',
      sendInitialEvents: 'true',
      resourceVersionMatch: 'NotOlderThan',
      resourceVersion: '',
      allowWatchBookmarks: 'true',
      timeoutSeconds: '60',
    });
    w.open();
    w.send('ADDED', obj('a', '5'));
    w.send('ADDED', obj('b', '6'));
    w.send('BOOKMARK', { metadata: { resourceVersion: '7' } }); // not the end
    w.send('DELETED', obj('b', '8'));
    assert.deepEqual(calls, [], 'nothing before the end bookmark');
    assert.ok(!events.some((e) => e.type === 'watching'));
    w.send('BOOKMARK', endBookmark('9'));
    // An event right behind the bookmark waits until the state is delivered (in chunks, between turns of the loop).
    w.send('MODIFIED', obj('a', '10'));
    await flush();
    assert.deepEqual(calls, ['add a@5', 'synced', 'update a@5->a@10']);
    assert.equal(reflector.resourceVersion, '10');
    const listed = events.find((e) => e.type === 'listed');
    assert.deepEqual(listed, {
      type: 'listed',
      resource: 'things',
      resourceVersion: '9',
      items: 1,
      added: 1,
      updated: 0,
      deleted: 0,
      streamed: true,
    });
    assert.equal(events.at(-1)!.type, 'watching');
    w.send('MODIFIED', obj('a', '11'));
    assert.deepEqual(calls.slice(3), ['update a@10->a@11']);
    assert.equal(t.watches.length, 1);
    assert.equal(t.listQueries.length, 0);
    // The watch ends: resumed as a plain watch from the last version.
    w.end();
    await flush();
    assert.equal(t.watches[1]!.query['sendInitialEvents'], undefined);
    assert.equal(t.watches[1]!.query['resourceVersion'], '11');
    // A 410: the relist is a watch-list from the last version, its state a diff.
    t.watches[1]!.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' });
    await flush();
    const again = t.watches[2]!;
    assert.equal(again.query['sendInitialEvents'], 'true');
    assert.equal(again.query['resourceVersion'], '11');
    again.send('ADDED', obj('a', '11'));
    again.send('ADDED', obj('c', '12'));
    again.send('BOOKMARK', endBookmark('13'));
    await flush();
    assert.deepEqual(calls.slice(4), ['add c@12', 'synced']);
    assert.ok(!events.some((e) => e.type === 'backoff'));
    await stop();
  });

  it('hands a big state to the handlers in chunks, with turns of the event loop between them, events after it in order', async () => {
    const t = new ScriptedTransport();
    const { calls, stop } = setup(t);
    await flush();
    const w = t.watches[0]!;
    w.open();
    for (let i = 0; i < 1000; i++) w.send('ADDED', obj(`o${i}`, String(i + 1)));
    // Something else the loop has to do (a /healthz request, say) becomes ready with the end bookmark.
    setImmediate(() => calls.push('turn'));
    w.send('BOOKMARK', endBookmark('1001'));
    w.send('DELETED', obj('o0', '1002'));
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    const turn = calls.indexOf('turn');
    assert.ok(turn > 0 && turn < calls.indexOf('synced'), `the loop turned during the delivery, at ${turn}`);
    assert.deepEqual(calls.filter((c) => c !== 'turn').slice(-2), ['synced', 'delete o0@1002']);
    assert.equal(calls.filter((c) => c.startsWith('add ')).length, 1000);
    await stop();
  });

  it('firstStateAsItComes: the very first state reaches the sink as it streams, synced() at its end; a relist is one diff', async () => {
    const t = new ScriptedTransport();
    const { calls, events, stop } = setup(t, true, true);
    await flush();
    const w = t.watches[0]!;
    w.open();
    w.send('ADDED', obj('a', '5'));
    w.send('ADDED', obj('b', '6'));
    assert.deepEqual(calls, ['add a@5', 'add b@6'], 'each object as it comes');
    w.send('MODIFIED', obj('a', '7'));
    w.send('DELETED', obj('b', '8'));
    assert.deepEqual(calls.slice(2), ['update a@5->a@7'], 'a delete waits for the end, where the diff finds it');
    w.send('BOOKMARK', endBookmark('9'));
    await flush();
    assert.deepEqual(calls.slice(3), ['delete b@6', 'synced']);
    const listed = events.find((e) => e.type === 'listed') as { added?: number } | undefined;
    assert.equal(listed?.added, 2, 'objects delivered early count as added');
    // A relist (410) streams again: the local copy is not empty, so the state waits for its end as usual.
    w.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' });
    await flush();
    const w2 = t.watches[1]!;
    w2.open();
    w2.send('ADDED', obj('a', '7'));
    w2.send('ADDED', obj('c', '10'));
    assert.deepEqual(calls.slice(5), [], 'nothing before the end bookmark of a relist');
    w2.send('BOOKMARK', endBookmark('11'));
    await flush();
    assert.deepEqual(calls.slice(5), ['add c@10', 'synced']);
    await stop();
  });

  it('falls back to a list at once when the server refuses the stream (422), and watches from the list', async () => {
    const t = new ScriptedTransport();
    t.lists = [{ resourceVersion: '20', items: [obj('a', '3')] }];
    const { calls, events, kinds, stop } = setup(t);
    await flush();
    t.watches[0]!.fail(
      new ApiStatusError(422, 'Invalid', 'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: ...'),
    );
    await flush();
    assert.deepEqual(t.listQueries, [{ resourceVersion: '0', limit: '500' }]);
    assert.deepEqual(calls, ['add a@3', 'synced']);
    assert.deepEqual(events[0], {
      type: 'watchListUnavailable',
      resource: 'things',
      error: 'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: ...',
      statusCode: 422,
    });
    assert.ok(!kinds().includes('backoff') && !kinds().includes('error'));
    assert.equal(t.watches[1]!.query['sendInitialEvents'], undefined);
    assert.equal(t.watches[1]!.query['resourceVersion'], '20');
    await stop();
  });

  it('falls back to a list after a very short watch-list without any event, and on an ERROR event it cannot retry', async () => {
    for (const how of ['end', 'error'] as const) {
      const t = new ScriptedTransport();
      t.lists = [{ resourceVersion: '20', items: [] }];
      const { calls, kinds, stop } = setup(t);
      await flush();
      if (how === 'end') t.watches[0]!.end();
      else t.watches[0]!.send('ERROR', { kind: 'Status', code: 500, reason: 'InternalError', message: 'boom' });
      await flush();
      assert.deepEqual(calls, ['synced'], how);
      assert.ok(kinds().includes('watchListUnavailable'), how);
      assert.ok(!kinds().includes('backoff'), how);
      await stop();
    }
  });

  it('starts over from "" at once on a 410 or a 504 "Too large resource version" during the initial events', async () => {
    for (const failure of ['410', '504'] as const) {
      const t = new ScriptedTransport();
      const { calls, kinds, stop } = setup(t);
      await flush();
      t.watches[0]!.send('ADDED', obj('a', '5'));
      t.watches[0]!.send('BOOKMARK', endBookmark('6'));
      await flush();
      t.watches[0]!.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' });
      await flush();
      const w = t.watches[1]!;
      assert.equal(w.query['resourceVersion'], '6');
      w.send('ADDED', obj('b', '8'));
      if (failure === '410') w.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' });
      else w.fail(tooLarge());
      await flush();
      const again = t.watches[2]!;
      assert.equal(again.query['resourceVersion'], '', failure);
      again.send('ADDED', obj('c', '9'));
      again.send('BOOKMARK', endBookmark('9'));
      assert.deepEqual(calls, ['add a@5', 'synced', 'add c@9', 'delete a@5', 'synced'], failure);
      assert.ok(!kinds().includes('backoff'), failure);
      assert.ok(kinds().includes(failure === '410' ? 'expired' : 'behind'), failure);
      // Once through, the next relist asks from the version seen again.
      again.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' });
      await flush();
      assert.equal(t.watches[3]!.query['resourceVersion'], '9');
      await stop();
    }
  });

  it('backs off before asking again when a watch-list from "" gets a 410 too', async () => {
    const t = new ScriptedTransport();
    const { clock, kinds, stop } = setup(t);
    await flush();
    t.watches[0]!.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' });
    await flush();
    assert.equal(t.watches.length, 1, 'no tight loop');
    assert.ok(kinds().includes('backoff'));
    clock.advance(20);
    await flush();
    assert.equal(t.watches[1]!.query['resourceVersion'], '');
    assert.equal(t.watches[1]!.query['sendInitialEvents'], 'true');
    await stop();
  });

  it('backs off and streams again when the server cannot be reached or answers 429', async () => {
    for (const err of [
      Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
      new ApiStatusError(429, 'TooManyRequests', 'slow down'),
    ]) {
      const t = new ScriptedTransport();
      const { clock, kinds, stop } = setup(t);
      await flush();
      t.watches[0]!.fail(err);
      await flush();
      assert.equal(t.watches.length, 1);
      assert.ok(kinds().includes('backoff'));
      clock.advance(20);
      await flush();
      assert.equal(t.watches.length, 2);
      assert.equal(t.watches[1]!.query['sendInitialEvents'], 'true');
      assert.equal(t.listQueries.length, 0);
      await stop();
    }
  });

  it('is not used when off: the first request is a list', async () => {
    const t = new ScriptedTransport();
    t.lists = [{ resourceVersion: '20', items: [] }];
    const { stop } = setup(t, false);
    await flush();
    assert.deepEqual(t.listQueries, [{ resourceVersion: '0', limit: '500' }]);
    assert.equal(t.watches[0]!.query['sendInitialEvents'], undefined);
    await stop();
  });
});

describe('Reflector: a relist the server is behind', () => {
  it('lists again at once from "" after a 504 "Too large resource version", and backs off after a plain 504', async () => {
    const t = new ScriptedTransport();
    t.lists = [
      { resourceVersion: '20', items: [obj('a', '3')] },
      tooLarge(),
      { resourceVersion: '25', items: [obj('a', '3'), obj('b', '24')] },
    ];
    const { clock, calls, kinds, stop } = setup(t, false);
    await flush();
    t.watches[0]!.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' });
    await flush();
    assert.deepEqual(t.listQueries.slice(1), [{ resourceVersion: '20' }, { resourceVersion: '', limit: '500' }]);
    assert.deepEqual(calls, ['add a@3', 'synced', 'add b@24', 'synced']);
    assert.ok(kinds().includes('behind'));
    assert.ok(!kinds().includes('backoff'), 'no backoff, though the 504 carried Retry-After');
    // A 504 without that cause is a failure like any other: backed off.
    t.lists = [
      new ApiStatusError(504, 'Timeout', 'Timeout: request did not complete within 60s'),
      { resourceVersion: '30', items: [] },
    ];
    t.watches[1]!.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' });
    await flush();
    assert.ok(kinds().includes('backoff'));
    assert.equal(t.listQueries.length, 4);
    clock.advance(20);
    await flush();
    assert.equal(t.listQueries.length, 5);
    await stop();
  });
});
