// Golden test: reference 4.2 "Worked example - nftables" reproduced byte for
// byte by renderer -> Fake.dump() (the form upstream's TestOverallNFTablesRules
// compares against). The expected text is copied verbatim from the reference
// into nftables-golden.txt.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Fake } from '../../src/dataplane/nftables/fake.js';
import { NftablesRenderer } from '../../src/dataplane/nftables/renderer.js';
import { workedExample } from './nftables-fixtures.js';

const golden = readFileSync(new URL('./nftables-golden.txt', import.meta.url.replace('/dist/', '/')), 'utf8');

test('full sync of the worked example dumps exactly as reference 4.2', () => {
  const { state, config } = workedExample();
  const fake = new Fake('ip');
  const r = new NftablesRenderer(config);
  const { tx, partial } = r.render(state, 0, null);
  assert.equal(partial, false);
  fake.run(tx);
  assert.equal(fake.dump(), golden);
});

test('first sync re-creates base chains once; a second full sync does not', () => {
  const { state, config } = workedExample();
  const fake = new Fake('ip');
  const r = new NftablesRenderer(config);
  const first = r.render(state, 0, null).tx;
  fake.run(first);
  assert.match(first.toString(), /^delete chain ip kube-proxy nat-prerouting$/m);
  const second = r.render(state, 10, null).tx;
  assert.doesNotMatch(second.toString(), /^delete chain/m);
  // Elements are already there: a full sync against our memory re-adds none.
  assert.doesNotMatch(second.toString(), /^add element/m);
  fake.run(second);
  assert.equal(fake.dump(), golden);
});

test('nodePortAddresses MatchAll deletes nodeport-ips and dispatches NodePorts by fib', () => {
  const { state, config } = workedExample();
  const fake = new Fake('ip');
  const r = new NftablesRenderer({ ...config, nodePortAddresses: null });
  fake.run(r.render(state, 0, null).tx);
  const dump = fake.dump();
  assert.doesNotMatch(dump, /nodeport-ips/);
  assert.match(
    dump,
    /^add rule ip kube-proxy services fib daddr type local ip daddr != 127\.0\.0\.0\/8 meta l4proto \. th dport vmap @service-nodeports$/m,
  );
  assert.match(
    dump,
    /^add rule ip kube-proxy nodeport-endpoints-check ip daddr != 127\.0\.0\.0\/8 meta l4proto \. th dport vmap @no-endpoint-nodeports$/m,
  );
});
