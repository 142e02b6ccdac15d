import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger, levelForVerbosity, loggingObserver, teeObservers } from './logger.js';
import { nullObserver, type ProxierObserver } from '../engine/observer.js';

function sink() {
  const lines: Array<Record<string, unknown>> = [];
  return {
    lines,
    write: (s: string) => {
      for (const l of s.split('\n')) if (l) lines.push(JSON.parse(l));
    },
  };
}

test('verbosity maps to levels like klog -v', () => {
  assert.equal(levelForVerbosity(0), 'info');
  assert.equal(levelForVerbosity(1), 'info');
  assert.equal(levelForVerbosity(2), 'debug');
  assert.equal(levelForVerbosity(3), 'debug');
  assert.equal(levelForVerbosity(4), 'trace');
  assert.equal(levelForVerbosity(-1), 'info');
  assert.equal(levelForVerbosity(Number.NaN), 'info');
});

test('JSON lines with level labels; debug hidden at -v 0 and shown at -v 2', () => {
  const quiet = sink();
  const log0 = createLogger({ verbosity: 0, destination: quiet });
  log0.debug('hidden');
  log0.info({ a: 1 }, 'shown');
  assert.equal(quiet.lines.length, 1);
  assert.equal(quiet.lines[0]!.level, 'info');
  assert.equal(quiet.lines[0]!.msg, 'shown');
  assert.equal(quiet.lines[0]!.a, 1);
  assert.equal(quiet.lines[0]!.component, 'kube-proxy');
  assert.equal(typeof quiet.lines[0]!.time, 'string');

  const chatty = sink();
  const obs = loggingObserver(createLogger({ verbosity: 2, destination: chatty }));
  obs.syncSucceeded({
    family: 'IPv4',
    durationSeconds: 0.2,
    partial: true,
    finishedAt: 1,
    noLocalEndpoints: { internal: 0, external: 1 },
  });
  obs.queuedUpdate('IPv4', 1); // trace: hidden at -v 2
  obs.inputSkipped('service', 'ns/bad', 'no ports');
  obs.syncFailed('IPv6', new Error('restore failed'), 0.1);
  assert.deepEqual(
    chatty.lines.map((l) => [l.level, l.msg]),
    [
      ['debug', 'SyncProxyRules complete'],
      ['warn', 'skipping invalid object'],
      ['error', 'SyncProxyRules failed'],
    ],
  );
  assert.equal((chatty.lines[2]!.err as { message: string }).message, 'restore failed');
});

test('teeObservers delivers to all, even when one throws', () => {
  const seen: string[] = [];
  const bad: ProxierObserver = {
    ...nullObserver,
    changeRecorded: () => {
      throw new Error('x');
    },
  };
  const good: ProxierObserver = { ...nullObserver, changeRecorded: (k) => seen.push(k) };
  teeObservers(bad, good).changeRecorded('endpoint');
  assert.deepEqual(seen, ['endpoint']);
});
