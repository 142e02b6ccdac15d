// Port of upstream TestSyncProxyRulesRepeated: a sequence of syncs against one
// Fake, each payload compared (after sortIPTablesRules) with upstream's
// expectation: partial syncs write only changed services' chains, deleted
// chains are declared and -X'd, and a failed partial restore (a dangling jump
// injected from outside) is followed by a full sync that repairs everything.
// Upstream's fake proxier: mark "0x4000", no --random-fully, no nfacct.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { EndpointSlice, Service } from '../../core/api.js';
import { syncStateFromObjects } from '../../core/snapshot.js';
import { chainsFromSave, DEFAULT_IPTABLES_OPTIONS, Fake } from './index.js';
import { IptablesPlanner } from '../../platform/iptables/planner.js';
import { service, slice } from '../../../test/cases/fixtures.js';
import { scenarioConfig } from '../../../test/cases/resolve.js';
import { sortRestoreText } from '../../../test/support/sortrules.js';

/** One planner for the file, as one dataplane keeps one (its memo and reconciler span the syncs). */
const planner = new IptablesPlanner();

const config = scenarioConfig(
  { name: 'r', refs: [], family: 'IPv4', setup: { services: [], slices: [] }, flows: [] },
  'iptables',
);
const options = {
  ...DEFAULT_IPTABLES_OPTIONS,
  randomFully: false,
  nfacct: { ctStateInvalidDropped: false, localhostNodePortsAccepted: false },
};

function svc(ns: string, name: string, ip: string, portName: string, port: number): Service {
  const s = service(name, { clusterIP: ip }, [{ name: portName, port }]);
  s.metadata.namespace = ns;
  return s;
}
function eps(ns: string, name: string, portName: string, port: number, ips: string[]): EndpointSlice {
  const s = slice(
    name,
    [{ name: portName, port }],
    ips.map((ip) => ({ ip })),
  );
  s.metadata.namespace = ns;
  return s;
}

const filter = (extra = '') => `*filter
:KUBE-NODEPORTS - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
${extra}-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
`;
const cip = (n: string, pn: string, ip: string, port: number, chain: string) =>
  `-A KUBE-SERVICES -m comment --comment "ns${n}/svc${n}:${pn} cluster IP" -m tcp -p tcp -d ${ip} --dport ${port} -j ${chain}\n`;
const nat = (chains: string[], services: string, rest = '') => `*nat
:KUBE-NODEPORTS - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
${chains.map((c) => `:${c} - [0:0]\n`).join('')}${services}-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE
${rest}COMMIT
`;
const sep = (chain: string, spn: string, ip: string, port: number) =>
  `-A ${chain} -m comment --comment ${spn} -s ${ip} -j KUBE-MARK-MASQ\n-A ${chain} -m comment --comment ${spn} -m tcp -p tcp -j DNAT --to-destination ${ip}:${port}\n`;
const svcMasq = (chain: string, spn: string, ip: string, port: number) =>
  `-A ${chain} -m comment --comment "${spn} cluster IP" -m tcp -p tcp -d ${ip} --dport ${port} ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ\n`;
const toSep = (chain: string, spn: string, ep: string, sepChain: string, prob?: string) =>
  `-A ${chain} -m comment --comment "${spn} -> ${ep}"${prob ? ` -m statistic --mode random --probability ${prob}` : ''} -j ${sepChain}\n`;

const SVC1 = 'KUBE-SVC-XPGD46QRK7WJZT7O',
  SEP1 = 'KUBE-SEP-SNQ3ZNILQDEJNDQO';
const SVC2 = 'KUBE-SVC-2VJB64SDSIJUP5T6',
  SEP2 = 'KUBE-SEP-UHEGFW77JX3KXTOV';
const SVC3 = 'KUBE-SVC-X27LE4BHSL4DOUIK',
  SEP3a = 'KUBE-SEP-BSWRHOQ77KEXZLNL',
  SEP3b = 'KUBE-SEP-DKCFIS26GWF2WLWC',
  SEP3c = 'KUBE-SEP-JVVZVJ7BSEPPRNBS';
const SVC4 = 'KUBE-SVC-4SW47YFZTEDKD3PK',
  SEP4 = 'KUBE-SEP-AYCN5HPXMIRJNJXU';
const CIP1 = cip('1', 'p80', '172.30.0.41', 80, SVC1);
const CIP3 = cip('3', 'p80', '172.30.0.43', 80, SVC3);
const CIP4 = cip('4', 'p80', '172.30.0.44', 80, SVC4);
const svc1Rules = svcMasq(SVC1, 'ns1/svc1:p80', '172.30.0.41', 80) + toSep(SVC1, 'ns1/svc1:p80', '10.0.1.1:80', SEP1);
const svc3TwoEps =
  svcMasq(SVC3, 'ns3/svc3:p80', '172.30.0.43', 80) +
  toSep(SVC3, 'ns3/svc3:p80', '10.0.3.2:80', SEP3b, '0.5000000000') +
  toSep(SVC3, 'ns3/svc3:p80', '10.0.3.3:80', SEP3c);

test('TestSyncProxyRulesRepeated', () => {
  const fake = new Fake();
  const sync = (services: Service[], slices: EndpointSlice[], changed: string[]) => {
    const state = syncStateFromObjects({
      services,
      slices,
      family: 'IPv4',
      nodeIPs: { IPv4: '192.168.0.2' },
      fullSync: false,
      changedServices: changed,
    });
    const r = planner.plan({ state, config, options }, false, chainsFromSave(fake.save('nat'), 'nat'));
    try {
      fake.restore(r.restoreText);
    } catch (e) {
      planner.failed(); // a failed restore makes the next sync full
      throw e;
    }
    return { r, text: sortRestoreText(r.restoreText.replaceAll('0x00004000', '0x4000')) };
  };
  const s1 = svc('ns1', 'svc1', '172.30.0.41', 'p80', 80),
    e1 = eps('ns1', 'svc1', 'p80', 80, ['10.0.1.1']);
  const s2 = svc('ns2', 'svc2', '172.30.0.42', 'p8080', 8080),
    e2 = eps('ns2', 'svc2', 'p8080', 8080, ['10.0.2.1']);
  const s3 = svc('ns3', 'svc3', '172.30.0.43', 'p80', 80);
  const s4 = svc('ns4', 'svc4', '172.30.0.44', 'p80', 80),
    e4 = eps('ns4', 'svc4', 'p80', 80, ['10.0.4.1']);

  // initial full sync
  let out = sync([s1, s2], [e1, e2], []);
  assert.equal(
    out.text,
    filter() +
      nat(
        [SEP1, SEP2, SVC2, SVC1],
        CIP1 + cip('2', 'p8080', '172.30.0.42', 8080, SVC2),
        sep(SEP1, 'ns1/svc1:p80', '10.0.1.1', 80) +
          sep(SEP2, 'ns2/svc2:p8080', '10.0.2.1', 8080) +
          svcMasq(SVC2, 'ns2/svc2:p8080', '172.30.0.42', 8080) +
          toSep(SVC2, 'ns2/svc2:p8080', '10.0.2.1:8080', SEP2) +
          svc1Rules,
      ),
  );

  // add a service with endpoints: only its chains are written
  out = sync([s1, s2, s3], [e1, e2, eps('ns3', 'svc3', 'p80', 80, ['10.0.3.1'])], ['ns3/svc3']);
  assert.equal(
    out.text,
    filter() +
      nat(
        [SEP3a, SVC3],
        CIP1 + cip('2', 'p8080', '172.30.0.42', 8080, SVC2) + CIP3,
        sep(SEP3a, 'ns3/svc3:p80', '10.0.3.1', 80) +
          svcMasq(SVC3, 'ns3/svc3:p80', '172.30.0.43', 80) +
          toSep(SVC3, 'ns3/svc3:p80', '10.0.3.1:80', SEP3a),
      ),
  );

  // delete a service: its chains are declared and deleted
  const e3a = eps('ns3', 'svc3', 'p80', 80, ['10.0.3.1']);
  out = sync([s1, s3], [e1, e3a], ['ns2/svc2']);
  assert.equal(out.text, filter() + nat([SEP2, SVC2], CIP1 + CIP3, `-X ${SEP2}\n-X ${SVC2}\n`));

  // add a service without endpoints: only a REJECT rule
  out = sync([s1, s3, s4], [e1, e3a], ['ns4/svc4']);
  assert.equal(
    out.text,
    filter(
      '-A KUBE-SERVICES -m comment --comment "ns4/svc4:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.44 --dport 80 -j REJECT\n',
    ) + nat([], CIP1 + CIP3),
  );

  // its endpoints arrive
  out = sync([s1, s3, s4], [e1, e3a, e4], ['ns4/svc4']);
  assert.equal(
    out.text,
    filter() +
      nat(
        [SEP4, SVC4],
        CIP1 + CIP3 + CIP4,
        sep(SEP4, 'ns4/svc4:p80', '10.0.4.1', 80) +
          svcMasq(SVC4, 'ns4/svc4:p80', '172.30.0.44', 80) +
          toSep(SVC4, 'ns4/svc4:p80', '10.0.4.1:80', SEP4),
      ),
  );

  // change an endpoint: SVC and SEP chains rewritten, the old SEP deleted
  out = sync([s1, s3, s4], [e1, eps('ns3', 'svc3', 'p80', 80, ['10.0.3.2']), e4], ['ns3/svc3']);
  assert.equal(
    out.text,
    filter() +
      nat(
        [SEP3a, SEP3b, SVC3],
        CIP1 + CIP3 + CIP4,
        sep(SEP3b, 'ns3/svc3:p80', '10.0.3.2', 80) +
          svcMasq(SVC3, 'ns3/svc3:p80', '172.30.0.43', 80) +
          toSep(SVC3, 'ns3/svc3:p80', '10.0.3.2:80', SEP3b) +
          `-X ${SEP3a}\n`,
      ),
  );

  // add an endpoint
  const e3c = eps('ns3', 'svc3', 'p80', 80, ['10.0.3.2', '10.0.3.3']);
  out = sync([s1, s3, s4], [e1, e3c, e4], ['ns3/svc3']);
  assert.equal(
    out.text,
    filter() +
      nat(
        [SEP3b, SEP3c, SVC3],
        CIP1 + CIP3 + CIP4,
        sep(SEP3b, 'ns3/svc3:p80', '10.0.3.2', 80) + sep(SEP3c, 'ns3/svc3:p80', '10.0.3.3', 80) + svc3TwoEps,
      ),
  );

  // no changes: no service chains at all
  out = sync([s1, s3, s4], [e1, e3c, e4], []);
  assert.equal(out.text, filter() + nat([], CIP1 + CIP3 + CIP4));

  // a dangling jump from an unchanged chain makes the partial restore fail ...
  fake.ensureRule('append', 'nat', SVC3, ['-j', SEP4]);
  assert.throws(() => sync([s1, s3], [e1, e3c], ['ns4/svc4']), /KUBE-SEP-AYCN5HPXMIRJNJXU is referenced/);
  assert.ok(fake.hasChain('nat', SEP4), "svc4's endpoint chain survives the failed restore");

  // ... and the retry is a full sync that repairs it
  out = sync([s1, s3], [e1, e3c], []);
  assert.equal(out.r.partial, false);
  assert.equal(
    out.text,
    filter() +
      nat(
        [SEP4, SEP3b, SEP3c, SEP1, SVC4, SVC3, SVC1],
        CIP1 + CIP3,
        sep(SEP3b, 'ns3/svc3:p80', '10.0.3.2', 80) +
          sep(SEP3c, 'ns3/svc3:p80', '10.0.3.3', 80) +
          sep(SEP1, 'ns1/svc1:p80', '10.0.1.1', 80) +
          svc3TwoEps +
          svc1Rules +
          `-X ${SEP4}\n-X ${SVC4}\n`,
      ),
  );
  assert.ok(!fake.hasChain('nat', SEP4));
});
