import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hasCode } from '../errors.js';
import { resolveNodeName } from './nodename.js';

test('resolveNodeName: override wins, else OS hostname; trimmed and lower-cased', () => {
  assert.equal(resolveNodeName('', ' Worker-1 \n'), 'worker-1');
  assert.equal(resolveNodeName('From-File', 'os-host'), 'from-file');
  assert.throws(
    () => resolveNodeName('', '  '),
    (e) => hasCode(e, 'KPT_CONFIG_INVALID'),
  );
  assert.throws(
    () => resolveNodeName('   ', 'os-host'),
    (e) => hasCode(e, 'KPT_CONFIG_INVALID'),
    'a blank override is not replaced by the OS name',
  );
});
