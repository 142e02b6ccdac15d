import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultV1Alpha1 } from './defaults.js';
import { platformApplyDefaults, v1alpha1ToResolved } from './convert.js';
import { formatFieldError } from './field.js';
import { logOutput } from './logging.js';
import { quantityValue } from './quantity.js';
import type { ResolvedConfig } from './types.js';
import { validateConfig } from './validate.js';

test('quantityValue reads resource quantities as apimachinery does, rounding up', () => {
  const cases: Array<[string, number]> = [
    ['0', 0],
    ['512', 512],
    ['2Ki', 2048],
    ['5Mi', 5 * 1024 * 1024],
    ['1.5Gi', 1.5 * 1024 ** 3],
    ['3M', 3_000_000],
    ['1k', 1000],
    ['2e3', 2000],
    ['0.5', 1],
    ['1m', 1],
    ['-1Ki', -1024],
  ];
  for (const [text, want] of cases) assert.equal(quantityValue(text), want, text);
  // "K" is not a suffix apimachinery knows (kilo is "k"), whatever the flag help says.
  for (const bad of ['1K', '1KiB', 'x', '', '.', '1Mi2'])
    assert.throws(() => quantityValue(bad), { code: 'KPT_INPUT_INVALID' }, bad);
});

function base(): ResolvedConfig {
  return platformApplyDefaults(v1alpha1ToResolved(defaultV1Alpha1()));
}

test('split stream and info buffer are refused without LoggingAlphaOptions, as component-base does', () => {
  const c = base();
  c.logging.options = { text: { splitStream: true, infoBufferSize: '0' }, json: { infoBufferSize: '1Mi' } };
  assert.deepEqual(validateConfig(c).errors.map(formatFieldError), [
    'logging.options.text.splitStream: Forbidden: Feature LoggingAlphaOptions is disabled',
    'logging.options.json.infoBufferSize: Forbidden: Feature LoggingAlphaOptions is disabled',
  ]);
  c.featureGates = { LoggingAlphaOptions: true };
  assert.deepEqual(validateConfig(c).errors, []);
  c.featureGates = { AllAlpha: true };
  assert.deepEqual(validateConfig(c).errors, [], 'AllAlpha turns the alpha gate on');
  c.logging.options.json = { infoBufferSize: '1K' };
  assert.deepEqual(validateConfig(c).errors.map(formatFieldError), [
    `logging.options.json.infoBufferSize: Invalid value: "1K": unable to parse quantity's suffix`,
  ]);
});

test('logOutput: only the options of the format in use count; text sends warnings to stderr, json only errors', () => {
  const c = base();
  assert.deepEqual(logOutput(c.logging, 5000), {
    splitStream: false,
    errorsFrom: 'warn',
    infoBufferBytes: 0,
    flushFrequencyMs: 5000,
  });
  c.logging.options = { text: { splitStream: true, infoBufferSize: '2Ki' }, json: { infoBufferSize: '1Mi' } };
  assert.deepEqual(logOutput(c.logging, 5000), {
    splitStream: true,
    errorsFrom: 'warn',
    infoBufferBytes: 2048,
    flushFrequencyMs: 5000,
  });
  c.logging.format = 'json';
  // json is not split, so its buffer size has no effect (upstream buffers only a split stdout).
  assert.deepEqual(logOutput(c.logging, 5000).splitStream, false);
  assert.equal(logOutput(c.logging, 5000).infoBufferBytes, 0);
  c.logging.options.json = { splitStream: true, infoBufferSize: '3Gi' };
  assert.deepEqual(logOutput(c.logging, 100), {
    splitStream: true,
    errorsFrom: 'error',
    infoBufferBytes: 2 * 1024 ** 3,
    flushFrequencyMs: 100,
  });
});
