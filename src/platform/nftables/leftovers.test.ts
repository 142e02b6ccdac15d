// The other modes' view of the nftables mode's tables: each is asked for by
// name (never `nft list tables`, which makes nft read every rule of the
// family first), an absent one is nft's ENOENT, and any other failure is
// not taken for "absent".
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ExecError, type ExecResult } from '../exec.js';
import { cleanupNftablesLeftovers, hasTable, type NftRunner } from './leftovers.js';

function scripted(present: readonly string[], other?: string) {
  const calls: string[] = [];
  const runner: NftRunner = async (args) => {
    const line = args.join(' ');
    calls.push(line);
    const ok: ExecResult = { stdout: '', stderr: '', code: 0 };
    if (args[0] === 'delete') return ok;
    const name = `${args[2]} ${args[3]}`;
    if (present.includes(name)) return { ...ok, stdout: `table ${name} {\n}\n` };
    const stderr = other ?? `Error: No such file or directory\n${line}\n`;
    throw new ExecError('nft', args, { stdout: '', stderr, code: 1 });
  };
  return { calls, runner };
}

test('hasTable asks for the table by name; ENOENT is absent', async () => {
  const { calls, runner } = scripted(['ip kube-proxy']);
  assert.equal(await hasTable(runner, 'ip', 'kube-proxy'), true);
  assert.equal(await hasTable(runner, 'ip6', 'kube-proxy'), false);
  assert.deepEqual(calls, ['list table ip kube-proxy', 'list table ip6 kube-proxy']);
});

test('hasTable does not take another failure for an absent table', async () => {
  const { runner } = scripted([], 'Error: Operation not permitted\n');
  await assert.rejects(hasTable(runner, 'ip', 'kube-proxy'), ExecError);
});

test('cleanupNftablesLeftovers deletes, per family, only the tables that exist', async () => {
  const { calls, runner } = scripted(['ip kube-proxy', 'ip6 kube-proxy-ts-localhost']);
  await cleanupNftablesLeftovers(runner);
  assert.ok(!calls.some((c) => c.startsWith('list tables')), calls.join('; '));
  assert.deepEqual(
    calls.filter((c) => c.startsWith('delete')),
    ['delete table ip kube-proxy', 'delete table ip6 kube-proxy-ts-localhost'],
  );
});
