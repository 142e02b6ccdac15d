// Reading the userspace table back from `nft list ruleset` (explain, diff):
// listing.txt is what nft 1.0.6 listed after loading the
// transactions the renderer writes for portalPlan (test/dataplane/userspace-fixtures.ts) and
// the configs below, both families, in a
// throw-away network namespace. Read back into an nftables Fake, each table
// must hold exactly what the renderer's transaction leaves in the Fake: nft's
// spellings (named priorities, `redirect to :ip daddr`, `dnat to ip
// saddr:ip daddr`, elements over several lines) are undone on the way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { DataplaneConfig } from '../../../core/types.js';
import { Fake } from '../../../dataplane/nftables/fake.js';
import { nftFamily } from '../../../dataplane/nftables/names.js';
import { renderRules } from '../../../dataplane/userspace/rules.js';
import { TABLE_NAME } from '../../../dataplane/userspace/index.js';
import { userspaceTableFromListing } from './explain.js';
import { PORTAL_PORTS, portalPlan } from '../../../../test/dataplane/userspace-fixtures.js';

const LISTING = readFileSync(new URL('./listing.txt', import.meta.url.replace('/dist/', '/')), 'utf8');

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
    written.run(renderRules(portalPlan(family), PORTAL_PORTS, config));
    const read = userspaceTableFromListing(LISTING, fam);
    assert.ok(read, 'the table is in the listing');
    assert.equal(read.dump(), written.dump());
    assert.equal(read.sets.get('service-portals')!.elements.size, 2, 'elements listed over several lines');
    assert.equal(read.sets.get('no-endpoint-services')!.elements.size, 2);
  });
}

test('a listing without our table of that family reads as none', () => {
  assert.equal(
    userspaceTableFromListing(LISTING.replace(/table ip6 kube-proxy-userspace/, 'table ip6 other'), 'ip6'),
    null,
  );
});
