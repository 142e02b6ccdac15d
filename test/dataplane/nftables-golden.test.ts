// Goldens: a full sync of the worked example (nftables-fixtures.ts) through
// NftablesPlanner (driver + reconciler) -> Fake.dump(), the sorted `add` form that upstream's
// TestOverallNFTablesRules compares (knftables' Fake.Dump), once per
// endpoint layout, the production layout (DEFAULT_ENDPOINT_LAYOUT) first.
//
// Provenance: each nftables-golden-<layout>.txt is generated from our
// renderer (`KPT_UPDATE_GOLDEN=1` rewrites them; review the diff before
// committing) and was reviewed against upstream's nftables design in
// pkg/proxy/nftables/proxier.go: the table, base chains with their hooks and
// priorities, helper chains, sets and maps with their comments
// (setupNFTables, nftablesBaseChains, nftablesJumpChains) and the
// per-service chains and elements (syncProxyRules), in the masquerade layout
// of 1.36 (kubernetes PRs #135800 and #136499: no mark-for-masquerade chain,
// the hairpin-connections set, endpoint chains only with affinity), not the
// older one that upstream's 2025 proxier_test.go still shows. The 'upstream' golden
// uses upstream's rule text everywhere; 'lean' and 'maps' differ only in
// how a service chain picks its endpoint (static.ts EndpointLayout).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { ENDPOINT_LAYOUTS, Fake, type EndpointLayout } from '../../src/dataplane/nftables/index.js';
import { NftablesPlanner } from '../../src/platform/nftables/planner.js';
import { workedExample } from './nftables-fixtures.js';

const UPDATE = process.env['KPT_UPDATE_GOLDEN'] === '1';

function goldenURL(layout: EndpointLayout): URL {
  return new URL(`./nftables-golden-${layout}.txt`, import.meta.url.replace('/dist/', '/'));
}

/** Compare with the golden, or rewrite it under KPT_UPDATE_GOLDEN=1. */
function assertGolden(layout: EndpointLayout, dump: string): void {
  if (UPDATE) writeFileSync(goldenURL(layout), dump);
  assert.equal(dump, readFileSync(goldenURL(layout), 'utf8'));
}

for (const layout of ENDPOINT_LAYOUTS) {
  test(`full sync of the worked example dumps exactly as the golden (${layout})`, () => {
    const { state, config } = workedExample();
    const fake = new Fake('ip');
    const r = new NftablesPlanner(config, layout);
    const { tx, partial } = r.plan(state, 0, null);
    assert.equal(partial, false);
    fake.run(tx);
    assertGolden(layout, fake.dump());
  });

  test(`first sync re-creates base chains once; a second full sync does not (${layout})`, () => {
    const { state, config } = workedExample();
    const fake = new Fake('ip');
    const r = new NftablesPlanner(config, layout);
    const first = r.plan(state, 0, null).tx;
    fake.run(first);
    assert.match(first.toString(), /^delete chain ip kube-proxy nat-prerouting$/m);
    const second = r.plan(state, 10, null).tx;
    assert.doesNotMatch(second.toString(), /^delete chain/m);
    // Elements are already there: a full sync against our memory re-adds none
    // (except a maps-layout endpoint map, which a full sync always rewrites whole).
    assert.doesNotMatch(second.toString().replace(/^add element ip kube-proxy endpoints-.*$/gm, ''), /^add element/m);
    fake.run(second);
    assertGolden(layout, fake.dump());
  });
}

test('the layouts differ only in how service chains pick an endpoint (and in the endpoint maps of maps)', () => {
  const service = (l: string) => / (service|local)-[A-Z0-9]{8}-|endpoints-/.test(l);
  const rest = (layout: EndpointLayout) =>
    readFileSync(goldenURL(layout), 'utf8')
      .split('\n')
      .filter((l) => !service(l));
  for (const layout of ENDPOINT_LAYOUTS) assert.deepEqual(rest(layout), rest('upstream'), layout);
});

test('nodePortAddresses MatchAll deletes nodeport-ips and dispatches NodePorts by fib', () => {
  const { state, config } = workedExample();
  const fake = new Fake('ip');
  const r = new NftablesPlanner({ ...config, nodePortAddresses: null });
  fake.run(r.plan(state, 0, null).tx);
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
