import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventRecorder, microTime, nodeRef, serviceRef, type KubeEvent } from './eventrecorder.js';
import { FakeClock } from '../../test/support/fakeclock.js';

function setup(opts: { fail?: boolean; unanswered?: number } = {}) {
  const clock = new FakeClock(Date.parse('2026-12-02T01:00:00.123Z'));
  const posted: KubeEvent[] = [];
  let unanswered = opts.unanswered ?? 0;
  const rec = new EventRecorder({
    clock,
    host: 'node-a',
    sink: {
      async postEvent(e) {
        if (opts.fail) throw Object.assign(new Error('403 Forbidden'), { statusCode: 403 });
        if (unanswered-- > 0) throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
        posted.push(e as KubeEvent);
      },
    },
  });
  return { clock, posted, rec };
}

test('an event is an events.k8s.io/v1 Event as upstream posts it', async () => {
  const { posted, rec } = setup();
  rec.eventf(nodeRef('node-a'), 'Normal', 'Starting', 'StartKubeProxy');
  rec.eventf(serviceRef('ns1/web'), 'Warning', 'FailedToStartServiceHealthcheck', 'Listen', 'port 30000 in use');
  await rec.flush();
  assert.equal(posted.length, 2);
  const [start, hc] = posted as [KubeEvent, KubeEvent];
  assert.equal(start.apiVersion, 'events.k8s.io/v1');
  assert.equal(start.kind, 'Event');
  assert.equal(start.metadata.namespace, 'default', 'cluster-scoped objects report into default');
  assert.match(start.metadata.name, /^node-a\.[0-9a-f]+$/);
  assert.equal(start.eventTime, '2026-12-02T01:00:00.123000Z');
  assert.deepEqual(
    [start.reportingController, start.reportingInstance, start.type, start.reason, start.action, start.note],
    ['kube-proxy', 'kube-proxy-node-a', 'Normal', 'Starting', 'StartKubeProxy', ''],
  );
  assert.deepEqual(start.regarding, { kind: 'Node', name: 'node-a', uid: 'node-a' });
  assert.equal(hc.metadata.namespace, 'ns1');
  assert.deepEqual(hc.regarding, { kind: 'Service', namespace: 'ns1', name: 'web', uid: 'ns1/web' });
  assert.notEqual(start.metadata.name, hc.metadata.name);
});

test('identical events within 6 minutes are sent once; after that again', async () => {
  const { clock, posted, rec } = setup();
  for (let i = 0; i < 5; i++)
    rec.eventf(nodeRef('n'), 'Warning', 'FailedToStartMetricServer', 'StartKubeProxy', 'EADDRINUSE');
  rec.eventf(nodeRef('n'), 'Warning', 'FailedToStartMetricServer', 'StartKubeProxy', 'EACCES');
  await rec.flush();
  assert.equal(posted.length, 2);
  assert.equal(rec.suppressed, 4);
  clock.advance(6 * 60_000);
  rec.eventf(nodeRef('n'), 'Warning', 'FailedToStartMetricServer', 'StartKubeProxy', 'EADDRINUSE');
  await rec.flush();
  assert.equal(posted.length, 3);
});

test('each object has a bucket of 25 refilled one per 5 minutes; other objects are unaffected', async () => {
  const { clock, posted, rec } = setup();
  for (let i = 0; i < 40; i++) rec.eventf(serviceRef('ns/a'), 'Warning', 'R', 'Listen', `n${i}`);
  rec.eventf(serviceRef('ns/b'), 'Warning', 'R', 'Listen', 'x');
  await rec.flush();
  assert.equal(posted.filter((e) => e.regarding.name === 'a').length, 25);
  assert.equal(posted.filter((e) => e.regarding.name === 'b').length, 1);
  clock.advance(5 * 60_000);
  rec.eventf(serviceRef('ns/a'), 'Warning', 'R', 'Listen', 'later-1');
  rec.eventf(serviceRef('ns/a'), 'Warning', 'R', 'Listen', 'later-2');
  await rec.flush();
  assert.equal(posted.length, 27, 'one token back after 5 minutes');
});

test('a sink that fails never throws into the caller; failures are counted', async () => {
  const { rec } = setup({ fail: true });
  rec.eventf(nodeRef('n'), 'Normal', 'Starting', 'StartKubeProxy');
  await rec.flush();
  assert.equal(rec.failed, 1);
});

test('a post the server never answered is tried again 10 s later, up to 12 times; a refused one is not', async () => {
  const { clock, posted, rec } = setup({ unanswered: 2 });
  rec.eventf(nodeRef('n'), 'Warning', 'DatapathCanaryFailed', 'Probe', 'first');
  rec.eventf(nodeRef('n'), 'Normal', 'DatapathCanaryRecovered', 'Probe', 'second');
  const tick = () => new Promise((r) => setImmediate(r));
  await tick();
  assert.equal(posted.length, 0, 'the first try met a closed connection');
  clock.advance(9_999);
  await tick();
  assert.equal(posted.length, 0, 'not before 10 s');
  clock.advance(1);
  await tick();
  clock.advance(10_000);
  await rec.flush();
  assert.deepEqual(
    posted.map((e) => e.note),
    ['first', 'second'],
    'sent on the third try, the queue held in order',
  );
  assert.equal(rec.failed, 0);

  const gone = setup({ unanswered: 100 });
  gone.rec.eventf(nodeRef('n'), 'Normal', 'Starting', 'StartKubeProxy');
  for (let i = 0; i < 12; i++) {
    await tick();
    gone.clock.advance(10_000);
  }
  await gone.rec.flush();
  assert.equal(gone.posted.length, 0);
  assert.equal(gone.rec.failed, 1, 'dropped after 12 tries');
});

test('microTime has six fraction digits', () => {
  assert.equal(microTime(0), '1970-01-01T00:00:00.000000Z');
});
