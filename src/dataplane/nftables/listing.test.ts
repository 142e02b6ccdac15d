// Loading `nft list table ip kube-proxy` output (as nft 1.0.x printed it
// after a real NftablesDataplane sync) into the Fake: base chain hooks and
// priorities, the kernel's spellings turned back into the renderer's, rule
// comments split off, set flags and timeouts; and the tracer over the result.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hasCode } from '../../core/errors.js';
import { loadNftTable, normalizeNftRule, parseElementsJSON, parseNftListing } from './listing.js';
import type { Element } from './objects.js';
import { trace } from './trace.js';

const LISTING = `table ip kube-proxy {
	comment "rules for kube-proxy"
	set cluster-ips {
		type ipv4_addr
		comment "Active ClusterIPs"
		elements = { 172.30.0.10, 172.30.0.11,
			     172.30.0.12 }
	}

	set hairpin-connections {
		type ipv4_addr . ipv4_addr . inet_proto . inet_service
		comment "service hairpin connections"
		elements = { 10.181.0.1 . 10.181.0.1 . tcp . 80,
			     10.180.0.1 . 10.180.0.1 . tcp . 8080 }
	}

	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "ClusterIP, ExternalIP and LoadBalancer IP traffic"
		elements = { 1.2.3.4 . tcp . 80 : goto external-RKXNTCJ4-ns1/s1/tcp/http,
			     172.30.0.10 . tcp . 80 : goto service-KU4RYVEW-ns1/s0/tcp/http,
			     172.30.0.11 . tcp . 80 : goto service-RKXNTCJ4-ns1/s1/tcp/http }
	}

	map service-nodeports {
		type inet_proto . inet_service : verdict
		comment "NodePort traffic"
		elements = { tcp . 30080 : goto external-RKXNTCJ4-ns1/s1/tcp/http }
	}

	map no-endpoint-services {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "vmap to drop or reject packets to services with no endpoints"
		elements = { 172.30.0.12 . tcp . 80 comment "ns1/s2:http" : goto reject-chain }
	}

	map no-endpoint-nodeports {
		type inet_proto . inet_service : verdict
		comment "vmap to drop or reject packets to service nodeports with no endpoints"
	}

	map firewall-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "destinations that are subject to LoadBalancerSourceRanges"
		elements = { 1.2.3.4 . tcp . 80 : goto firewall-RKXNTCJ4-ns1/s1/tcp/http }
	}

	set affinity-SJX3BBQP-ns1/s1/tcp/http__10.181.0.1/80 {
		type ipv4_addr
		size 65535
		flags dynamic,timeout
		timeout 3h
	}

	set affinity-YVHP42AH-ns1/s1/tcp/http__10.181.0.2/80 {
		type ipv4_addr
		size 65535
		flags dynamic,timeout
		timeout 3h
	}

	chain filter-prerouting-pre-dnat {
		type filter hook prerouting priority dstnat - 10; policy accept;
		ct state new jump firewall-check
	}

	chain filter-output-pre-dnat {
		type filter hook output priority -110; policy accept;
		ct state new jump firewall-check
	}

	chain filter-input {
		type filter hook input priority filter; policy accept;
		ct state new jump nodeport-endpoints-check
		ct state new jump service-endpoints-check
	}

	chain filter-forward {
		type filter hook forward priority filter; policy accept;
		ct state new jump service-endpoints-check
		ct state new jump cluster-ips-check
	}

	chain filter-output {
		type filter hook output priority filter; policy accept;
		ct state new jump service-endpoints-check
		ct state new jump cluster-ips-check
	}

	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		jump services
	}

	chain nat-output {
		type nat hook output priority -100; policy accept;
		jump services
	}

	chain nat-postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		jump masquerading
	}

	chain services {
		ip daddr @cluster-ips ip saddr != 10.0.0.0/8 meta mark set meta mark | 0x00004000 comment "masquerade clusterIP traffic from outside cluster"
		ip daddr . meta l4proto . th dport vmap @service-ips
		fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports
	}

	chain masquerading {
		meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random
		ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random
	}

	chain cluster-ips-check {
		ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
	}

	chain service-endpoints-check {
		ip daddr . meta l4proto . th dport vmap @no-endpoint-services
	}

	chain nodeport-endpoints-check {
		ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports
	}

	chain firewall-check {
		ip daddr . meta l4proto . th dport vmap @firewall-ips
	}

	chain reject-chain {
		comment "helper for @no-endpoint-services / @no-endpoint-nodeports"
		reject
	}

	chain service-KU4RYVEW-ns1/s0/tcp/http {
		numgen random mod 3 0 meta l4proto tcp dnat to 10.180.0.1:8080
		numgen random mod 2 0 meta l4proto tcp dnat to 10.180.0.2:8080
		meta l4proto tcp dnat to 10.180.0.3:8080
	}

	chain firewall-RKXNTCJ4-ns1/s1/tcp/http {
		ip saddr != 203.0.113.0/25 drop
	}

	chain external-RKXNTCJ4-ns1/s1/tcp/http {
		ip saddr 10.0.0.0/8 goto service-RKXNTCJ4-ns1/s1/tcp/http comment "short-circuit pod traffic"
		fib saddr type local meta mark set meta mark | 0x00004000 comment "masquerade local traffic"
		fib saddr type local goto service-RKXNTCJ4-ns1/s1/tcp/http comment "short-circuit local traffic"
		goto local-RKXNTCJ4-ns1/s1/tcp/http
	}

	chain endpoint-SJX3BBQP-ns1/s1/tcp/http__10.181.0.1/80 {
		update @affinity-SJX3BBQP-ns1/s1/tcp/http__10.181.0.1/80 { ip saddr }
		meta l4proto tcp dnat to 10.181.0.1:80
	}

	chain endpoint-YVHP42AH-ns1/s1/tcp/http__10.181.0.2/80 {
		update @affinity-YVHP42AH-ns1/s1/tcp/http__10.181.0.2/80 { ip saddr }
		meta l4proto tcp dnat to 10.181.0.2:80
	}

	chain service-RKXNTCJ4-ns1/s1/tcp/http {
		ip saddr @affinity-SJX3BBQP-ns1/s1/tcp/http__10.181.0.1/80 goto endpoint-SJX3BBQP-ns1/s1/tcp/http__10.181.0.1/80
		ip saddr @affinity-YVHP42AH-ns1/s1/tcp/http__10.181.0.2/80 goto endpoint-YVHP42AH-ns1/s1/tcp/http__10.181.0.2/80
		numgen random mod 2 0 goto endpoint-SJX3BBQP-ns1/s1/tcp/http__10.181.0.1/80
		goto endpoint-YVHP42AH-ns1/s1/tcp/http__10.181.0.2/80
	}

	chain local-RKXNTCJ4-ns1/s1/tcp/http {
		ip saddr @affinity-SJX3BBQP-ns1/s1/tcp/http__10.181.0.1/80 goto endpoint-SJX3BBQP-ns1/s1/tcp/http__10.181.0.1/80
		goto endpoint-SJX3BBQP-ns1/s1/tcp/http__10.181.0.1/80
	}
}
`;

const el = (set: string, key: string[], value?: string): Element => ({
  kind: 'element',
  set,
  key,
  ...(value ? { value: [value] } : {}),
});

/** What parseTableJSON gives for the managed sets of this table (subset). */
const ELEMENTS = new Map<string, Element[]>([
  ['cluster-ips', ['172.30.0.10', '172.30.0.11', '172.30.0.12'].map((ip) => el('cluster-ips', [ip]))],
  [
    'service-ips',
    [
      el('service-ips', ['172.30.0.10', 'tcp', '80'], 'goto service-KU4RYVEW-ns1/s0/tcp/http'),
      el('service-ips', ['1.2.3.4', 'tcp', '80'], 'goto external-RKXNTCJ4-ns1/s1/tcp/http'),
    ],
  ],
  ['no-endpoint-services', [el('no-endpoint-services', ['172.30.0.12', 'tcp', '80'], 'goto reject-chain')]],
  ['firewall-ips', [el('firewall-ips', ['1.2.3.4', 'tcp', '80'], 'goto firewall-RKXNTCJ4-ns1/s1/tcp/http')]],
]);

test('parse: chains with hook and numeric priority, sets with type/flags/timeout, rules in renderer syntax', () => {
  const l = parseNftListing(LISTING);
  assert.equal(l.tableComment, 'rules for kube-proxy');
  const chain = (n: string) => l.chains.find((c) => c.name === n)!;
  assert.deepEqual(chain('filter-prerouting-pre-dnat'), {
    kind: 'chain',
    name: 'filter-prerouting-pre-dnat',
    type: 'filter',
    hook: 'prerouting',
    priority: -110,
  });
  assert.equal(chain('filter-output-pre-dnat').priority, -110);
  assert.equal(chain('nat-postrouting').priority, 100);
  assert.equal(chain('filter-input').priority, 0);
  assert.equal(chain('reject-chain').comment, 'helper for @no-endpoint-services / @no-endpoint-nodeports');
  assert.equal(chain('services').hook, undefined);
  const aff = l.sets.find((s) => s.name.startsWith('affinity-'))!;
  assert.deepEqual(aff, {
    kind: 'set',
    name: aff.name,
    type: 'ipv4_addr',
    flags: ['dynamic', 'timeout'],
    timeoutSeconds: 10800,
  });
  assert.equal(l.sets.find((s) => s.name === 'service-ips')!.type, 'ipv4_addr . inet_proto . inet_service : verdict');
  const services = l.rules.filter((r) => r.chain === 'services');
  assert.deepEqual(services[0], {
    kind: 'rule',
    chain: 'services',
    rule: 'ip daddr @cluster-ips ip saddr != 10.0.0.0/8 mark set mark or 0x00004000',
    comment: 'masquerade clusterIP traffic from outside cluster',
  });
  assert.equal(
    l.rules.filter((r) => r.chain === 'masquerading')[0]!.rule,
    'mark and 0x00004000 != 0x00000000 mark set mark xor 0x00004000 masquerade fully-random',
  );
  assert.equal(l.rules.filter((r) => r.chain === 'reject-chain').length, 1);
});

test('normalizeNftRule only rewrites the kernel spellings', () => {
  assert.equal(
    normalizeNftRule('fib saddr type local meta mark set meta mark | 0x00004000'),
    'fib saddr type local mark set mark or 0x00004000',
  );
  assert.equal(normalizeNftRule('ip daddr  @cluster-ips   reject'), 'ip daddr @cluster-ips reject');
  assert.equal(
    normalizeNftRule('meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.1.1.1 . 80, 1 : 10.1.1.2 . 80 }'),
    'meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.1.1.1 . 80, 1 : 10.1.1.2 . 80 }',
  );
  assert.equal(normalizeNftRule('meta l4proto tcp dnat to 10.1.1.1:80'), 'meta l4proto tcp dnat to 10.1.1.1:80');
});

test('a listing the parser does not know is refused', () => {
  assert.throws(
    () => parseNftListing('table ip kube-proxy {\n\tflowtable f {\n'),
    (e: unknown) => hasCode(e, 'KPT_INPUT_INVALID'),
  );
  assert.throws(
    () => parseNftListing('table ip kube-proxy {\n\tchain x {\n\t\taccept\n'),
    (e: unknown) => hasCode(e, 'KPT_INPUT_INVALID'),
  );
});

test('load + trace: ClusterIP over the lean numgen cascade, 1/3 each; no-endpoint REJECT; eTP Local external', () => {
  const fake = loadNftTable('ip', parseNftListing(LISTING), ELEMENTS);
  assert.equal(fake.chains.get('services')!.rules.length, 3);
  assert.equal(fake.listElements('service-ips').length, 2);
  const local = ['127.0.0.1', '192.168.0.2'];
  const r = trace(fake, { src: '10.0.0.5', dst: '172.30.0.10', port: 80 }, local);
  assert.equal(r.verdict, 'DNAT');
  assert.deepEqual(
    r.candidates.map((c) => c.endpoint),
    ['10.180.0.1:8080', '10.180.0.2:8080', '10.180.0.3:8080'],
  );
  for (const c of r.candidates) assert.ok(Math.abs(c.probability - 1 / 3) < 1e-12, String(c.probability));
  assert.equal(r.masq, false);
  const outside = trace(fake, { src: '203.0.113.2', dst: '172.30.0.10', port: 80 }, local);
  assert.equal(outside.masq, true, 'outside the cluster CIDR: marked in services, masqueraded in postrouting');
  assert.equal(trace(fake, { src: '10.0.0.5', dst: '172.30.0.12', port: 80 }, local).verdict, 'REJECT');
  const ext = trace(fake, { src: '203.0.113.2', dst: '1.2.3.4', port: 80 }, local);
  assert.deepEqual(
    ext.candidates.map((c) => [c.endpoint, c.probability]),
    [['10.181.0.1:80', 1]],
  );
  const blocked = trace(fake, { src: '203.0.113.200', dst: '1.2.3.4', port: 80 }, local);
  assert.equal(blocked.verdict, 'DROP', 'outside loadBalancerSourceRanges 203.0.113.0/25');
  assert.deepEqual(
    blocked.steps.map((x) => x.chain),
    ['filter-prerouting-pre-dnat', 'firewall-check', 'firewall-RKXNTCJ4-ns1/s1/tcp/http'],
  );
  assert.equal(trace(fake, { src: '10.0.0.5', dst: '172.30.0.99', port: 80 }, local).verdict, 'NONE');
});

/** `nft -j list table ip kube-proxy` items as nft 1.0.x printed them for a 'maps'-layout table (trimmed). */
const MAPS_JSON = JSON.stringify({
  nftables: [
    { metainfo: { version: '1.0.9', json_schema_version: 1 } },
    {
      set: {
        family: 'ip',
        name: 'cluster-ips',
        table: 'kube-proxy',
        type: 'ipv4_addr',
        handle: 24,
        elem: ['172.30.0.10', '172.30.0.12'],
      },
    },
    {
      map: {
        family: 'ip',
        name: 'no-endpoint-services',
        table: 'kube-proxy',
        type: ['ipv4_addr', 'inet_proto', 'inet_service'],
        map: 'verdict',
        elem: [
          [
            { elem: { val: { concat: ['172.30.0.12', 'tcp', 80] }, comment: 'ns1/s2:http' } },
            { goto: { target: 'reject-chain' } },
          ],
        ],
      },
    },
    {
      map: {
        family: 'ip',
        name: 'endpoints-service-KU4RYVEW-ns1/s0/tcp/http',
        table: 'kube-proxy',
        type: 'integer',
        map: 'ipv4_addr . inet_service',
        flags: ['interval'],
        elem: [
          [{ range: [0, 240239] }, { concat: ['10.180.0.1', 8080] }],
          [{ range: [240240, 480479] }, { concat: ['10.180.0.2', 8080] }],
          [{ range: [480480, 720719] }, { concat: ['10.180.0.3', 8080] }],
        ],
      },
    },
    {
      set: {
        family: 'ip',
        name: 'affinity-x',
        table: 'kube-proxy',
        type: 'ipv4_addr',
        flags: ['dynamic', 'timeout'],
        elem: ['10.0.0.9'],
      },
    },
    { set: { family: 'ip', name: 'other-table-set', table: 'filter', type: 'ipv4_addr', elem: ['1.1.1.1'] } },
  ],
});

test('parseElementsJSON: every non-dynamic set and map of the table, in the renderer form', () => {
  const els = parseElementsJSON(MAPS_JSON, 'kube-proxy');
  assert.deepEqual(
    [...els.keys()],
    ['cluster-ips', 'no-endpoint-services', 'endpoints-service-KU4RYVEW-ns1/s0/tcp/http'],
  );
  assert.deepEqual(
    els.get('cluster-ips')!.map((e) => e.key),
    [['172.30.0.10'], ['172.30.0.12']],
  );
  assert.deepEqual(els.get('no-endpoint-services'), [
    {
      kind: 'element',
      set: 'no-endpoint-services',
      key: ['172.30.0.12', 'tcp', '80'],
      value: ['goto reject-chain'],
      comment: 'ns1/s2:http',
    },
  ]);
  assert.deepEqual(els.get('endpoints-service-KU4RYVEW-ns1/s0/tcp/http')![1], {
    kind: 'element',
    set: 'endpoints-service-KU4RYVEW-ns1/s0/tcp/http',
    key: ['240240-480479'],
    value: ['10.180.0.2', '8080'],
  });
  assert.throws(
    () =>
      parseElementsJSON('{"nftables":[{"set":{"name":"s","table":"kube-proxy","elem":[{"weird":1}]}}]}', 'kube-proxy'),
    (e: unknown) => hasCode(e, 'KPT_INPUT_INVALID'),
  );
});

test("a 'maps'-layout table: typeof interval map parsed, the DNAT through it traced with slot-share probabilities", () => {
  const listing = parseNftListing(`table ip kube-proxy {
	map endpoints-service-KU4RYVEW-ns1/s0/tcp/http {
		typeof numgen random mod 720720 : ip daddr . th dport
		flags interval
		elements = { 0-240239 : 10.180.0.1 . 8080, 240240-480479 : 10.180.0.2 . 8080, 480480-720719 : 10.180.0.3 . 8080 }
	}

	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr 172.30.0.10 goto service-KU4RYVEW-ns1/s0/tcp/http
	}

	chain service-KU4RYVEW-ns1/s0/tcp/http {
		meta l4proto tcp dnat ip to numgen random mod 720720 map @endpoints-service-KU4RYVEW-ns1/s0/tcp/http
	}
}
`);
  assert.deepEqual(listing.sets[0], {
    kind: 'map',
    name: 'endpoints-service-KU4RYVEW-ns1/s0/tcp/http',
    type: 'integer : ipv4_addr . inet_service',
    typeOf: 'numgen random mod 720720 : ip daddr . th dport',
    flags: ['interval'],
  });
  assert.equal(
    listing.rules[1]!.rule,
    'meta l4proto tcp dnat ip addr . port to numgen random mod 720720 map @endpoints-service-KU4RYVEW-ns1/s0/tcp/http',
  );
  const els = parseElementsJSON(MAPS_JSON, 'kube-proxy');
  const fake = loadNftTable('ip', listing, new Map([...els].filter(([k]) => k.startsWith('endpoints-'))));
  const r = trace(fake, { src: '10.0.0.5', dst: '172.30.0.10', port: 80 }, ['127.0.0.1'], { strict: false });
  assert.deepEqual(
    r.candidates.map((c) => c.endpoint),
    ['10.180.0.1:8080', '10.180.0.2:8080', '10.180.0.3:8080'],
  );
  for (const c of r.candidates) assert.ok(Math.abs(c.probability - 1 / 3) < 1e-12);
});
