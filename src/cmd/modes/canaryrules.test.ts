// `diff` with the proxy stopped finds the canary's endpoint in the rules the
// kernel lists, in either family (IPv6 endpoints print bracketed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canaryEndpointInIptablesSave, canaryEndpointInNftTable } from './canaryrules.js';

test('iptables-save and ip6tables-save: the canary endpoint DNAT', () => {
  const v4 =
    '-A KUBE-SEP-ABC -p tcp -m comment --comment kube-proxy-ts.canary/datapath -m tcp -j DNAT --to-destination 192.168.77.12:40001\n';
  assert.deepEqual(canaryEndpointInIptablesSave(v4), ['192.168.77.12', 40001]);
  const v6 =
    '-A KUBE-SEP-DEF -s fd00:10:244:1::10/128 -j KUBE-MARK-MASQ\n' +
    '-A KUBE-SEP-GHI -p tcp -m comment --comment kube-proxy-ts.canary/datapath -m tcp -j DNAT --to-destination [fd00:77::12]:40002\n';
  assert.deepEqual(canaryEndpointInIptablesSave(v6), ['fd00:77::12', 40002]);
  assert.equal(canaryEndpointInIptablesSave('-A KUBE-SEP-X -j DNAT --to-destination 10.0.0.1:80\n'), null);
});

test('nft list table ip / ip6 kube-proxy: the dnat in the chain named after the canary', () => {
  const v4 = `table ip kube-proxy {
	chain endpoint-AB3FQX2Q-kube-proxy-ts.canary/datapath/tcp/__192.168.77.12/40001 {
		ip saddr 192.168.77.12 jump mark-for-masquerade
		meta l4proto tcp dnat to 192.168.77.12:40001
	}
}`;
  assert.deepEqual(canaryEndpointInNftTable(v4), ['192.168.77.12', 40001]);
  const v6 = `table ip6 kube-proxy {
	chain service-X-shop/web/tcp/http {
		meta l4proto tcp dnat to [fd00:10:244:1::10]:80
	}
	chain service-QZ2K-kube-proxy-ts.canary/datapath/tcp/ {
		meta l4proto tcp dnat to [fd00:77::12]:40002
	}
}`;
  assert.deepEqual(canaryEndpointInNftTable(v6), ['fd00:77::12', 40002]);
  assert.equal(canaryEndpointInNftTable('table ip6 kube-proxy {\n}'), null);
});
