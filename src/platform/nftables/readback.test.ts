// parseTableJSON (the full-sync read-back) against real `nft -j list table`
// output: nftables-readback.json was captured from a kernel (nft 1.0.6) after
// loading the worked example plus a service without endpoints. The parsed
// snapshot must equal what the Fake holds after the same transaction.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Fake } from '../../dataplane/nftables/fake.js';
import { NftablesPlanner } from './planner.js';
import { MANAGED_SETS } from '../../dataplane/nftables/static.js';
import { parseTableJSON } from './readback.js';
import { workedExample } from '../../../test/dataplane/nftables-fixtures.js';

const json = readFileSync(new URL('./nftables-readback.json', import.meta.url.replace('/dist/', '/')), 'utf8');

test('kernel JSON parses into the snapshot the Fake holds', () => {
  const { state, config } = workedExample(true);
  const fake = new Fake('ip');
  fake.run(new NftablesPlanner(config).plan(state, 0).tx);
  const f = fake.snapshot();
  const k = parseTableJSON(json, 'kube-proxy');
  assert.deepEqual([...k.chains].sort(), [...f.chains].sort());
  assert.deepEqual([...k.sets].sort(), [...f.sets].sort());
  for (const name of MANAGED_SETS) {
    if (!f.elements.has(name)) continue;
    const norm = (els: readonly { key: readonly string[]; value?: readonly string[]; comment?: string }[]) =>
      els.map((e) => JSON.stringify([e.key, e.value ?? null, e.comment ?? null])).sort();
    assert.deepEqual(norm(k.elements.get(name) ?? []), norm(f.elements.get(name)!), name);
  }
  assert.deepEqual(
    k.elements.get('no-endpoint-services')!.map((e) => e.comment),
    ['default/empty:dns'],
  );
});

test('a full sync against the parsed snapshot writes no element at all', () => {
  const { state, config } = workedExample(true);
  const tx = new NftablesPlanner(config).plan(state, 0, parseTableJSON(json, 'kube-proxy')).tx;
  assert.doesNotMatch(tx.toString(), /element/);
});

test('malformed output is refused, not guessed', () => {
  assert.throws(() => parseTableJSON('{"nope": 1}', 'kube-proxy'));
  assert.throws(() =>
    parseTableJSON(
      '{"nftables": [{"map": {"table": "kube-proxy", "name": "service-ips", "elem": [[{"concat": [{"x": 1}]}, {"goto": {"target": "a"}}]]}}]}',
      'kube-proxy',
    ),
  );
});
