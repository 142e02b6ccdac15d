// Reading the userspace table back from `nft list ruleset` (explain, diff):
// userspace-listing.txt is what nft 1.0.6 listed after loading the
// transactions UserspaceRenderer writes for PLAN below, both families, in a
// throw-away network namespace. Read back into an nftables Fake, each table
// must hold exactly what the renderer's transaction leaves in the Fake: nft's
// spellings (named priorities, `redirect to :ip daddr`, `dnat to ip
// saddr:ip daddr`, elements over several lines) are undone on the way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { DataplaneConfig, IPFamily } from '../../src/core/types.js';
import { Fake } from '../../src/dataplane/nftables/fake.js';
import { nftFamily } from '../../src/dataplane/nftables/names.js';
import { renderRules } from '../../src/dataplane/userspace/rules.js';
import { TABLE_NAME, type UserspacePlan } from '../../src/dataplane/userspace/index.js';
import { userspaceTableFromListing } from '../../src/cmd/explainuserspace.js';

const LISTING = readFileSync(new URL('./userspace-listing.txt', import.meta.url.replace('/dist/', '/')), 'utf8');

function plan(family: IPFamily): UserspacePlan {
  const ip = (v4: string) => (family === 'IPv4' ? v4 : `fd00:172:30::${v4.split('.').pop()}`);
  return {
    listeners: new Map(),
    skipped: [],
    portals: [
      {
        servicePortKey: 'ns1/a:p',
        protocol: 'TCP',
        port: 80,
        clusterIP: ip('172.30.0.41'),
        internal: { kind: 'listener', listener: 'A' },
        externalIPs: [ip('192.168.99.11')],
        nodePort: 30080,
        external: { kind: 'listener', listener: 'AL' },
      },
      {
        servicePortKey: 'ns1/b:p',
        protocol: 'UDP',
        port: 53,
        clusterIP: ip('172.30.0.42'),
        internal: { kind: 'reject' },
        externalIPs: [],
        nodePort: 30053,
        external: { kind: 'drop' },
      },
      {
        servicePortKey: 'ns1/c:p',
        protocol: 'TCP',
        port: 81,
        clusterIP: ip('172.30.0.43'),
        internal: { kind: 'listener', listener: 'C' },
        externalIPs: [],
        nodePort: 0,
        external: null,
      },
    ],
  };
}

const PORTS = new Map([
  ['A', 40001],
  ['AL', 40002],
  ['C', 40003],
]);

for (const family of ['IPv4', 'IPv6'] as const) {
  test(`${family}: the listed table reads back as what the renderer wrote`, () => {
    const config: DataplaneConfig = {
      family,
      masqueradeMark: 0x4000,
      masqueradeAll: false,
      localDetector: { kind: 'none' },
      nodePortAddresses: family === 'IPv4' ? ['192.168.0.0/24', '10.1.0.0/16'] : ['fd00:1::/64'],
      localhostNodePorts: true,
      localIPs: [],
    };
    const fam = nftFamily(family);
    const written = new Fake(fam, TABLE_NAME);
    written.run(renderRules(plan(family), PORTS, config));
    const read = userspaceTableFromListing(LISTING, fam);
    assert.ok(read, 'the table is in the listing');
    assert.equal(read.dump(), written.dump());
    assert.equal(read.sets.get('service-portals')!.elements.size, 3, 'elements listed over several lines');
  });
}

test('a listing without our table of that family reads as none', () => {
  assert.equal(
    userspaceTableFromListing(LISTING.replace(/table ip6 kube-proxy-userspace/, 'table ip6 other'), 'ip6'),
    null,
  );
});
