// NftablesDataplane's control flow with a scripted runner (no kernel needed):
// what it asks nft, when it reads back, and that any failure makes the next
// sync full. The kernel behaviour itself is covered by test/e2e/nftables-kernel.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ExecError, type ExecResult } from '../exec.js';
import { NftablesDataplane, type NftRunner } from './dataplane.js';
import { FakeClock } from '../../../test/support/fakeclock.js';
import { workedExample } from '../../../test/dataplane/nftables-fixtures.js';

function scripted(tableListed: boolean, failScripts = 0) {
  const calls: string[] = [];
  let fails = failScripts;
  const runner: NftRunner = async (args, input) => {
    calls.push(args.join(' '));
    const ok = (stdout = ''): ExecResult => ({ stdout, stderr: '', code: 0 });
    if (args[0] === 'list' && args[1] === 'tables') return ok(tableListed ? 'table ip kube-proxy\n' : '');
    if (args[0] === '-j') return ok('{"nftables": [{"metainfo": {"version": "1.0.6"}}]}');
    if (args[0] === '-f') {
      assert.ok(input && input.length > 0);
      if (fails > 0) {
        fails--;
        throw new ExecError('nft', args, { stdout: '', stderr: 'Error: No such file or directory', code: 1 });
      }
      return ok();
    }
    if (args.join(' ') === 'delete table ip kube-proxy') return ok();
    throw new Error(`unexpected nft ${args.join(' ')}`);
  };
  return { calls, runner };
}

test('first sync: checks for the table, reads nothing back when absent, loads one script', async () => {
  const { state, config } = workedExample();
  const { calls, runner } = scripted(false);
  const dp = new NftablesDataplane({ config, runner, clock: new FakeClock() });
  const out = await dp.sync(state);
  assert.equal(out.partial, false);
  assert.deepEqual(calls, ['list tables ip', '-f -']);
  assert.ok((out.counters?.['nftables_operations'] ?? 0) > 50);
});

test('an existing table is read back as chains, sets and maps (not rules); partial syncs skip it', async () => {
  const { state, config } = workedExample();
  const { calls, runner } = scripted(true);
  const dp = new NftablesDataplane({ config, runner });
  await dp.sync(state);
  assert.deepEqual(calls.slice(0, 4).sort(), [
    '-j list chains ip',
    '-j list maps ip',
    '-j list sets ip',
    'list tables ip',
  ]);
  calls.length = 0;
  const out = await dp.sync({ ...state, fullSync: false, changedServices: new Set(['default/web']) });
  assert.equal(out.partial, true);
  assert.deepEqual(calls, []); // nothing changed in the service's objects: no nft run at all
});

test('a failed nft run is a KPT_SYNC_FAILED and the next sync is full again', async () => {
  const { state, config } = workedExample();
  const { calls, runner } = scripted(false, 1);
  const dp = new NftablesDataplane({ config, runner });
  await assert.rejects(dp.sync(state), (e: unknown) => (e as { code?: string }).code === 'KPT_SYNC_FAILED');
  calls.length = 0;
  const out = await dp.sync({ ...state, fullSync: false, changedServices: new Set() });
  assert.equal(out.partial, false);
  assert.deepEqual(calls, ['list tables ip', '-f -']);
});

test('cleanup deletes our table only when it exists', async () => {
  const { config } = workedExample();
  const a = scripted(true);
  await new NftablesDataplane({ config, runner: a.runner }).cleanup();
  const b = scripted(false);
  await new NftablesDataplane({ config, runner: b.runner }).cleanup();
  assert.deepEqual(a.calls, ['list tables ip', 'delete table ip kube-proxy']);
  assert.deepEqual(b.calls, ['list tables ip']);
});

test('onApplied reports each applied transaction, its size and path, and nothing for a failed one', async () => {
  const { state, config } = workedExample();
  const { runner } = scripted(false, 1);
  const applied: Array<[string, number, boolean, string]> = [];
  let texts = 0;
  const dp = new NftablesDataplane({
    config,
    runner,
    onApplied: (family, ops, partial, via) => applied.push([family, ops, partial, via]),
    onTransaction: () => texts++,
  });
  await assert.rejects(dp.sync(state));
  assert.equal(applied.length, 0); // the first script failed
  const out = await dp.sync(state);
  assert.equal(applied.length, 1);
  const [family, ops, partial, via] = applied[0]!;
  assert.deepEqual([family, partial, via], ['IPv4', false, 'nft']);
  assert.equal(ops, out.counters?.['nftables_operations']);
  assert.equal(texts, 2); // the text hook still sees both attempts
});
