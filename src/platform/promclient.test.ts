import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as prom from 'prom-client';
import { collectDefaultMetrics, Counter, Registry } from './promclient.js';

/** A scrape with the values taken out: the series, their labels, help texts and types, in order. */
function shape(text: string): string[] {
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => (l.startsWith('#') ? l : l.replace(/ [^ ]+$/, '')));
}

test('the default metrics are prom-client collectDefaultMetrics, series for series', async () => {
  const theirs = new prom.Registry();
  prom.collectDefaultMetrics({ register: theirs });
  const ours = new Registry();
  collectDefaultMetrics(ours);
  // Histogram buckets of the GC metric appear once a GC of that kind happened, and the active resources,
  // handles and requests by type are whatever is pending at that scrape: their help and type lines stay.
  const strip = (t: string) =>
    shape(t).filter((l) => !l.startsWith('nodejs_gc_duration_seconds') && !/^nodejs_active_\w+\{/.test(l));
  assert.deepEqual(strip(await ours.metrics()), strip(await theirs.metrics()));
  for (const r of [ours, theirs]) r.clear();
});

test('the CPU counters count the process CPU seconds', async () => {
  const r = new Registry();
  collectDefaultMetrics(r);
  const until = Date.now() + 30;
  while (Date.now() < until); // some CPU time to count
  const t = await r.metrics();
  const v = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(t)?.[1]);
  const [user, system, total] = ['user_', 'system_', ''].map((k) => v(`process_cpu_${k}seconds_total`));
  assert.ok(user! > 0.01, `user ${user}`);
  assert.ok(Math.abs(user! + system! - total!) < 1e-6, `${user} + ${system} = ${total}`);
  r.clear();
});

test('the metric types are prom-client own classes', () => {
  assert.equal(Counter, prom.Counter);
  assert.equal(Registry, prom.Registry);
});
