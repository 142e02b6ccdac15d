import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, test } from 'node:test';
import { hasCode } from '../core/errors.js';
import { run } from './exec.js';
import { armFaultInjection, injectedFault } from './faults.js';

afterEach(() => armFaultInjection(null));

test('a fault fires once per armed file, and never when disarmed', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpt-faults-'));
  try {
    writeFileSync(join(dir, 'exec-true'), '');
    assert.equal(injectedFault('exec-true'), false, 'disarmed: files are ignored');
    armFaultInjection(dir);
    await assert.rejects(run('true', []), (e: unknown) => {
      assert.ok(hasCode(e, 'KPT_EXEC_FAILED'));
      assert.match(String(e), /true {2}exited 1: injected fault/);
      return true;
    });
    assert.equal(existsSync(join(dir, 'exec-true')), false, 'the file is consumed');
    assert.equal((await run('true', [])).code, 0, 'the next run is real');
    assert.equal(injectedFault('netlink-netfilter'), false);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a pause fault blocks the operation once, then lets it run', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpt-faults-'));
  try {
    armFaultInjection(dir);
    writeFileSync(join(dir, 'exec-true'), 'pause 300\n');
    const t0 = Date.now();
    assert.equal((await run('true', [])).code, 0, 'the paused run succeeds');
    assert.ok(Date.now() - t0 >= 290, 'it waited');
    assert.equal(existsSync(join(dir, 'exec-true')), false);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
