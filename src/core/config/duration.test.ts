import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatDuration, parseDuration, HOUR, MILLISECOND, MINUTE, SECOND, MICROSECOND } from './duration.js';

test('parseDuration accepts Go forms', () => {
  const cases: Array<[string, number]> = [
    ['0', 0],
    ['0s', 0],
    ['30s', 30 * SECOND],
    ['1m30s', 90 * SECOND],
    ['24h0m0s', 24 * HOUR],
    ['500ms', 500 * MILLISECOND],
    ['1.5s', 1500 * MILLISECOND],
    ['.5s', 500 * MILLISECOND],
    ['1.s', SECOND],
    ['-1s', -SECOND],
    ['+2m', 2 * MINUTE],
    ['2h22m', 2 * HOUR + 22 * MINUTE],
    ['3us', 3 * MICROSECOND],
    ['3µs', 3 * MICROSECOND],
    ['3μs', 3 * MICROSECOND],
    ['7ns', 7],
    ['1h1m1s1ms1us1ns', HOUR + MINUTE + SECOND + MILLISECOND + MICROSECOND + 1],
    ['1.0000000001s', SECOND], // fraction below 1ns is truncated, as Go
  ];
  for (const [text, ns] of cases) assert.equal(parseDuration(text), ns, text);
});

test('parseDuration rejects what Go rejects, with Go messages', () => {
  assert.throws(() => parseDuration(''), /time: invalid duration ""/);
  assert.throws(() => parseDuration('5'), /time: missing unit in duration "5"/);
  assert.throws(() => parseDuration('1d'), /time: unknown unit "d" in duration "1d"/);
  assert.throws(() => parseDuration('abc'), /time: invalid duration "abc"/);
  assert.throws(() => parseDuration('-'), /invalid duration/);
  assert.throws(() => parseDuration('.s'), /invalid duration/);
  assert.throws(() => parseDuration('1s '), /unknown unit/);
});

test('formatDuration prints like Go Duration.String', () => {
  const cases: Array<[number, string]> = [
    [0, '0s'],
    [30 * SECOND, '30s'],
    [90 * SECOND, '1m30s'],
    [24 * HOUR, '24h0m0s'],
    [HOUR, '1h0m0s'],
    [15 * MINUTE, '15m0s'],
    [500 * MILLISECOND, '500ms'],
    [1500 * MILLISECOND, '1.5s'],
    [2 * MICROSECOND, '2µs'],
    [1, '1ns'],
    [-SECOND, '-1s'],
    [1_500, '1.5µs'],
    [61 * MINUTE + 500 * MILLISECOND, '1h1m0.5s'],
  ];
  for (const [ns, text] of cases) assert.equal(formatDuration(ns), text, text);
});

test('format(parse(x)) canonicalises and parse(format(d)) round-trips', () => {
  assert.equal(formatDuration(parseDuration('90s')), '1m30s');
  for (const d of [0, 1, 999, 1_000_001, 30 * SECOND, 25 * HOUR + 7 * MILLISECOND]) {
    assert.equal(parseDuration(formatDuration(d)), d);
  }
});
