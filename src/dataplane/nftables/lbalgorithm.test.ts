// The annotation kube-proxy-ts/lb-algorithm in nftables mode: what each
// algorithm renders in every layout (with and without ClientIP affinity),
// that random renders exactly what a Service without the annotation does,
// that every such rule reads back and compiles as nft compiles it, and that
// the tracer follows each choice (jhash computed as the kernel does).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LbAlgorithm } from '../../core/lbalgorithm.js';
import { syncStateFromObjects } from '../../core/snapshot.js';
import type { SyncState } from '../../core/types.js';
import { CLIENT_HASH_SEED, jhashBytes, reciprocalScale } from '../maglev.js';
import { NftablesPlanner } from '../../platform/nftables/planner.js';
import { compileRule } from '../../platform/nftables/nlrule.js';
import { Fake } from './fake.js';
import { normalizeNftRule } from './listing.js';
import { canonicalNftRule } from './tablediff.js';
import { ruleText } from './rule.js';
import { parseRule } from './ruleparse.js';
import { maglevBuckets, NFT_MAGLEV_M } from './serviceport.js';
import { ENDPOINT_LAYOUTS } from './static.js';
import { trace } from './trace.js';
import {
  NODE_CONFIG4,
  SERVICE_CIDR,
  TEST_NODE,
  endpoint,
  makeNode,
  makeService,
  makeSlice,
  slicePort,
  svcPort,
  withClusterIP,
} from '../../../test/support/fixtures.js';

const CONFIG = NODE_CONFIG4;
const EPS = ['10.180.0.1', '10.180.0.2', '10.180.0.3', '10.180.0.4'];

function state(algorithm: LbAlgorithm | undefined, affinity = false, eps = EPS): SyncState {
  const svc = withClusterIP(
    makeService('ns', 'web', (s) => {
      if (algorithm) s.metadata.annotations = { 'kube-proxy-ts/lb-algorithm': algorithm };
      s.spec.ports = [svcPort('p80', 80)];
      if (affinity) {
        s.spec.sessionAffinity = 'ClientIP';
        s.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: 100 } };
      }
    }),
    '172.30.0.41',
  );
  const slice = makeSlice('ns', 'web', 1, (s) => {
    s.endpoints = eps.map((ip) => endpoint(ip));
    s.ports = [slicePort('p80', 8080)];
  });
  return syncStateFromObjects({
    services: [svc],
    slices: [slice],
    family: 'IPv4',
    node: makeNode(TEST_NODE),
    serviceCIDRs: [SERVICE_CIDR],
    fullSync: true,
  });
}

function load(s: SyncState, layout = ENDPOINT_LAYOUTS[0]!) {
  const fake = new Fake('ip');
  const { tx } = new NftablesPlanner(CONFIG, layout).plan(s, 0);
  fake.run(tx);
  return { fake, tx };
}

const policyRules = (fake: Fake) =>
  [...fake.chains].filter(([name]) => name.startsWith('service-')).flatMap(([, c]) => c.rules.map((r) => r.rule));

const client = { src: '192.168.9.7', dst: '172.30.0.41', port: 80, protocol: 'TCP' as const };

test('random renders exactly what a Service without the annotation renders, in every layout', () => {
  for (const layout of ENDPOINT_LAYOUTS)
    for (const affinity of [false, true]) {
      const print = (s: SyncState) => load(s, layout).fake.dump();
      assert.equal(print(state('random', affinity)), print(state(undefined, affinity)), `${layout} ${affinity}`);
    }
});

test('each algorithm renders its choice in every layout, with and without affinity', () => {
  const want: Record<Exclude<LbAlgorithm, 'random'>, RegExp> = {
    'round-robin': /numgen inc mod 4 (map|vmap) \{ 0 : /,
    maglev: new RegExp(`jhash ip saddr \\. th sport mod ${NFT_MAGLEV_M} seed 0x6b707473 (map|vmap) \\{ 0 : `),
    'source-hash': new RegExp(`jhash ip saddr mod ${NFT_MAGLEV_M} seed 0x6b707473 (map|vmap) \\{ 0 : `),
  };
  for (const [algo, re] of Object.entries(want) as Array<[LbAlgorithm, RegExp]>)
    for (const layout of ENDPOINT_LAYOUTS)
      for (const affinity of [false, true]) {
        const where = `${algo} ${layout} affinity=${affinity}`;
        const { fake, tx } = load(state(algo, affinity), layout);
        const rules = policyRules(fake);
        const choice = rules.filter((r) => re.test(r));
        assert.equal(choice.length, 1, `${where}: ${rules.join('\n')}`);
        assert.equal(choice[0]!.includes(' vmap '), affinity, `${where}: endpoint chains only with affinity`);
        assert.ok(!rules.some((r) => r.includes('numgen random')), where);
        assert.equal(rules.filter((r) => r.startsWith('ip saddr @affinity-')).length, affinity ? 4 : 0, where);
        assert.ok(![...fake.sets.keys()].some((n) => n.startsWith('endpoints-')), `${where}: no 'maps' map`);
        for (const { object: o } of tx.operations) {
          if (o.kind !== 'rule') continue;
          assert.equal(ruleText(o.body!), o.rule);
          const parsed = parseRule(o.rule);
          assert.ok(parsed, `${where}: ${o.rule} reads back`);
          assert.deepEqual(compileRule(o.body!, 'ip'), compileRule(parsed, 'ip'), `${where}: ${o.rule}`);
          assert.ok(compileRule(o.body!, 'ip'), `${where}: ${o.rule} compiles`);
        }
      }
});

test('jhash compiles as nft 1.0.6 compiles it (nft --debug=netlink), for each family', () => {
  const seed = CLIENT_HASH_SEED;
  const body = (fam: 'ip' | 'ip6', sport: boolean) =>
    parseRule(
      `jhash ${fam} saddr${sport ? ' . th sport' : ''} mod 3 seed 0x6b707473 vmap { 0 : goto a , 1 : goto a , 2 : goto a }`,
    )!;
  const exprs = (fam: 'ip' | 'ip6', sport: boolean) => compileRule(body(fam, sport), fam)!.exprs.slice(0, -1);
  // [ payload load 4b @ network header + 12 => reg 2 ] [ payload load 2b @ transport header + 0 => reg 13 ]
  // [ hash reg 1 = jhash(reg 2, 8, 0x6b707473) % mod 3 ]
  assert.deepEqual(exprs('ip', true), [
    { k: 'payload', dreg: 2, base: 1, offset: 12, len: 4 },
    { k: 'payload', dreg: 13, base: 2, offset: 0, len: 2 },
    { k: 'jhash', sreg: 2, dreg: 1, len: 8, mod: 3, seed },
  ]);
  assert.deepEqual(exprs('ip', false), [
    { k: 'payload', dreg: 2, base: 1, offset: 12, len: 4 },
    { k: 'jhash', sreg: 2, dreg: 1, len: 4, mod: 3, seed },
  ]);
  // [ payload load 16b @ network header + 8 => reg 2 ] [ payload load 2b @ transport header + 0 => reg 3 ]
  // [ hash reg 1 = jhash(reg 2, 20, 0x6b707473) % mod 3 ]
  assert.deepEqual(exprs('ip6', true), [
    { k: 'payload', dreg: 2, base: 1, offset: 8, len: 16 },
    { k: 'payload', dreg: 3, base: 2, offset: 0, len: 2 },
    { k: 'jhash', sreg: 2, dreg: 1, len: 20, mod: 3, seed },
  ]);
  const inc = compileRule(parseRule('numgen inc mod 2 vmap { 0 : goto a , 1 : goto b }')!, 'ip')!;
  assert.deepEqual(inc.exprs[0], { k: 'numgen', dreg: 1, mod: 2, offset: 0, inc: true });
  assert.equal(compileRule(body('ip6', true), 'ip'), null, 'the other family');
});

test("nft's listing of the new choices reads back as the renderer's text", () => {
  // What `nft list` printed for these rules (nft 1.0.6): the l4proto match folded into `tcp sport`, and ", ".
  assert.equal(
    normalizeNftRule('dnat ip to jhash ip saddr . tcp sport mod 3 seed 0x6b707473 map { 0 : 10.0.0.1 . 80 }'),
    'meta l4proto tcp dnat ip addr . port to jhash ip saddr . th sport mod 3 seed 0x6b707473 map { 0 : 10.0.0.1 . 80 }',
  );
  assert.equal(
    normalizeNftRule('meta l4proto tcp dnat ip to numgen inc mod 2 map { 0 : 10.0.0.1 . 80 }'),
    'meta l4proto tcp dnat ip addr . port to numgen inc mod 2 map { 0 : 10.0.0.1 . 80 }',
  );
  assert.equal(
    canonicalNftRule('jhash ip saddr mod 3 seed 0x6b707473 vmap { 0 : goto a, 1 : goto b, 2 : goto a }'),
    canonicalNftRule('jhash ip saddr mod 3 seed 0x6b707473 vmap { 0 : goto a , 1 : goto b , 2 : goto a }'),
  );
});

test('the Maglev buckets: near-equal shares, independent of the endpoints order', () => {
  const eps = EPS.map((ip) => ({ ip, port: 8080 }));
  const b = maglevBuckets(eps as never);
  assert.equal(b.length, NFT_MAGLEV_M);
  const share = [0, 0, 0, 0];
  for (const i of b) share[i]!++;
  assert.ok(Math.max(...share) - Math.min(...share) <= 1, String(share));
  const reversed = maglevBuckets([...eps].reverse() as never).map((i) => 3 - i);
  assert.deepEqual(reversed, b);
});

test("the tracer: round-robin lists every endpoint; maglev (with the port) and source-hash give the kernel's pick", () => {
  const rr = trace(load(state('round-robin')).fake, client, CONFIG.localIPs);
  assert.deepEqual(
    rr.candidates.map((c) => [c.endpoint, c.probability]).sort(),
    EPS.map((ip) => [`${ip}:8080`, 0.25]),
  );
  const buckets = maglevBuckets(EPS.map((ip) => ({ ip, port: 8080 })) as never);
  const sorted = [...EPS].sort();
  const expect = (bytes: number[]) =>
    `${sorted[buckets[reciprocalScale(jhashBytes(Uint8Array.from(bytes), CLIENT_HASH_SEED), NFT_MAGLEV_M)]!]}:8080`;
  for (const affinity of [false, true]) {
    const mh = load(state('maglev', affinity)).fake;
    const sh = load(state('source-hash', affinity)).fake;
    const seen = new Set<string>();
    for (let sport = 40000; sport < 40020; sport++) {
      const r = trace(mh, client, CONFIG.localIPs, { sport });
      assert.deepEqual(
        r.candidates.map((c) => c.endpoint),
        [expect([192, 168, 9, 7, sport >> 8, sport & 255, 0, 0])],
      );
      seen.add(r.output);
    }
    assert.ok(seen.size >= 3, [...seen].join(' '));
    const all = trace(mh, client, CONFIG.localIPs);
    assert.equal(new Set(all.candidates.map((c) => c.endpoint)).size, 4, 'without the port: every endpoint');
    const total = all.candidates.reduce((s, c) => s + c.probability, 0);
    assert.ok(Math.abs(total - 1) < 1e-9, String(total));
    const r = trace(sh, client, CONFIG.localIPs);
    assert.deepEqual(
      r.candidates.map((c) => c.endpoint),
      [expect([192, 168, 9, 7])],
    );
  }
});
