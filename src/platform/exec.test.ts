// The runner on harmless commands (no netfilter): chunked stdin arrives whole,
// an early exit does not hang the writer, failures carry the exit code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hostRunner, prefixRunner } from './exec.js';

test('a multi-MiB input arrives complete and in order', async () => {
  const input = Array.from({ length: 200_000 }, (_, i) => `-A KUBE-SEP-${i} -j RETURN`).join('\n') + '\n';
  assert.ok(input.length > 4 << 20);
  const r = await hostRunner('sha256sum', [], { input });
  const { createHash } = await import('node:crypto');
  assert.equal(r.stdout.split(' ')[0], createHash('sha256').update(input).digest('hex'));
});

test('a command that exits without reading its input does not hang', async () => {
  const r = await hostRunner('true', [], { input: 'x'.repeat(8 << 20) });
  assert.equal(r.code, 0);
});

test('non-zero exit rejects with ExecError unless allowed; discardStdout drops output', async () => {
  await assert.rejects(hostRunner('false', []), (e: unknown) => (e as { code?: string }).code === 'KPT_EXEC_FAILED');
  assert.equal((await hostRunner('false', [], { allowFailure: true })).code, 1);
  assert.equal((await hostRunner('echo', ['hi'], { discardStdout: true })).stdout, '');
  assert.equal((await prefixRunner(['env'])('echo', ['hi'])).stdout, 'hi\n');
});
