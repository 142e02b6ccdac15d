import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  BufferedLineWriter,
  createLogger,
  levelForVerbosity,
  loggingObserver,
  outputStream,
  teeObservers,
} from './logger.js';
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

test('BufferedLineWriter holds whole lines up to its size, writes on overflow and on flush', () => {
  const writes: string[] = [];
  const w = new BufferedLineWriter((t) => writes.push(t), 10);
  w.writeLine('aaaa\n');
  w.writeLine('bbbb\n');
  assert.deepEqual(writes, [], 'ten bytes fit');
  assert.equal(w.pending, 10);
  w.writeLine('cc\n');
  assert.deepEqual(writes, ['aaaa\nbbbb\n'], 'the held lines go out before one that would not fit');
  w.writeLine('a line longer than the buffer\n');
  assert.deepEqual(
    writes.slice(1),
    ['cc\n', 'a line longer than the buffer\n'],
    'held first, then the long line at once',
  );
  w.writeLine('dd\n');
  w.flush();
  w.flush();
  assert.deepEqual(writes.slice(3), ['dd\n'], 'flush writes what is held, once');
});

function streams() {
  const out: string[] = [];
  const err: string[] = [];
  const levels = (xs: string[]) =>
    xs
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((l) => (JSON.parse(l) as { level: string }).level);
  return { out, err, fds: { out: (t: string) => out.push(t), err: (t: string) => err.push(t) }, levels };
}

function logAll(output: Parameters<typeof outputStream>[0], s: ReturnType<typeof streams>) {
  const log = createLogger({ verbosity: 2, destination: outputStream(output, s.fds) });
  log.debug('d');
  log.info('i');
  log.warn('w');
  log.error('e');
  log.fatal('f');
}

test('outputStream: everything on stderr unless split; split text sends warnings on, split json only errors', () => {
  const plain = streams();
  logAll(undefined, plain);
  assert.deepEqual(
    [plain.levels(plain.out), plain.levels(plain.err)],
    [[], ['debug', 'info', 'warn', 'error', 'fatal']],
  );

  const text = streams();
  logAll({ splitStream: true, errorsFrom: 'warn', infoBufferBytes: 0, flushFrequencyMs: 5000 }, text);
  assert.deepEqual(
    [text.levels(text.out), text.levels(text.err)],
    [
      ['debug', 'info'],
      ['warn', 'error', 'fatal'],
    ],
  );

  const json = streams();
  logAll({ splitStream: true, errorsFrom: 'error', infoBufferBytes: 0, flushFrequencyMs: 5000 }, json);
  assert.deepEqual(
    [json.levels(json.out), json.levels(json.err)],
    [
      ['debug', 'info', 'warn'],
      ['error', 'fatal'],
    ],
  );
});

test('outputStream: a buffered stdout holds info lines while errors go out at once, and flushes on its timer', async () => {
  const s = streams();
  const log = createLogger({
    destination: outputStream(
      { splitStream: true, errorsFrom: 'error', infoBufferBytes: 4096, flushFrequencyMs: 20 },
      s.fds,
    ),
  });
  log.info('held');
  log.error('now');
  assert.deepEqual([s.levels(s.out), s.levels(s.err)], [[], ['error']]);
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(s.levels(s.out), ['info'], 'the flush timer wrote it');
});
